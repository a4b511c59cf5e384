//===- TrainBase.td - train dialect definition -------------*- tablegen -*-===//

#ifndef ACCRUE_DIALECT_TRAIN_IR_TRAINBASE_TD
#define ACCRUE_DIALECT_TRAIN_IR_TRAINBASE_TD

include "mlir/IR/OpBase.td"
include "mlir/IR/AttrTypeBase.td"

def Train_Dialect : Dialect {
  let name = "train";
  let cppNamespace = "::accrue::train";
  let summary = "What makes a training step";
  let description = [{
    The `train` dialect expresses a training step at the level of its
    semantics: the loss and gradients of a forward function over a whole
    effective batch (`train.value_and_grad`), gradient accumulators,
    global-norm clipping and optimizer updates over flat parameter arenas.
    The `train-*` passes rewrite that into micro-batched accumulation loops
    with exact loss normalization and one fused clip + optimizer pass. They
    treat the forward function as a black box except where a pass says
    otherwise (`train-microbatch` recognizes mean-reduced losses).
  }];
  let useDefaultAttributePrinterParser = 1;
  // The `train.*` attributes on other dialects' ops (StepAttrs in Train.h)
  // are checked where they are attached.
  let hasOperationAttrVerify = 1;
  let hasRegionArgAttrVerify = 1;
  let hasRegionResultAttrVerify = 1;
  let dependentDialects = ["::mlir::arith::ArithDialect",
                           "::mlir::tensor::TensorDialect",
                           "::mlir::scf::SCFDialect",
                           "::mlir::func::FuncDialect"];
}

class Train_Op<string mnemonic, list<Trait> traits = []>
    : Op<Train_Dialect, mnemonic, traits>;

class Train_Attr<string name, string attrMnemonic, list<Trait> traits = []>
    : AttrDef<Train_Dialect, name, traits> {
  let mnemonic = attrMnemonic;
}

// A flat, one-dimensional arena of f32 values (parameters, gradient
// accumulators, optimizer state).
def Train_Arena : 1DTensorOf<[F32]>;

#endif // ACCRUE_DIALECT_TRAIN_IR_TRAINBASE_TD
