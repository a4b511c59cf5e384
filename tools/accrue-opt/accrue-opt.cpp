//===- accrue-opt.cpp - Accrue's optimizer driver ---------------*- C++ -*-===//
//
// mlir-opt with the nn and train dialects, Accrue's passes and pipelines.
//
//===----------------------------------------------------------------------===//

#include "accrue/InitAllDialects.h"
#include "accrue/InitAllPasses.h"

#include "mlir/IR/DialectRegistry.h"
#include "mlir/Tools/mlir-opt/MlirOptMain.h"

int main(int argc, char **argv) {
  mlir::DialectRegistry registry;
  accrue::registerAllDialects(registry);
  accrue::registerAllPasses();
  return mlir::asMainReturnCode(
      mlir::MlirOptMain(argc, argv, "Accrue optimizer driver\n", registry));
}
