//===- TrainDialect.cpp - train dialect registration ------------*- C++ -*-===//

#include "accrue/Dialect/Train/IR/Train.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/DialectImplementation.h"
#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;
using namespace accrue::train;

#include "accrue/Dialect/Train/IR/TrainInterfaces.cpp.inc"
#include "accrue/Dialect/Train/IR/TrainOpsDialect.cpp.inc"

#define GET_ATTRDEF_CLASSES
#include "accrue/Dialect/Train/IR/TrainAttrs.cpp.inc"

void TrainDialect::initialize() {
  addOperations<
#define GET_OP_LIST
#include "accrue/Dialect/Train/IR/TrainOps.cpp.inc"
      >();
  addAttributes<
#define GET_ATTRDEF_LIST
#include "accrue/Dialect/Train/IR/TrainAttrs.cpp.inc"
      >();
}

int64_t accrue::train::getNumElements(Type type) {
  return cast<ShapedType>(type).getNumElements();
}
