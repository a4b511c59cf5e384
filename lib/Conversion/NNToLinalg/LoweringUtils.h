//===- LoweringUtils.h - helpers for lowering nn to linalg ------*- C++ -*-===//

#ifndef ACCRUE_LIB_CONVERSION_NNTOLINALG_LOWERINGUTILS_H
#define ACCRUE_LIB_CONVERSION_NNTOLINALG_LOWERINGUTILS_H

#include "accrue/Dialect/NN/IR/NN.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/Transforms/DialectConversion.h"

namespace accrue::nn::lowering {

/// Computes the scalar result of an elementwise body from its block
/// arguments (operand elements, then the output element).
using BodyBuilder = llvm::function_ref<mlir::Value(
    mlir::OpBuilder &, mlir::Location, mlir::ValueRange)>;

/// An uninitialized tensor of `type`.
mlir::Value emptyTensor(mlir::OpBuilder &b, mlir::Location loc,
                        mlir::RankedTensorType type);

/// A tensor of `type` filled with `value`.
mlir::Value filledTensor(mlir::OpBuilder &b, mlir::Location loc,
                         mlir::RankedTensorType type, double value);

/// The position an integer `index` names along an axis of `extent`
/// (index type): a negative one counts from the end, one out of range
/// reads position 0 instead of outside the buffer.
mlir::Value normalizeIndex(mlir::OpBuilder &b, mlir::Location loc,
                           mlir::Value index, int64_t extent);

/// The indexing map that reads `operandType` broadcast (numpy rules) into an
/// iteration space of `resultType`'s rank.
mlir::AffineMap broadcastMap(mlir::RankedTensorType operandType,
                             mlir::RankedTensorType resultType);

/// A `linalg.generic` over `resultType` reading each operand with
/// broadcasting; `body` gets the operand elements and the output element.
mlir::Value buildElementwise(mlir::OpBuilder &b, mlir::Location loc,
                             mlir::RankedTensorType resultType,
                             mlir::ValueRange operands, BodyBuilder body);

/// Reshapes `value` to `target` (same element count) with
/// tensor.collapse_shape / tensor.expand_shape, which bufferize to views.
mlir::Value reshapeTensor(mlir::OpBuilder &b, mlir::Location loc,
                          mlir::Value value, mlir::RankedTensorType target);

/// A float or integer constant of `type`.
mlir::Value scalarConstant(mlir::OpBuilder &b, mlir::Location loc,
                           mlir::Type type, double value);

/// Fast-math flags for sums whose order does not matter (contractions and
/// reductions): lets LLVM vectorize them.
mlir::arith::FastMathFlagsAttr reassocFlags(mlir::OpBuilder &b);

//===----------------------------------------------------------------------===//
// Sliding windows (convolution and pooling), NCHW
//===----------------------------------------------------------------------===//

/// Pads the two spatial dimensions of an NCHW tensor (pads: top, left,
/// bottom, right) with `value`.
mlir::Value padSpatial(mlir::OpBuilder &b, mlir::Location loc,
                       mlir::Value input, llvm::ArrayRef<int64_t> pads,
                       double value);
/// For an input coordinate `i` (one spatial dimension) and kernel offset
/// `k`: whether a window starts at output `o = (i + pad - k * dilation) /
/// stride`, exactly and inside [0, outSize), and that `o`.
std::pair<mlir::Value, mlir::Value>
windowOf(mlir::OpBuilder &b, mlir::Location loc, mlir::Value i, mlir::Value k,
         int64_t pad, int64_t stride, int64_t dilation, int64_t outSize);
/// The [N, C, OH, OW] view of `padded` that kernel position (i, j) of
/// every window reads (strides `s`, dilations `d`).
mlir::Value windowView(mlir::OpBuilder &b, mlir::Location loc,
                       mlir::Value padded, mlir::RankedTensorType viewType,
                       int64_t i, int64_t j, llvm::ArrayRef<int64_t> s,
                       llvm::ArrayRef<int64_t> d);
/// `padded` with `update` [N, C, OH, OW] added to the view of kernel
/// position (i, j).
mlir::Value addToWindowView(mlir::OpBuilder &b, mlir::Location loc,
                            mlir::Value padded, mlir::Value update, int64_t i,
                            int64_t j, llvm::ArrayRef<int64_t> s,
                            llvm::ArrayRef<int64_t> d);

void populateElementwiseLowering(mlir::RewritePatternSet &patterns);
void populateContractionLowering(mlir::RewritePatternSet &patterns);
void populateReductionLowering(mlir::RewritePatternSet &patterns);
void populateShapeLowering(mlir::RewritePatternSet &patterns);
/// With `decodeLabelsOnce`, the gradients over the classes decode each
/// item's label once (see convert-nn-to-linalg's decode-labels-once).
void populateLossLowering(mlir::RewritePatternSet &patterns,
                          bool decodeLabelsOnce);
/// Softmax and Dropout, then convolution and pooling.
void populateNeuralLowering(mlir::RewritePatternSet &patterns);
void populateConvolutionLowering(mlir::RewritePatternSet &patterns);
void populatePoolingLowering(mlir::RewritePatternSet &patterns);
void populateScanLowering(mlir::RewritePatternSet &patterns);

} // namespace accrue::nn::lowering

#endif // ACCRUE_LIB_CONVERSION_NNTOLINALG_LOWERINGUTILS_H
