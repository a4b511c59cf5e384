//===- TrainOps.td - train dialect ops ---------------------*- tablegen -*-===//

#ifndef ACCRUE_DIALECT_TRAIN_IR_TRAINOPS_TD
#define ACCRUE_DIALECT_TRAIN_IR_TRAINOPS_TD

include "accrue/Dialect/Train/IR/TrainBase.td"
include "accrue/Dialect/Train/IR/TrainAttrs.td"
include "mlir/Interfaces/CallInterfaces.td"
include "mlir/Interfaces/InferTypeOpInterface.td"
include "mlir/Interfaces/SideEffectInterfaces.td"
include "mlir/IR/SymbolInterfaces.td"

//===----------------------------------------------------------------------===//
// Loss and gradients
//===----------------------------------------------------------------------===//

def Train_ValueAndGradOp : Train_Op<"value_and_grad", [
    AttrSizedOperandSegments,
    DeclareOpInterfaceMethods<SymbolUserOpInterface>]> {
  let summary = "results of a function and the gradient of its first result";
  let description = [{
    Calls `callee` and returns all its results, followed by the gradient of
    its first result (an f32 scalar) with respect to each operand listed in
    `wrt`, in that order. The remaining results are carried along without a
    gradient (say, the count of a mean-reduced loss).

    Without `micro_batch`, operand types equal the callee's argument types.
    With `micro_batch = b`, the callee is written for a batch of `b`
    samples, and operands that differ from the callee's argument types only
    in dimension 0 (dynamic, or a multiple of `b`) hold a whole effective
    batch: the op then means the loss and gradients of the callee applied to
    that whole batch at once. `train-microbatch` rewrites this form into a
    loop over micro-batches; `train-autodiff` rewrites the plain form into a
    call of a generated gradient function.

    `valid` (with `micro_batch` only) is the number of real samples at the
    start of the batch operands; the rest is padding that must not count
    (a partial last window, padded to whole micro-batches).

    `seed`, when given, is the adjoint the backward pass starts from instead
    of 1 (loss scaling): the gradients come out multiplied by it, the first
    result does not.

    `loss_divisor` (with `micro_batch` only) says how the constant divisor
    of a loss `sum(x) / c` depends on the micro-batch: a count of samples or
    a fixed scale (see `#train.loss_divisor`).
  }];
  let arguments = (ins FlatSymbolRefAttr:$callee,
                   Variadic<AnyType>:$args,
                   Optional<I64>:$valid,
                   Optional<F32>:$seed,
                   DenseI64ArrayAttr:$wrt,
                   OptionalAttr<I64Attr>:$micro_batch,
                   OptionalAttr<Train_LossDivisorAttr>:$loss_divisor);
  let results = (outs Variadic<AnyType>:$results);
  let assemblyFormat = [{
    $callee `(` $args `)` (`valid` $valid^)? (`seed` $seed^)? attr-dict `:`
    functional-type($args, $results)
  }];
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    /// The number of results the callee returns (the rest are gradients).
    unsigned getNumCalleeResults() {
      return getNumResults() - getWrt().size();
    }
    /// The gradient results, one per `wrt` entry.
    ::mlir::ResultRange getGradients() {
      return getResults().drop_front(getNumCalleeResults());
    }
  }];
}

//===----------------------------------------------------------------------===//
// Flat arenas
//===----------------------------------------------------------------------===//

def Train_UnpackOp : Train_Op<"unpack", [Pure]> {
  let summary = "per-tensor views of a flat arena";
  let description = [{
    Result `i` is the slice `[offsets[i], offsets[i] + numel_i)` of `arena`
    reshaped to result `i`'s type. Slices do not overlap.
  }];
  let arguments = (ins Train_Arena:$arena, DenseI64ArrayAttr:$offsets);
  let results = (outs Variadic<RankedTensorOf<[F32]>>:$views);
  let assemblyFormat = [{
    $arena attr-dict `:` type($arena) `->` type($views)
  }];
  let hasVerifier = 1;
}

