//===- Passes.td - train passes ----------------------------*- tablegen -*-===//

#ifndef ACCRUE_DIALECT_TRAIN_TRANSFORMS_PASSES_TD
#define ACCRUE_DIALECT_TRAIN_TRANSFORMS_PASSES_TD

include "mlir/Pass/PassBase.td"

def TrainMixedPrecision : Pass<"train-mixed-precision", "::mlir::ModuleOp"> {
  let summary = "Compute the forward (and so the backward) in bf16 or fp16";
  let description = [{
    Rewrites the callee of every `train.value_and_grad` the way
    torch.autocast runs a model: matmuls, Gemms and convolutions take
    low-precision operands (casting fp32 parameters and activations);
    exp, log, pow, softmax, log-softmax, sums, means and the losses run in
    fp32; every other op runs in the widest precision of its operands, a
    scalar (rank 0) not widening a tensor of higher rank, as in PyTorch's
    type promotion. A matmul's bias add (an add of a matmul's only use and
    a vector along its last dimension: torch.nn.Linear over rank-3 inputs
    as the exporters write it) runs in fp32, its result rounded to the low
    precision, as the Linear's GEMM adds its bias before rounding. The
    loss stays fp32. Parameters remain fp32 arguments (master weights),
    cast where used, so their gradients, the accumulator and the optimizer
    state stay fp32; the casts' adjoints bring low-precision gradients back
    to fp32. Contractions and reductions on low-precision values accumulate
    in fp32 when lowered.
  }];
  let options = [
    Option<"precision", "precision", "AccruePrecision",
           "ACCRUE_PRECISION_BF16", "The compute precision",
           [{::llvm::cl::values(
               clEnumValN(ACCRUE_PRECISION_BF16, "bf16", "bfloat16"),
               clEnumValN(ACCRUE_PRECISION_FP16, "fp16", "IEEE half"))}]>,
  ];
  let dependentDialects = ["::accrue::nn::NNDialect"];
}

def TrainBuildStep : Pass<"train-build-step", "::mlir::ModuleOp"> {
  let summary = "Add a gradient-only @train_step around a forward function";
  let description = [{
    What accrue-compile does after importing an ONNX model, for a forward
    function written in MLIR: its arguments carry `train.role`
    (`#train.role<params>`, or buffers, batch, step, sample_base) and
    `train.name`; its first result
    is the loss, and any further results are the new values of buffer
    arguments, each naming its argument with `train.tied`. A loss
    `sum(x) / c` with a constant c is normalized through c only when the
    function says how c scales with the micro-batch
    (`train.loss_divisor = #train.loss_divisor<per_sample = d>`). The step
    takes flat arenas and a whole effective batch, and leaves the normalized
    gradient in the accumulator (no optimizer). Errors name the argument or
    result that breaks these rules.
  }];
  let options = [
    Option<"forward", "forward", "std::string", "\"forward\"",
           "The forward function">,
    Option<"microBatch", "micro-batch", "int64_t", "1",
           "Samples per micro-batch (dimension 0 of the batch inputs)">,
  ];
  let dependentDialects = ["::mlir::func::FuncDialect",
                           "::mlir::tensor::TensorDialect",
                           "::mlir::arith::ArithDialect",
                           "::accrue::nn::NNDialect"];
}

def TrainMicrobatch : Pass<"train-microbatch", "::mlir::ModuleOp"> {
  let summary = "Split whole-batch gradients into an accumulation loop";
  let description = [{
    Rewrites each `train.value_and_grad` that carries `micro_batch = b` and
    whose gradients feed one `train.accumulate` into an `scf.for` over the
    `K` micro-batches of its batch operands, with the flat accumulator and
    the loss sums carried as iter_args (updated in place after
    bufferization).

    Loss normalization is exact: a mean-reduced loss `L = N / D` (ReduceMean
    over all elements, SoftmaxCrossEntropyLoss with reduction=mean, with
    class weights and ignore_index) is split into its sum `N` and count `D`
    by cloning the forward function; `N` is differentiated, `N` and `D` are
    summed over micro-batches, and the accumulated gradient is divided once
    by the total `D` (a `train.scale` after the loop). A sum-reduced loss is
    accumulated as it is. Any other loss form is averaged over micro-batches
    ("mean of means") with a warning naming the node, as is every loss with
    `normalization=per-micro-batch`.
  }];
  let dependentDialects = ["::mlir::scf::SCFDialect",
                           "::mlir::tensor::TensorDialect",
                           "::mlir::arith::ArithDialect",
                           "::accrue::nn::NNDialect"];
  let options = [
    Option<"steps", "steps", "int64_t", "0",
           "Number of micro-batches; 0 derives it at run time from the batch "
           "operands' leading dimension">,
    Option<"normalization", "normalization", "AccrueLossNormalization",
           "ACCRUE_LOSS_NORMALIZATION_EXACT", "Loss normalization",
           [{::llvm::cl::values(
               clEnumValN(ACCRUE_LOSS_NORMALIZATION_EXACT, "exact",
                          "sum and count, divided once"),
               clEnumValN(ACCRUE_LOSS_NORMALIZATION_PER_MICRO_BATCH,
                          "per-micro-batch",
                          "the mean of the micro-batch means, as frameworks "
                          "do"))}]>,
    Option<"collectives", "collectives", "AccrueCollectives",
           "ACCRUE_COLLECTIVES_NONE", "Data-parallel gradient sums",
           [{::llvm::cl::values(
               clEnumValN(ACCRUE_COLLECTIVES_NONE, "none", "one process"),
               clEnumValN(ACCRUE_COLLECTIVES_PER_MICRO_BATCH,
                          "per-micro-batch",
                          "a train.all_reduce of each micro-batch's "
                          "gradients, loss sum and count inside the loop, as "
                          "a data-parallel step graph has it "
                          "(train-defer-collectives moves it after the "
                          "loop)"))}]>,
  ];
  let statistics = [
    Statistic<"numExact", "exact-normalizations",
              "Losses split into sum and count">,
    Statistic<"numMeanOfMeans", "mean-of-means",
              "Losses averaged over micro-batches">,
  ];
}

