//===- Passes.td - CUDA code generation passes ---------------*- tablegen -*-===//
//
// Passes that turn an explicit training step into one whose host code only
// launches kernels, calls the runtime (GEMMs, the all-reduce) and steers
// the micro-batch loop: every value computed from tensor data lives on the
// device, every temporary in one planned device workspace.
//
//===----------------------------------------------------------------------===//

#ifndef ACCRUE_CODEGEN_CUDA_PASSES_TD
#define ACCRUE_CODEGEN_CUDA_PASSES_TD

include "mlir/Pass/PassBase.td"

def CudaDeviceScalars : Pass<"cuda-device-scalars", "::mlir::func::FuncOp"> {
  let summary = "Pass the step's per-step scalars as device buffers";
  let description = [{
    The learning rate, the step number, the valid-sample count, the loss
    scale and the sample base change every optimizer step. A kernel that
    took them by value would bake them into a captured CUDA graph, so on a
    training step (a function with `train.abi`) each becomes a rank-0 buffer
    argument that kernels read, which the runtime refreshes before each
    replay. Its uses read it with `tensor.extract`.
  }];
  let dependentDialects = ["::mlir::bufferization::BufferizationDialect",
                           "::mlir::tensor::TensorDialect"];
}

def CudaDeviceLossScale
    : Pass<"cuda-device-loss-scale", "::mlir::func::FuncOp"> {
  let summary = "Keep the loss-scaling state on the device";
  let description = [{
    With loss scaling, the next step's loss scale and step number depend on
    whether this step's gradient was finite. On a training step with a
    `loss_scale` argument (after `cuda-device-scalars`: the loss scale, the
    step number and the `loss_scale_streak` are rank-0 buffers), this pass
    stores the results of the step's `train.next_loss_scale` (GradScaler's
    rule) into the loss-scale and streak buffers, and the step number plus
    one if the gradient was finite into the step buffer, so the host needs
    no result of a step to launch the next one.
  }];
  let dependentDialects = ["::mlir::arith::ArithDialect",
                           "::mlir::math::MathDialect",
                           "::mlir::memref::MemRefDialect",
                           "::mlir::bufferization::BufferizationDialect",
                           "::mlir::tensor::TensorDialect"];
}