def Train_AccumulateOp : Train_Op<"accumulate", [Pure,
    AllTypesMatch<["accumulator", "result"]>]> {
  let summary = "add per-tensor gradients into a flat accumulator";
  let description = [{
    Adds `gradients[i]`, flattened, to the slice of `accumulator` that starts
    at `offsets[i]` (the layout of the matching `train.unpack`). After
    bufferization the accumulator is updated in place.

    Canonicalization adds the gradients of a whole-arena operand that is
    itself an accumulation into zeros directly (no temporary arena).
  }];
  let arguments = (ins Train_Arena:$accumulator,
                   Variadic<RankedTensorOf<[F32]>>:$gradients,
                   DenseI64ArrayAttr:$offsets);
  let results = (outs Train_Arena:$result);
  let assemblyFormat = [{
    $accumulator `,` $gradients attr-dict `:` type($accumulator) `,`
    type($gradients)
  }];
  let hasVerifier = 1;
  let hasCanonicalizer = 1;
}

def Train_StoreOp : Train_Op<"store", [Pure,
    AllTypesMatch<["arena", "result"]>]> {
  let summary = "write per-tensor values into the slices of a flat arena";
  let description = [{
    Overwrites the slice of `arena` that starts at `offsets[i]` with
    `values[i]`, flattened (the layout of the matching `train.unpack`); the
    rest of the arena is unchanged. After bufferization the arena is
    updated in place. The step writes the model's buffers (running
    statistics) back with it.
  }];
  let arguments = (ins Train_Arena:$arena,
                   Variadic<RankedTensorOf<[F32]>>:$values,
                   DenseI64ArrayAttr:$offsets);
  let results = (outs Train_Arena:$result);
  let assemblyFormat = [{
    $arena `,` $values attr-dict `:` type($arena) `,` type($values)
  }];
  let hasVerifier = 1;
}

def Train_RecomputeBarrierOp : Train_Op<"recompute_barrier", [
    AllTypesMatch<["input", "result"]>, MemoryEffects<[MemWrite]>]> {
  let summary = "a forward value as the backward's recomputation reads it";
  let description = [{
    The ops `train-autodiff` recomputes in the backward read the forward
    values they start from through this op. It returns its input, but it is
    not pure, so CSE cannot merge a recomputed op with the forward op it
    copies (which would make the forward value live into the backward
    again). `train-strip-recompute-barriers` removes it just before
    bufferization, after the last CSE.
  }];
  let arguments = (ins AnyRankedTensor:$input);
  let results = (outs AnyRankedTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input)";
}

def Train_AllReduceOp : Train_Op<"all_reduce", [
    AllTypesMatch<["accumulator", "result"]>]> {
  let summary = "sum an arena and scalars over the data-parallel ranks";
  let description = [{
    Returns `accumulator`, `loss_sum` and `count` summed over every rank of the
    data-parallel group, in one collective on one buffer: elements
    `[scalars_at, scalars_at + 2)` of the arena hold no gradient (they are
    zero), so the scalars travel there and the arena prefix
    `[0, scalars_at + 2)` is summed in place; those two elements are zero
    again afterwards. Not pure: it communicates, so it is neither moved nor
    removed by generic transformations. `train-microbatch` places one per
    micro-batch of a data-parallel step (as a step graph would) and
    `train-defer-collectives` moves it after the loop.

    With `scatter` (ZeRO, `train-shard-optimizer`) the arena is
    reduce-scattered instead: afterwards only this rank's shard of it (the
    step contract's `accrue_shard_begin`/`accrue_shard_size` of the arena's
    size) holds the sum, the rest is unspecified; the scalars are summed as
    before.
  }];
  let arguments = (ins Train_Arena:$accumulator, F32:$loss_sum, F32:$count,
                   I64Attr:$scalars_at, UnitAttr:$scatter);
  let results = (outs Train_Arena:$result, F32:$new_loss_sum, F32:$new_count);
  let assemblyFormat = [{
    $accumulator `,` $loss_sum `,` $count `scalars_at` $scalars_at
    (`scatter` $scatter^)? attr-dict `:` type($accumulator)
  }];
  let hasVerifier = 1;
}

def Train_AllReduceArenaOp : Train_Op<"all_reduce_arena", [
    AllTypesMatch<["accumulator", "result"]>]> {
  let summary = "sum an arena over the data-parallel ranks, in place";
  let description = [{
    Returns `accumulator` summed over every rank of the data-parallel group:
    one call of the step contract's collective hook on the buffer. This is
    `train.all_reduce` without its scalars, for targets where the loss sum
    and count already live in the arena's tail (the CUDA pipeline puts them
    there with device kernels). Not pure: it communicates.

    With `scatter_used` (ZeRO stage 1 on such targets) the arena is
    reduce-scattered instead, by the contract's reduce-scatter hook: the
    data ends at element `scatter_used`, whose last two elements (the loss
    sum and count) are summed on every rank; elsewhere only this rank's
    shard holds the sum afterwards.
  }];
  let arguments = (ins Train_Arena:$accumulator,
                   OptionalAttr<I64Attr>:$scatter_used);
  let results = (outs Train_Arena:$result);
  let builders = [
    OpBuilder<(ins "::mlir::Value":$accumulator), [{
      build($_builder, $_state, accumulator, ::mlir::IntegerAttr());
    }]>
  ];
  let assemblyFormat = [{
    $accumulator (`scatter_used` $scatter_used^)? attr-dict `:`
    type($accumulator)
  }];
}