def TrainDeferCollectives
    : Pass<"train-defer-collectives", "::mlir::ModuleOp"> {
  let summary = "Move gradient all-reduces out of the micro-batch loop";
  let description = [{
    A `train.all_reduce` inside an `scf.for` whose results are only summed
    into loop-carried values (the arena by a whole-arena `train.accumulate`
    of the carried accumulator, the loss sum and the count by an
    `arith.addf` of the carried scalar, each yielded back to its own
    iter_arg and used nowhere else) sums the same values when it runs once
    after the loop on the loop's results: a sum over ranks of sums over
    micro-batches is a sum over micro-batches of sums over ranks. The pass
    then makes the loop accumulate the local values and places one
    all-reduce after it, on the accumulator, the loss sum and the count
    together. A carried value that does not provably start at zero (a zero
    constant or fill, or the step's `accumulator` argument, which the step
    ABI zeroes before every step) starts the loop at zero instead and is
    added after the all-reduce.

    An all-reduce that does not have that form stays where it is, with a
    warning saying which use prevents the move.
  }];
  let dependentDialects = ["::mlir::arith::ArithDialect",
                           "::mlir::linalg::LinalgDialect",
                           "::mlir::tensor::TensorDialect"];
  let statistics = [
    Statistic<"numDeferred", "deferred", "All-reduces moved after a loop">,
    Statistic<"numKept", "kept", "All-reduces left inside a loop">,
  ];
}

