//===- MemoryEstimate.cpp - activation memory of a micro-step ---*- C++ -*-===//

#include "accrue/Dialect/Train/Utils/MemoryEstimate.h"

#include "accrue/Dialect/NN/IR/NN.h"
#include "accrue/Dialect/Train/IR/Train.h"

#include <map>

using namespace mlir;
using namespace accrue;

/// Ops whose results alias an operand's buffer after bufferization.
static bool isView(Operation *op) {
  return isa<tensor::ExtractSliceOp, tensor::CollapseShapeOp,
             tensor::ExpandShapeOp, nn::ReshapeOp, nn::FlattenOp,
             nn::IdentityOp, train::AccumulateOp, train::UnpackOp>(op);
}

static int64_t tensorBytes(Type type) {
  auto tensor = dyn_cast<RankedTensorType>(type);
  if (!tensor || !tensor.hasStaticShape())
    return 0;
  int64_t bits = tensor.getElementTypeBitWidth();
  return tensor.getNumElements() * std::max<int64_t>(bits / 8, 1);
}

std::optional<int64_t> train::estimateMicroStepPeakBytes(func::FuncOp step) {
  scf::ForOp loop;
  step.walk([&](scf::ForOp op) {
    if (!loop)
      loop = op;
  });
  if (!loop)
    return std::nullopt;
  Block *body = loop.getBody();
  DenseMap<Operation *, int64_t> position;
  int64_t index = 0;
  for (Operation &op : *body)
    position[&op] = index++;

  // Bytes that start and stop being live at each position.
  std::map<int64_t, int64_t> delta;
  for (Operation &op : *body) {
    if (isView(&op) || isa<nn::ConstantOp, arith::ConstantOp>(op))
      continue;
    for (Value result : op.getResults()) {
      int64_t bytes = tensorBytes(result.getType());
      if (bytes == 0)
        continue;
      int64_t last = position[&op];
      for (Operation *user : result.getUsers())
        if (Operation *ancestor = body->findAncestorOpInBlock(*user))
          last = std::max(last, position[ancestor]);
      delta[position[&op]] += bytes;
      delta[last + 1] -= bytes;
    }
  }
  int64_t live = 0, peak = 0;
  for (auto [pos, change] : delta) {
    live += change;
    peak = std::max(peak, live);
  }
  return peak;
}
