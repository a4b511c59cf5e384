//===- NNScanOps.td - loops over a sequence -----------------*- tablegen -*-===//

#ifndef ACCRUE_DIALECT_NN_IR_NNSCANOPS_TD
#define ACCRUE_DIALECT_NN_IR_NNSCANOPS_TD

def NN_ScanOp : NN_Op<"scan", [IsolatedFromAbove, RecursiveMemoryEffects,
    SingleBlock, DeclareOpInterfaceMethods<NN_DifferentiableOpInterface>,
    DeclareOpInterfaceMethods<NN_SampleRowsOpInterface, ["getSampleRows"]>]> {
  let summary = "a loop over the time axis of batch-major sequences";
  let description = [{
    Runs its body once per step t of a static sequence length T, in order
    (or from T-1 down to 0 with `reverse`). The importer expresses ONNX RNN,
    GRU and LSTM with it: the cell is the body, written once, instead of T
    copies of it.

    `inputs` are, in order, `num_carries` initial carries, `num_scanned`
    scanned sequences `[N, T, ...]` and invariants (the weights). The body's
    arguments are the carries, step t of each scanned sequence (`[N, ...]`,
    the time axis 1 dropped) and the invariants; it yields the next carries
    and the step's outputs. The op's results are the final carries, each
    step output stacked along axis 1 (`[N, T, ...]`) and, with
    `saves_carries`, the carries entering each step stacked the same way:
    what the backward pass reads. Dimension 0 is the batch; the body treats
    samples independently.

    The VJP is one scan in the opposite direction whose body recomputes the
    step from the saved carries (reading what the forward stacked, such as
    its contractions' results summed with the adds that are their only use,
    an RNN's gate pre-activations, and the results of its sigmoids, tanhs
    and exps, whose adjoints read nothing else, instead of recomputing
    them) and
    differentiates it, carrying the carries' adjoints; the invariants'
    adjoints are running sums, or, when each step's term sums over the
    step's samples (a weight's h^T dz), one contraction over samples and
    steps after the loop.
  }];
  let arguments = (ins Variadic<NN_Tensor>:$inputs, I64Attr:$num_carries,
                   I64Attr:$num_scanned, UnitAttr:$reverse,
                   UnitAttr:$saves_carries);
  let results = (outs Variadic<NN_Tensor>:$results);
  let regions = (region SizedRegion<1>:$body);
  let assemblyFormat = [{
    `(` $inputs `)` attr-dict `:` functional-type($inputs, results) $body
  }];
  let hasVerifier = 1;
  let hasCanonicalizer = 1;
  let extraClassDeclaration = [{
    int64_t getNumSteps();
    int64_t getNumOutputs();
    ::mlir::OperandRange getCarryInits();
    ::mlir::OperandRange getScanned();
    ::mlir::OperandRange getInvariants();
    ::mlir::ResultRange getFinalCarries();
    ::mlir::ResultRange getStackedOutputs();
    ::mlir::ResultRange getSavedCarries();
    ::mlir::Block &getBodyBlock() { return getBody().front(); }
    /// `type` [N, ...] with a time axis of `steps` inserted at 1.
    static ::mlir::RankedTensorType stackedType(::mlir::Type type,
                                                int64_t steps);
    /// `type` [N, T, ...] without its time axis: a step's slice.
    static ::mlir::RankedTensorType stepType(::mlir::Type type);
    /// Creates the (empty) body: one argument per input, a step of each
    /// scanned input.
    ::mlir::Block &addBody();
    /// For each step output, the scanned input it can be stacked in place
    /// of (or -1): an output x_t + p (an RNN's gate pre-activations: its
    /// input projection plus the recurrent product) whose x is read by
    /// nothing else, and stacked with the same type. A loop then starts
    /// from x instead of an empty stack and adds p to each step's slice
    /// where it is, with no pass that adds and copies; such an output
    /// costs no memory, and is kept unread.
    ::llvm::SmallVector<int64_t> getInPlaceSources();
    /// Replaces `op` with the same scan (its body moved), built just before
    /// it, that saves what its VJP reads: the carries entering each step
    /// and, as new step outputs, the results of the step's contractions
    /// (each after the adds that are its only use, such as an RNN's gate
    /// pre-activations) and of its sigmoids, tanhs and exps (an LSTM's
    /// gates and tanh(c)), which the backward reads instead of recomputing
    /// them. Returns the new scan.
    static ScanOp saveForBackward(ScanOp op);
  }];
}

def NN_YieldOp : NN_Op<"yield", [Pure, Terminator, HasParent<"ScanOp">]> {
  let summary = "the next carries and the step's outputs of an nn.scan";
  let arguments = (ins Variadic<NN_Tensor>:$values);
  let assemblyFormat = "($values^ `:` type($values))? attr-dict";
}

#endif // ACCRUE_DIALECT_NN_IR_NNSCANOPS_TD
