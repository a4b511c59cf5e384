//===- NN.h - nn dialect ----------------------------------------*- C++ -*-===//
//
// The `nn` dialect: tensor ops with ONNX semantics, each with a verifier,
// result-type inference, a VJP rule and a lowering to linalg.
//
//===----------------------------------------------------------------------===//

#ifndef ACCRUE_DIALECT_NN_IR_NN_H
#define ACCRUE_DIALECT_NN_IR_NN_H

#include "mlir/Bytecode/BytecodeOpInterface.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Dialect.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/IR/OpImplementation.h"
#include "mlir/IR/TypeUtilities.h"
#include "mlir/Interfaces/InferTypeOpInterface.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"

#include "accrue/Dialect/NN/IR/NNOpsDialect.h.inc"

#include "accrue/Dialect/NN/IR/NNEnums.h.inc"

#define GET_ATTRDEF_CLASSES
#include "accrue/Dialect/NN/IR/NNAttrs.h.inc"

#include "accrue/Dialect/NN/IR/SampleRows.h"

#include "accrue/Dialect/NN/IR/NNInterfaces.h.inc"

namespace accrue::nn {

/// Unit attribute on an scf.for that the NN lowerings build (the inner loop
/// of a scatter-add): no two of its iterations write one element, and each
/// reads only what it writes besides read-only operands, so they may run in
/// any order or at once (cuda-form-kernels gives each its own thread).
constexpr llvm::StringLiteral kIndependentIterations =
    "nn.independent_iterations";

/// Infers the result of an elementwise op whose operands broadcast together
/// (numpy rules): the broadcast shape with element type `elementType`.
/// Emits an error at `loc` and fails when the shapes do not broadcast.
llvm::LogicalResult
inferElementwiseResultType(std::optional<mlir::Location> loc,
                           mlir::ValueRange operands, mlir::Type elementType,
                           llvm::SmallVectorImpl<mlir::Type> &types);

/// Infers the result of a reduction of `inputType` over the sorted,
/// non-negative `axes`, keeping reduced dimensions as 1 if `keepdims`.
llvm::LogicalResult
inferReductionResultType(std::optional<mlir::Location> loc,
                         mlir::Type inputType, llvm::ArrayRef<int64_t> axes,
                         bool keepdims,
                         llvm::SmallVectorImpl<mlir::Type> &types);

/// Returns the numpy broadcast of two static shapes, or failure.
llvm::FailureOr<llvm::SmallVector<int64_t>>
broadcastShapes(llvm::ArrayRef<int64_t> lhs, llvm::ArrayRef<int64_t> rhs);

} // namespace accrue::nn

#define GET_OP_CLASSES
#include "accrue/Dialect/NN/IR/NNOps.h.inc"

namespace accrue::nn {

/// Helpers VJP rules and passes share to emit nn ops.
class NNBuilder {
public:
  NNBuilder(mlir::OpBuilder &builder, mlir::Location loc)
      : b(builder), loc(loc) {}

  /// A tensor of `type` filled with `value` (a splat nn.constant).
  mlir::Value splat(mlir::RankedTensorType type, double value);
  /// A 0-d constant of element type `elementType`.
  mlir::Value scalar(mlir::Type elementType, double value);
  /// Sums `value` over the dimensions that numpy broadcasting added or
  /// stretched to reach its shape from `target`, giving a value of type
  /// `target` (the adjoint of an implicit broadcast).
  mlir::Value sumToShape(mlir::Value value, mlir::RankedTensorType target);
  /// Broadcasts `value` to `target` (nn.expand, or the value itself).
  mlir::Value broadcastTo(mlir::Value value, mlir::RankedTensorType target);
  /// Reshapes `value` to `target` (nn.reshape, or the value itself).
  mlir::Value reshape(mlir::Value value, mlir::RankedTensorType target);
  /// a^T d over rows: every dimension of `a` [..., I] and `d` [..., J] but
  /// the last is a row, and the [I, J] result sums over all of them (one
  /// nn.gemm of the two as 2-D matrices; a weight's adjoint).
  mlir::Value rowsProduct(mlir::Value a, mlir::Value d);

  mlir::Value add(mlir::Value lhs, mlir::Value rhs);
  mlir::Value sub(mlir::Value lhs, mlir::Value rhs);
  mlir::Value mul(mlir::Value lhs, mlir::Value rhs);
  mlir::Value div(mlir::Value lhs, mlir::Value rhs);

  mlir::OpBuilder &b;
  mlir::Location loc;
};

/// Whether `v` is a ranked tensor of floats (what has an adjoint).
inline bool isFloatTensor(mlir::Value v) {
  auto type = llvm::dyn_cast<mlir::RankedTensorType>(v.getType());
  return type && llvm::isa<mlir::FloatType>(type.getElementType());
}

/// The name of the ONNX node a location carries (the importer's NameLoc,
/// also inside fused and call-site locations), if any.
std::optional<std::string> getNodeName(mlir::Location loc);

/// Reverse-mode differentiation of a block of nn ops, shared by
/// `train-autodiff` (a function) and nn.scan's VJP (a loop body).
///
/// Activity: `varied` gets the float values that depend on `sources`,
/// `useful` the values that `sinks` depend on; a value is active when it is
/// in both. Fails, with a diagnostic, on an op with regions other than
/// nn.scan.
llvm::LogicalResult findActiveValues(mlir::Block &block,
                                     mlir::ValueRange sources,
                                     mlir::ValueRange sinks,
                                     llvm::DenseSet<mlir::Value> &varied,
                                     llvm::DenseSet<mlir::Value> &useful);

/// Adds `adjoint` to the adjoint of `value` in `adjoints` (nn.add on a
/// second contribution).
void accumulateAdjoint(mlir::OpBuilder &b, mlir::Location loc,
                       llvm::DenseMap<mlir::Value, mlir::Value> &adjoints,
                       mlir::Value value, mlir::Value adjoint);

/// Visits `ops` last to first and, for each op with an adjoint on an active
/// result, emits its VJP at the builder's insertion point, accumulating its
/// active operands' adjoints into `adjoints` (seeded by the caller).
llvm::LogicalResult
reverseSweep(mlir::OpBuilder &b, llvm::ArrayRef<mlir::Operation *> ops,
             llvm::function_ref<bool(mlir::Value)> isActive,
             llvm::DenseMap<mlir::Value, mlir::Value> &adjoints);

} // namespace accrue::nn

#endif // ACCRUE_DIALECT_NN_IR_NN_H