def CudaJoinSliceSums : Pass<"cuda-join-slice-sums", "::mlir::func::FuncOp"> {
  let summary = "A sum of parts inserted into zeros as one tensor";
  let description = [{
    On tensors: the gradient of a tensor that was split (a Linear's output
    into attention's q, k and v) comes from the autodiff as the sum of each
    part's gradient inserted into zeros, a zero fill, a copy and a
    whole-tensor add per part. An elementwise sum (identity maps, a body
    adding each input once) of `tensor.insert_slice`s of static, disjoint,
    unit-stride boxes into zeros becomes the parts inserted into one tensor:
    into an empty tensor where they cover it, else into the zeros. Each
    element is one part's value plus zeros, or zeros, so the values are the
    same (a part's -0 stays -0, which the sum made +0).
  }];
  let dependentDialects = ["::mlir::tensor::TensorDialect"];
}

def CudaTensorizeScalars
    : Pass<"cuda-tensorize-scalars", "::mlir::func::FuncOp"> {
  let summary = "Keep scalars computed from tensor data on the device";
  let description = [{
    Scalars read from tensors (`tensor.extract` outside linalg bodies), and
    everything computed from them, become rank-0 tensors: each scalar op
    becomes a rank-0 `linalg.generic`, loop-carried scalars (the loss sum
    and count of the micro-batch loop) rank-0 loop-carried tensors, values
    that linalg bodies capture extra rank-0 inputs, and stores into buffers
    (the metrics) copies. After bufferization they are device buffers
    that kernels read and write; the host never loads them. A value that
    host code needs (a loop bound, a branch condition, an offset) is an
    error: it would synchronize the device.
  }];
  let dependentDialects = ["::mlir::linalg::LinalgDialect",
                           "::mlir::tensor::TensorDialect",
                           "::mlir::bufferization::BufferizationDialect",
                           "::mlir::memref::MemRefDialect"];
}

def CudaSplitReductions
    : Pass<"cuda-split-reductions", "::mlir::func::FuncOp"> {
  let summary = "Split reductions into two deterministic stages";
  let description = [{
    First, a column sum (from zeros, in f32, one kept dimension) whose
    values an input of a contraction in its block also holds (through
    collapse_shapes, widenings and roundings of widened values), where the
    contraction sums exactly the summed dimensions as K, has the kept one
    as that input's only loop in its output and has no batch loop, is a
    bias gradient: the two are marked as a pair (`accrue.bias_gradient`)
    and the sum stays whole, for cuda-contractions-to-gemm to compute as
    the GEMM's epilogue.

    A `linalg.generic` that reduces all of its iteration space into a
    rank-0 result (a loss sum, a count, the global norm) would run in one
    thread, and a row reduction (softmax's max and sum, LayerNorm's
    moments, a loss per sample) in one thread per row reading its row on
    its own. A row or full reduction of 32-bit values over
    `warp-elements` to 32 x `lane-elements` elements becomes a warp
    reduction: a generic over the output points and the 32 lanes of a
    warp (marked `accrue.warp_lanes`; a placeholder input indexes the
    lanes), whose lane l folds the elements l, l + 32, ... from the
    combining operation's identity (a warp reads a row's neighbouring
    elements together), then combines into the output point; into a
    constant fill, lane 0 combines with the constant and the fill goes.
    `cuda-form-kernels` combines the lanes by a butterfly of shuffles.
    Longer reductions, and other types, become stages: for every output
    point, T threads each reduce a strided share of its elements (thread
    p takes p, p + T, p + 2T, ...) into partials, each starting from the
    combining operation's identity in registers (the partials' buffer is
    not filled first), and the partials are reduced again the same way
    (a warp reduction, or a further split). Full reductions get a thread
    per `elements-per-thread` elements, up to `partials`, and their
    partials are split while there are at least `min-elements` of them;
    rows of at least `min-row-elements` elements get a warp or more (32
    elements a thread, up to `row-threads`). A column reduction (the
    inputs' contiguous dimension is an output dimension) keeps its
    partials threads-first, so that neighbouring threads take
    neighbouring output points and a warp reads along a row, and one
    thread per point folds its partials in order, starting from the
    original initial value. The split is fixed by the sizes, so the
    result is
    the same on every run. Reductions whose combining operation is not
    recognized (add, mul, max, min) are left alone. A dot product per row
    (a product summed along the inputs' contiguous rows, every parallel
    loop indexing both inputs: M = N = 1, as LayerNorm's, RMSNorm's and
    softmax's backward write them) is such a reduction, not a GEMM. Then
    every reduction
    into a constant `linalg.fill` (a sum's zeros, a maximum's -inf; split
    or not; products aside, which are GEMMs) becomes a parallel op whose
    thread folds its point's elements from that constant in a loop of its
    own, in the same order, writing a `tensor.empty`: the fill, a kernel
    of its own, goes.
  }];
  let options = [
    Option<"partials", "partials", "int64_t", "1048576",
           "Threads of the first stage of a full reduction (at most)">,
    Option<"elementsPerThread", "elements-per-thread", "int64_t", "64",
           "Elements each thread of a full reduction's first stage folds">,
    Option<"minElements", "min-elements", "int64_t", "64",
           "Full reductions over fewer elements stay in one thread">,
    Option<"rowThreads", "row-threads", "int64_t", "256",
           "Threads per row of the first stage of a row reduction (at most)">,
    Option<"minRowElements", "min-row-elements", "int64_t", "128",
           "Rows of fewer elements stay in one thread each">,
    Option<"warpElements", "warp-elements", "int64_t", "32",
           "Row (and full) reductions of 32-bit values over at least this "
           "many elements are warp reductions">,
    Option<"laneElements", "lane-elements", "int64_t", "64",
           "Elements each lane of a warp reduction folds (at most)">,
  ];
  let dependentDialects = ["::mlir::linalg::LinalgDialect",
                           "::mlir::tensor::TensorDialect",
                           "::mlir::arith::ArithDialect"];
}

def CudaFoldIntoContractions
    : Pass<"cuda-fold-into-contractions", "::mlir::func::FuncOp"> {
  let summary = "Move transposes and sums into contractions' indexing maps";
  let description = [{
    A GEMM reads its operands and writes its result through strides and
    sums over every dimension it is given. On tensors, a contraction
    (`out + a * b`) whose input is a transposed or copied tensor reads the
    original through the composed map; a zero-started contraction whose
    result is only summed over some dimensions (a Linear's weight gradient,
    summed over the samples) sums over them itself; one whose result is
    only transposed writes it transposed; one whose two inputs are both
    bf16 (or both f16) tensors widened to f32 by elementwise ops (as
    nn-to-linalg widens low-precision products) reads them and widens in
    its body, so that the GEMM reads bf16 and accumulates in f32. A
    widening whose values only data movement carries to contractions (a
    pad with a constant bf16 holds, a copy through any maps writing all of
    its output, a reshape; static shapes) moves past it: a convolution's
    padding and columns move bf16 values. A contraction that widens one
    input in its body while the other is f32 reads a widened copy instead
    (a GEMM's A and B share a type). Each rewrite removes a pass over
    memory (and the widened f32 copies) and leaves one contraction for
    `cuda-contractions-to-gemm`.
    A zero fill several contractions start from is cloned for each, so
    that each bufferizes into a zero-filled buffer of its own rather than
    a copy. An elementwise op that only rounds a zero-started
    contraction's f32 result (its only use) to bf16 or f16 is marked
    `accrue.gemm_rounding`: `fuse-elementwise` fuses it into nothing, and
    `cuda-contractions-to-gemm` has the GEMM write the rounded values. Its
    contraction's fill gets an empty tensor of its own (a shared one would
    bufferize into a buffer later ops reuse). Runs before elementwise
    fusion as well, so that widenings fold in before fusion merges them
    into their producers.
  }];
  let dependentDialects = ["::mlir::linalg::LinalgDialect"];
}

def CudaSortGatherGrads
    : Pass<"cuda-sort-gather-grads", "::mlir::func::FuncOp"> {
  let summary = "An embedding's gradient by sorting its tokens by row";
  let description = [{
    Rewrites `nn.gather_grad` along axis 0 (an embedding table's gradient:
    each token's row of the adjoint added into the row its id names) when
    the ids are computed at run time and there are at least `min-tokens`
    of them. As a loop over the tokens (nn-to-linalg's scatter-add) every
    thread of the kernel walks every token, and the one that owns a
    frequent id makes all of its updates in a chain. Instead, as PyTorch's
    deterministic embedding backward does, the tokens are sorted by (row,
    position) and each row's segment of the sorted tokens is summed:
    - the rank of each token's key, row x tokens + position, among all
      keys (a reduction over the tokens that `cuda-split-reductions`
      splits): keys are distinct, so the ranks are a permutation;
    - the keys written at their ranks (a loop of independent iterations:
      one thread per token in `cuda-form-kernels`), in tiles of about
      sqrt(tokens) keys, padded past every row;
    - per tile and feature, the sum of the tile's tokens of the row its
      last token names (the part of a segment that may go on into the
      next tile);
    - per sorted token that ends its row's segment and per feature (one
      thread each; no two write one element), the segment's sum: the
      tails of the segment's earlier tiles, then its tokens in its own
      tile, each in order, from 0, written into zero rows.
    Every thread's work is bounded by the shapes (tile + tiles terms),
    whatever the ids; the sums are deterministic. A segment within one
    tile sums its tokens in their order from 0, as the scatter-add does;
    one over several tiles sums each tile's part first. Ids wrap and
    clamp as `nn.gather` reads them.
  }];
  let options = [
    Option<"minTokens", "min-tokens", "int64_t", "64",
           "Fewer tokens keep the scatter-add">,
  ];
  let dependentDialects = ["::mlir::linalg::LinalgDialect",
                           "::mlir::scf::SCFDialect",
                           "::mlir::tensor::TensorDialect"];
}

def CudaContractionsToGemm
    : Pass<"cuda-contractions-to-gemm", "::mlir::ModuleOp"> {
  let summary = "Call the runtime's GEMM for contractions on buffers";
  let description = [{
    On a training step after bufferization, each `out + a * b`
    `linalg.generic` whose loops sort into a strided batched GEMM (batch
    loops in all operands, M in A and the output, N in B and the output,
    K reduced in A and B; loops of one kind collapsing where every operand
    lays them out contiguously; unit stride along rows or columns) becomes
    a call of `accrue_gemm` with the operands' addresses and strides. Loops
    of one iteration are dropped. M or N loops that do not collapse with
    the innermost ones of their kind are batch loops the other input does
    not have (batch stride 0: a convolution's samples for its weight). K
    loops that do not collapse (a convolution's weight gradient, over
    samples and pixels) are made to by copying each input whose K loops
    are apart with them innermost, in A's order. Of the batch loops, the
    largest run that collapses (the innermost of equals) is the GEMM's
    batch; the other batch loops run as host loops around the call, unless
    only inputs keep them apart (attention's samples and heads in two
    strides): each such input is copied first into a buffer of its own with
    the batch dimensions outermost, in the output's order (its innermost
    dimension stays innermost), and one call takes the whole batch. A
    zero fill right before it becomes beta = 0. A zero-started product
    whose rounding to bf16 or f16 cuda-fold-into-contractions marked
    (`accrue.gemm_rounding`), in a buffer of its own that only the rounding
    reads, is written rounded by the GEMM into the rounding's output (a
    buffer of its own, not an input, unused between the two): the f32
    buffer and the rounding go. A product added only into
    a part of the gradient accumulator is written there directly: beta = 0
    on the first micro-batch and 1 after when it is the only writer of that
    part, else 1; the temporary and the add disappear. bf16 and f16 inputs
    are passed as such; f32 inputs whose last writer before the product
    (the nearest op that may write their memory, out of loops only where
    nothing in the loop writes it, through transposes and copies) stored
    widened bf16 or f16 values over all of them are marked exact in that
    precision. A contraction that cuda-split-reductions paired with a bias
    gradient (`accrue.bias_gradient`) computes it as the call's epilogue
    (the sums over K of the input's rows or columns, written as an f32
    vector) where the GEMM has no batch, one loop of that input's M (N)
    kind, and the sum writes a contiguous f32 vector from a zero fill that
    nothing else touches in between; the sum and the fill go. Other
    contractions stay linalg ops (and become kernels).
  }];
  let dependentDialects = ["::mlir::func::FuncDialect",
                           "::mlir::memref::MemRefDialect",
                           "::mlir::arith::ArithDialect"];
}

def CudaFuseKernels : Pass<"cuda-fuse-kernels", "::mlir::func::FuncOp"> {
  let summary = "Fuse neighbouring elementwise ops on buffers into one op";
  let description = [{
    On buffers, after bufferization and before the workspace is planned:
    two elementwise linalg ops (no reduction loops, no warp reduction,
    static loop ranges) that follow each other in a block, with nothing
    between them but ops without memory effects (views, index arithmetic,
    allocations), become one `linalg.generic` over the second one's loops
    (the first one's loops reordered where its ranges are the second's
    permuted), so one kernel, where every buffer one of them writes and the
    other one accesses is accessed by both at the same element of the same
    point (the same buffer value and indexing map, a permutation): a thread
    does for its point what the two threads did, in order, and the values
    are the same. What the second reads of what the first writes is taken
    from the first's yield; an output of the first that nothing reads
    afterwards (the next access overwrites it, or there is none and the
    buffer was allocated in that block) is dropped, and its allocation
    with it. Unlike the fusion on tensors this fuses producers with several
    users (they are still stored, once) and ops written in place (the
    division after a reduction, a bf16 rounding of a GEMM's output). A
    transpose (an input strided along the output's contiguous loop) only
    joins elementwise ops before or after it that leave it one output and
    one buffer input (a rounding in place before it, an add into the
    gradient accumulator after it), so that cuda-form-kernels still tiles
    it. An elementwise op over the points of a warp reduction
    (`accrue.warp_lanes`, cuda-split-reductions) just before it becomes
    the reduction's epilogue: the body computes it after the combine, on
    the running value, which at the last lane is the point's result, so
    the op still reads as linalg defines it (LayerNorm's division of the
    sum by n, its 1 / sqrt(var + eps)). An epilogue may not read the old
    value of what it writes or write what the op reads; one writing over
    the reduction's output (a division in place) moves the running value
    to a buffer of its own, where the reduction starts from a constant.
    The epilogue's outputs take, at the last lane, what it computes there
    (`select(lane == 31, value, old)`), so it may read their old values: a
    gradient's accumulation into the accumulator. Repeated down the block,
    chains of any length become one op.

    Accesses compare by element: views of one buffer (a collapse, a
    subview) reach the same element where offset + sum of stride x index
    agree at every point, loops of one iteration reading as 0, so an op
    over [1, 1, n] and one over [n] align. Before fusing, an elementwise op
    moves up to just after the op that last touched what it touches,
    with the views it reads through, where it fuses there and nothing in
    between touches an element it reads or writes (views at disjoint
    static spans of one buffer do not meet; an address passed to a call
    counts as written): the accumulations the micro-batch's end holds join
    the warp or the transpose computing their gradients. A `memref.copy`
    becomes a `linalg.copy`, out of a collapsed view into the target
    expanded alike, so a split's part is written into its place in the
    whole by the op computing it.
  }];
  let dependentDialects = ["::mlir::linalg::LinalgDialect",
                           "::mlir::memref::MemRefDialect"];
}

def CudaGroupRows : Pass<"cuda-group-rows", "::mlir::func::FuncOp"> {
  let summary = "Mark the warp reductions and row maps of one row as one "
                "kernel";
  let description = [{
    On buffers, after cuda-fuse-kernels: a maximal run of warp reductions
    and row maps (elementwise ops, not transposes, whose last loop is the
    row) that follow each other in a block, with nothing with memory
    effects between them, over the same points (their loops of more than
    one iteration but the last), at least one of them a warp reduction,
    becomes a row group: each member gets `accrue.row_group` (the group's
    number). cuda-form-kernels makes one kernel of a group, a block per
    point running the members in order with a block barrier between them,
    and cuda-plan-workspace keeps every buffer a member touches live
    through the group. A member joins only where every element it and an
    earlier member may both access, one of them writing, lies in the rows
    of one point (the same row stride R, both windows within R elements),
    so that no block touches what another writes: the barrier orders only
    one block's threads. A LayerNorm (mean, x - mean, variance,
    normalization) and a softmax (mask, max, sum, division) are then one
    kernel each, forward and backward.

    An allocation only row groups use, where each group's first member to
    touch it writes it without reading what it held and every access of a
    group reaches, at each point p, elements [R L(p), R L(p) + R) of it (R
    its row stride, L the point's row-major index), is marked
    `accrue.row_local` ([group, R, ...]): no group reads what another
    wrote there, so cuda-form-kernels keeps each point's R elements in its
    block's workgroup memory (up to 16 KB a buffer and 32 KB a group) and
    cuda-plan-workspace gives it no workspace: softmax's fp32 masked
    scores, LayerNorm's per-row statistics.
  }];
}

def CudaPlanWorkspace : Pass<"cuda-plan-workspace", "::mlir::func::FuncOp"> {
  let summary = "Place every temporary in one device workspace";
  let description = [{
    Each `memref.alloc` of a training step becomes a `memref.view` into a
    new `workspace` argument (bytes, role workspace) at an offset planned
    from the buffers' lifetimes: buffers whose lifetimes do not overlap
    share memory, and the micro-batch loop's temporaries reuse the same
    offsets in every iteration, so the workspace depends on the micro-batch
    size, not on the number of micro-batches. `memref.dealloc` disappears.
    An allocation a row group keeps in workgroup memory (`accrue.row_local`,
    cuda-group-rows) is left to cuda-form-kernels.
    The runtime allocates the workspace once; nothing is allocated while
    a step runs (which a CUDA graph could not replay).
  }];
  let options = [
    Option<"alignment", "alignment", "int64_t", "256",
           "Byte alignment of every buffer in the workspace">,
  ];
  let dependentDialects = ["::mlir::memref::MemRefDialect",
                           "::mlir::arith::ArithDialect"];
}

def CudaFormKernels : Pass<"cuda-form-kernels", "::mlir::func::FuncOp"> {
  let summary = "Turn each linalg op on buffers into a gpu.launch";
  let description = [{
    Every linalg op (and `memref.copy`) of the step becomes one kernel:
    one thread per point of its parallel loops (linearized over a 1-D grid
    of `block-size` threads per block), each running the op's reduction
    loops sequentially, with its outputs kept in registers across them. An
    op without parallel loops (rank-0 scalar work, the second stage of a
    split reduction) runs in one thread. Elementwise ops over rank-1
    buffers (the fused optimizer update) stream instead: a grid-stride loop
    of at most `max-blocks` blocks in which each thread moves 4 consecutive
    elements of every operand with one aligned vector access (16 bytes for
    f32). A transpose (an elementwise op whose one buffer input is strided
    along the output's contiguous dimension, a cast included) takes a
    thread per 4 x 4 tile: 4 vector reads along the input's rows, 4 vector
    writes along the output's, lanes grouped so that a warp fills whole
    32-byte sectors on both sides. A warp reduction takes a warp per
    point; its epilogue (cuda-fuse-kernels) runs in lane 0 after the
    shuffles. A host loop over buffer elements (a
    scatter-add) runs in one thread, or, when its body is a loop of
    independent iterations (an embedding's gradient: features inside the
    tokens), one thread per iteration and range of the result's rows (at
    most 64 ranges, the grid's y dimension), each updating only its rows:
    every element still sums its terms in the loop's order. The members of
    a row group (cuda-group-rows) become one kernel of a block per point:
    each member's work for the block's point in turn, a block barrier
    (`gpu.barrier`) between two; a reduction's warps each fold a share of
    the row (warp w the lane loop's iterations w, w + W, ...) and leave
    their values in workgroup memory, which thread 0 folds in order after
    a barrier; a row map's threads take the row's elements t, t + 32 W,
    .... W is the most elements a lane of a member takes, at most
    `block-size` / 32 (a reduction whose share does not split over warps
    makes it 1).
  }];
  let options = [
    Option<"blockSize", "block-size", "int64_t", "256",
           "Threads per block">,
    Option<"maxBlocks", "max-blocks", "int64_t", "4096",
           "Blocks of a streaming kernel's grid-stride loop (at most)">,
    Option<"rowBarriers", "row-barriers", "bool", "true",
           "A barrier between a row group's members (false only to test "
           "that the race checker catches a missing one)">,
    Option<"reductionBarriers", "reduction-barriers", "bool", "true",
           "A barrier inside a row group's reductions, between the warps' "
           "values in workgroup memory and thread 0's fold (false only to "
           "test that the race checker catches a missing one)">,
  ];
  let dependentDialects = ["::mlir::gpu::GPUDialect",
                           "::mlir::vector::VectorDialect",
                           "::mlir::scf::SCFDialect",
                           "::mlir::memref::MemRefDialect",
                           "::mlir::affine::AffineDialect",
                           "::mlir::arith::ArithDialect"];
}

def CudaVerifyDeviceAccess
    : Pass<"cuda-verify-device-access", "::mlir::func::FuncOp"> {
  let summary = "Check that host code never touches device memory";
  let description = [{
    On a training step after kernel formation, every access to the
    contents of a buffer must be inside a kernel: host code may only
    compute with its own scalars, index into buffers (subviews, views,
    shapes), launch kernels and call the runtime's entries (the collective
    hook and the GEMM entries). A load, store, copy or linalg op left in
    host code, or a call that could read a buffer, fails compilation with
    the op's location (the ONNX node).
  }];
}

def CudaKernelReport : Pass<"cuda-kernel-report", "::mlir::func::FuncOp"> {
  let summary = "Print the report of a step's kernels and GEMM calls";
  let description = [{
    Prints, to standard output, the kernel report accrue-compile's
    `--kernel-report` makes of a step after `cuda-form-kernels`: per
    kernel its launches per micro-batch and per step, grid and block, the
    memory operations its first thread runs and how each global access of
    the first warp reaches memory (thread stride, 32-byte sectors); the
    GEMM calls. The IR is not changed.
  }];
  let options = [
    Option<"accumulationSteps", "accumulation-steps", "int64_t", "1",
           "Micro-batches per optimizer step">,
    Option<"json", "json", "bool", "false",
           "Print the JSON object step.json records instead of the table">,
  ];
}

def CudaMergeKernelModules
    : Pass<"cuda-merge-kernel-modules", "::mlir::ModuleOp"> {
  let summary = "Put every outlined kernel into one gpu.module";
  let description = [{
    Kernel outlining gives each kernel a module of its own. This moves every
    kernel (and the constant globals kernels read, once each) into one
    `gpu.module @kernels`, so a step is one PTX module per architecture,
    loaded once, and launches refer to `@kernels::@<kernel>`.
  }];
  let dependentDialects = ["::mlir::gpu::GPUDialect"];
}

def CudaEmulateKernels : Pass<"cuda-emulate-kernels", "::mlir::ModuleOp"> {
  let summary = "Run each gpu.launch as loops on the host (for testing)";
  let description = [{
    Replaces every `gpu.launch` by loops over its blocks and threads, in
    order, on the host. The kernels of `cuda-form-kernels` use no shared
    memory or barriers and each thread writes its own outputs, so running
    them one thread after the other computes what the GPU computes. A
    kernel with `gpu.shuffle` ops (the warp reductions), each outside any
    branch or loop, runs in phases, one per shuffle: for each block, every
    thread runs the ops before the shuffle, keeping each value a later
    phase uses in a buffer of one element per thread of the block
    (constants are cloned instead); then every thread runs the shuffle,
    reading the value its partner lane kept (xor, up, down and idx modes,
    within `width` lanes and the block, else its own: `shfl.sync`'s
    semantics), and what follows. A shuffle in a branch or a loop is an
    error naming it. The step then lowers for the CPU. This is how the CUDA
    pipeline's transformations are checked against the CPU artifacts on
    machines without a GPU. It says nothing about NVVM code generation or
    timing.

    With `count-accesses`, the emulated kernels also report every global
    load and store to the runtime (the counting emulator): each launch
    calls `accrue_emu_launch` with its kernel's report name and ONNX node
    and `accrue_emu_launch_end` after its last thread, each thread
    `accrue_emu_thread` with its ids, and each access `accrue_emu_access`
    with its index among the kernel's global accesses (the kernel report's
    order), the buffer it falls in and its byte offset there, its address,
    size and whether its indices lie inside the accessed view. An access
    outside its view is reported and skipped (a load gives zero), so a
    counted run never touches memory outside the buffers. The runtime
    counts the sectors of each warp's requests, the unique sectors of each
    launch and the longest chain of accesses of a thread, and checks that
    no two threads of a launch write one address or read what another
    wrote.
  }];
  let options = [
    Option<"countAccesses", "count-accesses", "bool", "false",
           "Report every global access of the emulated kernels to the "
           "runtime's counter (profile, race and bounds checks)">,
  ];
  let dependentDialects = ["::mlir::scf::SCFDialect",
                           "::mlir::func::FuncDialect",
                           "::mlir::memref::MemRefDialect",
                           "::mlir::arith::ArithDialect"];
}

#endif // ACCRUE_CODEGEN_CUDA_PASSES_TD
