//===- OutlineKernels.cpp - one function per linalg op ----------*- C++ -*-===//
//
// After bufferization a linalg op reads and writes buffers and has no
// results, so moving it into a function of its own is a matter of passing
// what it uses. Constants are cloned instead of passed, so LLVM still sees
// them when it optimizes the kernel.
//
//===----------------------------------------------------------------------===//

#include "accrue/Codegen/CPU/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/Transforms/RegionUtils.h"
#include "llvm/ADT/SetVector.h"

namespace accrue::cpu {
#define GEN_PASS_DEF_OUTLINEKERNELS
#include "accrue/Codegen/CPU/Passes.h.inc"
} // namespace accrue::cpu

using namespace mlir;

namespace {

bool isClonableConstant(Value value) {
  Operation *def = value.getDefiningOp();
  return def && def->hasTrait<OpTrait::ConstantLike>();
}

struct OutlineKernelsPass
    : accrue::cpu::impl::OutlineKernelsBase<OutlineKernelsPass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    SmallVector<linalg::LinalgOp> kernels;
    module.walk([&](linalg::LinalgOp op) {
      if (op.hasPureBufferSemantics() && op->getNumResults() == 0 &&
          op->getParentOfType<func::FuncOp>())
        kernels.push_back(op);
    });
    SymbolTable symbols(module);
    llvm::DenseMap<Operation *, int64_t> counters;
    OpBuilder b(module.getContext());
    for (linalg::LinalgOp kernel : kernels) {
      Operation *op = kernel.getOperation();
      auto caller = op->getParentOfType<func::FuncOp>();
      llvm::SetVector<Value> used(op->getOperands().begin(),
                                  op->getOperands().end());
      getUsedValuesDefinedAbove(op->getRegions(), used);
      SmallVector<Value> arguments;
      for (Value v : used)
        if (!isClonableConstant(v))
          arguments.push_back(v);

      std::string name;
      do {
        name = (caller.getSymName() + "_k" + Twine(counters[caller]++)).str();
      } while (symbols.lookup(name));
      b.setInsertionPoint(caller);
      auto func = func::FuncOp::create(
          b, op->getLoc(), name,
          b.getFunctionType(ValueRange(arguments).getTypes(), {}));
      func.setPrivate();
      func->setAttr("passthrough", b.getStrArrayAttr({"noinline"}));
      symbols.insert(func);

      Block *entry = func.addEntryBlock();
      OpBuilder body = OpBuilder::atBlockBegin(entry);
      IRMapping mapping;
      for (auto [value, arg] : llvm::zip(arguments, entry->getArguments()))
        mapping.map(value, arg);
      for (Value v : used)
        if (isClonableConstant(v))
          mapping.map(v, body.clone(*v.getDefiningOp())->getResult(0));
      body.clone(*op, mapping);
      func::ReturnOp::create(body, op->getLoc());

      b.setInsertionPoint(op);
      func::CallOp::create(b, op->getLoc(), func, arguments);
      op->erase();
    }
  }
};

} // namespace
