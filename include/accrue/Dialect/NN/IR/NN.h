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

#include "accrue/Dialect/NN/IR/NNOpsDialect.h.inc"

#include "accrue/Dialect/NN/IR/NNEnums.h.inc"

#define GET_ATTRDEF_CLASSES
#include "accrue/Dialect/NN/IR/NNAttrs.h.inc"

#include "accrue/Dialect/NN/IR/NNInterfaces.h.inc"

namespace accrue::nn {

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

  mlir::Value add(mlir::Value lhs, mlir::Value rhs);
  mlir::Value sub(mlir::Value lhs, mlir::Value rhs);
  mlir::Value mul(mlir::Value lhs, mlir::Value rhs);
  mlir::Value div(mlir::Value lhs, mlir::Value rhs);

  mlir::OpBuilder &b;
  mlir::Location loc;
};

} // namespace accrue::nn

#endif // ACCRUE_DIALECT_NN_IR_NN_H