def Train_AllGatherArenaOp : Train_Op<"all_gather_arena", [
    AllTypesMatch<["arena", "result"]>]> {
  let summary = "gather every rank's shard of an arena, in place";
  let description = [{
    Returns `arena` with each rank's shard (the step contract's
    `accrue_shard_begin`/`accrue_shard_size` of its size) replaced by that
    rank's values: one call of the contract's all-gather hook. ZeRO's
    sharded update (`train.fused_update` with `sharded`) ends with it on the
    parameters. Not pure: it communicates.
  }];
  let arguments = (ins Train_Arena:$arena);
  let results = (outs Train_Arena:$result);
  let assemblyFormat = "$arena attr-dict `:` type($arena)";
}

def Train_ReduceScatterAddOp : Train_Op<"reduce_scatter_add", [
    AllTypesMatch<["shard", "result"]>]> {
  let summary = "sum one gradient over the ranks into a sharded accumulator";
  let description = [{
    ZeRO stage 2 (`train-shard-optimizer` with `gradients`): `gradient`,
    flattened, is the slice of an `arena_size`-element arena that starts at
    `offset`. Its sum over the data-parallel ranks is added to `shard`, this
    rank's shard of the arena's accumulator (the step contract's
    `accrue_shard_begin`/`accrue_shard_size` of `arena_size`); the part of
    the slice outside the shard goes to the ranks that own it. One call of
    the contract's `accrue_reduce_scatter_add` hook, which may overwrite the
    gradient's buffer. Not pure: it communicates, so every rank must make
    the same calls in the same order.
  }];
  let arguments = (ins Train_Arena:$shard, RankedTensorOf<[F32]>:$gradient,
                   I64Attr:$offset, I64Attr:$arena_size);
  let results = (outs Train_Arena:$result);
  let assemblyFormat = [{
    $shard `,` $gradient `offset` $offset `of` $arena_size attr-dict `:`
    type($shard) `,` type($gradient)
  }];
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Clipping and optimizers
//===----------------------------------------------------------------------===//

def Train_GlobalNormOp : Train_Op<"global_norm", [Pure]> {
  let summary = "L2 norm of a whole arena";
  let description = [{
    `sqrt(sum(x^2))` over every element of `input` (all trainable
    parameters' gradients at once), as torch.nn.utils.clip_grad_norm_ with
    norm_type 2 computes it.
  }];
  let arguments = (ins Train_Arena:$input);
  let results = (outs F32:$norm);
  let assemblyFormat = "$input attr-dict `:` type($input)";
}

def Train_ClipCoefficientOp : Train_Op<"clip_coefficient", [Pure]> {
  let summary = "global-norm clipping factor";
  let description = [{
    `min(1, max_norm / (norm + 1e-6))`, as torch.nn.utils.clip_grad_norm_.
  }];
  let arguments = (ins F32:$norm, F32Attr:$max_norm);
  let results = (outs F32:$coefficient);
  let assemblyFormat = "$norm attr-dict";
}

def Train_ScaleOp : Train_Op<"scale", [Pure,
    AllTypesMatch<["input", "result"]>]> {
  let summary = "multiply an arena by a scalar";
  let arguments = (ins Train_Arena:$input, F32:$factor);
  let results = (outs Train_Arena:$result);
  let assemblyFormat = "$input `,` $factor attr-dict `:` type($input)";
}

def Train_UpdateOp : Train_Op<"update", [Pure, InferTypeOpAdaptor,
    AllTypesMatch<["params", "grads"]>]> {
  let summary = "one optimizer step over a parameter arena";
  let description = [{
    Applies `optimizer` to every element of `params` with the final
    gradient `grads` and the optimizer's state arenas; `lr` is this step's
    learning rate and `step` the 1-based optimizer step. Returns the new
    parameters followed by the new states. With `skip_nonfinite`, a
    gradient with a non-finite element (an overflow under loss scaling)
    leaves parameters and states unchanged.
  }];
  let arguments = (ins Train_Arena:$params, Train_Arena:$grads,
                   Variadic<Train_Arena>:$states, F32:$lr, I64:$step,
                   Train_OptimizerAttrInterface:$optimizer,
                   UnitAttr:$skip_nonfinite);
  let results = (outs Train_Arena:$new_params,
                 Variadic<Train_Arena>:$new_states);
  let assemblyFormat = [{
    $params `,` $grads (`states` `(` $states^ `)`)? `lr` $lr `step` $step
    attr-dict `:` type($params) (`,` type($states)^)?
  }];
  let hasVerifier = 1;
}

def Train_NextLossScaleOp : Train_Op<"next_loss_scale", [Pure]> {
  let summary = "GradScaler's rule: the loss scale and streak of the next step";
  let description = [{
    torch.amp.GradScaler's update, from this step's `scale`, the finite
    steps in a row before it (`streak`) and its gradient's global `norm`:
    a norm that is not finite (an overflow; the update skipped the step)
    multiplies the scale by `backoff` and restarts the streak; a finite one
    adds one to the streak, and the `interval`-th in a row multiplies the
    scale by `growth` and restarts the streak. `finite` says which. The
    scale is computed in f32. Static scaling is `growth = backoff = 1` with
    `interval = 0`: the scale never changes and the streak stays 0.

    Every target lowers it the same way (`convert-train-to-linalg`); the
    step reports the results in its metrics (`next_loss_scale`,
    `loss_scale_streak`), and a device step also keeps them in its
    loss-scale and streak buffers.
  }];
  let arguments = (ins F32:$scale, I64:$streak, F32:$norm, F64Attr:$growth,
                   F64Attr:$backoff, I64Attr:$interval);
  let results = (outs F32:$next_scale, I64:$next_streak, I1:$finite);
  let assemblyFormat = "$scale `,` $streak `,` $norm attr-dict";
  let hasVerifier = 1;
}

def Train_FusedUpdateOp : Train_Op<"fused_update", [Pure,
    InferTypeOpAdaptor]> {
  let summary = "norm, clip, unscale, optimizer and accumulator reset in one";
  let description = [{
    The end of an optimizer step over flat arenas, as two passes over the
    gradient memory. With `g = accumulator * grad_scale`: computes
    `norm = ||g||_2`; if `max_norm` is set, `c = min(1, max_norm /
    (norm + 1e-6))`, else `c = 1`; applies `optimizer` with gradient `c * g`;
    and returns the new parameters, a zeroed accumulator, the new states and
    `norm` (before clipping). `grad_scale` folds the exact loss
    normalization (`1 / count`) and loss-scale unscaling into one factor.
    With `skip_nonfinite`, a norm that is not finite (an overflow under
    loss scaling) leaves parameters and states unchanged; the accumulator
    is zeroed either way.

    With `sharded` (ZeRO stage 1, `train-shard-optimizer`) each
    data-parallel rank updates only its shard of the arenas: the
    accumulator is valid there only (a scattering `train.all_reduce`), the
    states hold the shard alone (`tensor<?xf32>`, as many elements as the
    shard), the norm is the square root of the sum over the ranks of their
    shards' squares, and the updated shards of the parameters are gathered
    on every rank. Under ZeRO stage 2 the accumulator is itself the shard
    (`tensor<?xf32>`, summed by `train.reduce_scatter_add`), and the
    zeroed shard is returned.
  }];
  let arguments = (ins Train_Arena:$params, Train_Arena:$accumulator,
                   Variadic<Train_Arena>:$states, F32:$grad_scale, F32:$lr,
                   I64:$step, Train_OptimizerAttrInterface:$optimizer,
                   OptionalAttr<F32Attr>:$max_norm, UnitAttr:$skip_nonfinite,
                   UnitAttr:$sharded);
  let results = (outs Train_Arena:$new_params, Train_Arena:$new_accumulator,
                 Variadic<Train_Arena>:$new_states, F32:$norm);
  let assemblyFormat = [{
    $params `,` $accumulator (`states` `(` $states^ `)`)? `grad_scale`
    $grad_scale `lr` $lr `step` $step attr-dict `:` type($params)
    `` custom<AccumulatorType>(ref(type($params)), type($accumulator))
    (`,` type($states)^)?
  }];
  let hasVerifier = 1;
}

#endif // ACCRUE_DIALECT_TRAIN_IR_TRAINOPS_TD