def TrainAutodiff : Pass<"train-autodiff", "::mlir::ModuleOp"> {
  let summary = "Reverse-mode differentiation of value_and_grad callees";
  let description = [{
    For each `train.value_and_grad` without `micro_batch`, generates (once
    per callee and `wrt` set) a function `@<callee>_grad_<wrt>` that computes the
    callee's results and the gradients of its first result: ops are visited
    in reverse order, adjoints of values with several uses are summed, and
    each op's `DifferentiableOpInterface::buildVJP` emits the adjoints of its
    operands. Only ops on a path from a `wrt` argument to the first result
    are differentiated. The `value_and_grad` becomes a `func.call`.

    Activation recomputation (checkpointing): forward values the backward
    uses are kept from the forward unless an option selects the op that
    computes them; a selected op is then cloned into the backward just
    before its first use there (reading the clones of selected operands),
    so its forward value dies with its last forward use. With
    `recompute-segments`, the forward is split at its cuts (activations
    that every path from the batch inputs to the loss passes through: the
    residual stream between a transformer's sub-blocks, an MLP's layer
    outputs) and every other differentiated activation is recomputed: only
    the cuts, the arguments, values computed from parameters alone and
    masks computed from the inputs alone live from the forward into the
    backward, and the backward recomputes one segment at a time, just
    before it differentiates it.
    `recompute-nodes` selects the ops of the ONNX nodes whose names (the
    ops' locations) the regex matches in full. `recompute-elementwise`
    selects the elementwise ops whose results only elementwise ops of the
    forward read (fusion keeps them in registers; only the backward would
    have them stored) and that apply a function to one tensor and
    constants, a tensor the backward has anyway: an argument, a value the
    backward reads itself, or the result of another selected op (a GELU's
    x / sqrt(2), its erf and 1 + erf, recomputed from the GELU's input).
    Every nn op is deterministic (Dropout's mask is a hash of its
    position), so the gradients are the same values either way.
  }];
  let options = [
    Option<"recomputeSegments", "recompute-segments", "bool", "false",
           "Keep only the forward's cuts and recompute the segments between "
           "them in the backward">,
    Option<"recomputeNodes", "recompute-nodes", "std::string", "\"\"",
           "Recompute the ops of ONNX nodes whose names match this regex">,
    Option<"recomputeElementwise", "recompute-elementwise", "bool", "false",
           "Recompute the elementwise ops that fusion keeps in registers "
           "from what the backward reads anyway">,
  ];
  let statistics = [
    Statistic<"numRecomputed", "recomputed", "Ops recomputed in the backward">,
  ];
  let dependentDialects = ["::mlir::func::FuncDialect",
                           "::accrue::nn::NNDialect"];
}

def TrainStripRecomputeBarriers
    : Pass<"train-strip-recompute-barriers", "::mlir::func::FuncOp"> {
  let summary = "Replace train.recompute_barrier by its input";
  let description = [{
    Runs after the last CSE before bufferization: from here on, nothing
    merges the ops `train-autodiff` recomputed with their forward copies.
  }];
}

def TrainFuseClipOptimizer
    : Pass<"train-fuse-clip-optimizer", "::mlir::func::FuncOp"> {
  let summary = "Fuse normalization, clipping, optimizer and reset";
  let description = [{
    Matches a `train.update` whose gradient is an accumulator scaled by
    constant or computed factors (exact normalization, unscaling) and
    optionally by `train.clip_coefficient` of the `train.global_norm` of
    that gradient, together with the `linalg.fill` that zeroes the
    accumulator, and replaces them with one `train.fused_update`: a norm
    pass and an update pass over the arenas instead of one pass per op.
  }];
  let dependentDialects = ["::mlir::arith::ArithDialect"];
  let statistics = [
    Statistic<"numFused", "fused-updates", "Optimizer updates fused">,
  ];
}

def TrainShardOptimizer
    : Pass<"train-shard-optimizer", "::mlir::func::FuncOp"> {
  let summary = "ZeRO stage 1: shard the optimizer state over the ranks";
  let description = [{
    In a data-parallel training step whose end is one `train.fused_update`
    of an accumulator summed by one `train.all_reduce` (after
    `train-defer-collectives` and `train-fuse-clip-optimizer`): the
    all-reduce becomes a reduce-scatter (`scatter`), the update is
    `sharded`, and the step's optimizer-state arguments and results hold
    this rank's shard only (`tensor<?xf32>`). Each rank then keeps 1/G of
    the optimizer state, updates 1/G of the parameters, and gathers the
    rest from the other ranks (`train.all_gather_arena`, which the update's
    lowering adds). Anything else reading the summed accumulator is an
    error: outside the rank's shard it holds no sum.

    With `gradients` (ZeRO stage 2) the accumulator is sharded too: the
    step's accumulator argument and the micro-batch loop carry this rank's
    shard only (`tensor<?xf32>`); each micro-batch's `train.accumulate` of
    its gradients becomes one `train.reduce_scatter_add` per gradient,
    placed right after the op that computes it, so that the backward's
    gradients need not all be live at once; and after the loop only the
    loss sum and count are all-reduced.
  }];
  let dependentDialects = ["::mlir::arith::ArithDialect",
                           "::mlir::func::FuncDialect",
                           "::mlir::tensor::TensorDialect"];
  let options = [
    Option<"gradients", "gradients", "bool", /*default=*/"false",
           "ZeRO stage 2: shard the gradient accumulator as well">,
  ];
  let statistics = [
    Statistic<"numSharded", "sharded-updates", "Optimizer updates sharded">,
    Statistic<"numScattered", "scattered-gradients",
              "Gradients reduce-scattered per micro-batch (stage 2)">,
  ];
}

def TrainFinalizeStepABI
    : Pass<"train-finalize-step-abi", "::mlir::ModuleOp"> {
  let summary = "Give training steps their in-place buffer calling convention";
  let description = [{
    Rewrites each function marked `train.step` from tensors in and out to
    the artifact's calling convention: every tensor argument becomes a
    memref that the step reads; results tied to an argument (`train.tied`)
    are written back into it in place; other tensor results are written
    into a new output argument each (in result order); f32 scalar results
    (loss, grad_norm) are stored into one trailing `memref<Nxf32>` metrics
    argument. The function gets `llvm.emit_c_interface`.
  }];
  let dependentDialects = ["::mlir::bufferization::BufferizationDialect",
                           "::mlir::memref::MemRefDialect",
                           "::mlir::arith::ArithDialect"];
}

def TrainOutlineMicrobatch
    : Pass<"train-outline-microbatch", "::mlir::ModuleOp"> {
  let summary = "Move each micro-batch loop body into its own function";
  let description = [{
    Runs on buffers, after bufferization. The body of every loop marked
    `train.microbatch_loop` (one micro-batch's forward and backward pass)
    becomes a private function `<step>_microbatch<N>` marked noinline, and
    the loop calls it. LLVM's loop passes (loop rotation, induction variable
    simplification) then see thousands of small loop nests in a function
    without an enclosing loop, instead of nests inside one huge loop, where
    their cost grows with the square of the model depth. The function also
    names the micro-batch work in profiles.
  }];
  let dependentDialects = ["::mlir::func::FuncDialect"];
}

#endif // ACCRUE_DIALECT_TRAIN_TRANSFORMS_PASSES_TD
