//===- GraphImporter.h - per-node import state ------------------*- C++ -*-===//
//
// The state an op handler sees while importing one node: the SSA value of
// every ONNX name, the node's attributes, constant folding of inputs that
// must be known at compile time, and diagnostics that name the node.
//
//===----------------------------------------------------------------------===//

#ifndef ACCRUE_LIB_IMPORT_ONNX_GRAPHIMPORTER_H
#define ACCRUE_LIB_IMPORT_ONNX_GRAPHIMPORTER_H

#include "accrue/Dialect/NN/IR/NN.h"
#include "accrue/Import/ONNX/Importer.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/Verifier.h"
#include "llvm/ADT/MapVector.h"
#include "llvm/ADT/StringMap.h"

#include <onnx/onnx_pb.h>

namespace accrue::onnx_import {

class GraphImporter;

/// Whether a tensor of `shape` has at most 2^40 elements (4 TiB of f32: far
/// beyond any model, and far from int64 overflow in the shape arithmetic
/// downstream). Negative (dynamic) extents fail.
inline bool withinElementLimit(llvm::ArrayRef<int64_t> shape) {
  constexpr int64_t kLimit = int64_t(1) << 40;
  int64_t count = 1;
  for (int64_t extent : shape) {
    if (extent < 0)
      return false;
    if (extent != 0 && count > kLimit / extent)
      return false;
    count *= extent;
  }
  return true;
}

/// The most elements the importer computes at compile time (constant
/// folding, Range): shape arithmetic needs few; a larger result stays an op
/// that the step computes (or, for Range, is refused).
constexpr int64_t kMaxFoldedElements = int64_t(1) << 24;

/// Imports one node; emits an error through `importer.error(node)` and
/// fails when the node cannot be imported.
using OpHandler = llvm::LogicalResult (*)(GraphImporter &importer,
                                          const onnx::NodeProto &node);

/// A handler for `opType` from opset `sinceVersion` on. `constantInputs`
/// lists the inputs that are never trained: compile-time constants (shapes,
/// axes, exponents), statistics (BatchNormalization's running mean and
/// variance) and class weights of losses, buffers in PyTorch. Initializers
/// used only there never become parameters.
struct OpRegistration {
  llvm::StringRef opType;
  int64_t sinceVersion;
  OpHandler handler;
  std::vector<int> constantInputs = {};
  /// The operator set: empty for ONNX's default domain.
  llvm::StringRef domain = {};
};

/// ONNX's domain of training operators (Adam, Momentum, Adagrad, Gradient).
constexpr llvm::StringLiteral kTrainingDomain = "ai.onnx.preview.training";

/// ONNX's preview training optimizer `node` (Adam, Momentum or Adagrad) in
/// the compiler's terms: the one reading of those operators' attributes,
/// for a TrainingInfoProto's optimizer and for the operators in a graph
/// alike (TrainingHandlers.cpp). The learning rate is left unset. Fails
/// with an error at `loc` naming the operator.
llvm::FailureOr<ImportedOptimizer>
readOptimizerNode(const onnx::NodeProto &node, mlir::Location loc);

/// The handler of `opType` for `opset`: the registration with the largest
/// sinceVersion <= opset, or null.
const OpRegistration *lookupHandler(llvm::StringRef domain,
                                    llvm::StringRef opType, int64_t opset);

/// A per-channel [C] tensor as [C, 1, ...] (`rank` - 1 dimensions), to
/// broadcast over NC... values.
mlir::Value perChannel(nn::NNBuilder &nnb, mlir::Value v, int64_t rank);

/// `x` reshaped to `shape` for `node`; a transposed x may be reshaped
/// before the transpose when that keeps the value (recurrent ops' outputs
/// lead back to batch-major values this way).
llvm::FailureOr<mlir::Value> reshapeTo(GraphImporter &im,
                                       const onnx::NodeProto &node,
                                       mlir::Value x,
                                       llvm::ArrayRef<int64_t> shape);

/// Whether `node` is a BatchNormalization in training mode (batch
/// statistics, running statistics as outputs 1 and 2) at `opset`.
bool isTrainingBatchNorm(const onnx::NodeProto &node, int64_t opset);

/// Handler families, one function per file (registrations appended).
void addElementwiseHandlers(std::vector<OpRegistration> &handlers);
void addContractionHandlers(std::vector<OpRegistration> &handlers);
void addReductionHandlers(std::vector<OpRegistration> &handlers);
void addShapeHandlers(std::vector<OpRegistration> &handlers);
void addIndexingHandlers(std::vector<OpRegistration> &handlers);
void addLossHandlers(std::vector<OpRegistration> &handlers);
void addNeuralHandlers(std::vector<OpRegistration> &handlers);
void addAttentionHandlers(std::vector<OpRegistration> &handlers);
void addWindowHandlers(std::vector<OpRegistration> &handlers);
void addResizeHandlers(std::vector<OpRegistration> &handlers);
void addRecurrentHandlers(std::vector<OpRegistration> &handlers);
void addTrainingHandlers(std::vector<OpRegistration> &handlers);

/// The ranked tensor type of `v` (every value the importer makes has one).
inline mlir::RankedTensorType typeOf(mlir::Value v) {
  return llvm::cast<mlir::RankedTensorType>(v.getType());
}

/// A rank-1 i64 nn.constant holding `values` (compile-time indices).
mlir::Value indexVector(mlir::OpBuilder &b, mlir::Location loc,
                        llvm::ArrayRef<int64_t> values);

/// `x` with `before` and `after` elements of `value` added along `axis`
/// (a concatenation with splats; `x` itself when both are 0).
mlir::Value padAxis(mlir::OpBuilder &b, mlir::Location loc, mlir::Value x,
                    int64_t axis, int64_t before, int64_t after, double value);

/// Converts an ONNX element type to MLIR; null for unsupported types.
mlir::Type convertElementType(mlir::MLIRContext *context, int32_t onnxType);

/// Decodes a TensorProto into an attribute (see readTensorData).
llvm::FailureOr<mlir::DenseElementsAttr>
decodeTensor(const onnx::TensorProto &tensor, mlir::MLIRContext *context,
             llvm::StringRef modelPath, mlir::Location loc);

class GraphImporter {
public:
  GraphImporter(mlir::OpBuilder &builder, int64_t opset,
                llvm::StringRef modelPath)
      : builder(builder), opset(opset), modelPath(modelPath) {}

  mlir::OpBuilder &builder;
  int64_t opset;
  llvm::StringRef modelPath;

  /// Names `node`, the `index`-th of the graph: its own name, or
  /// OpType_index when it has none.
  void nameNode(const onnx::NodeProto &node, int index);
  /// The location of `node`: a NameLoc with its name.
  mlir::Location loc(const onnx::NodeProto &node);

  /// An error at `node`'s location, prefixed with its name and type.
  mlir::InFlightDiagnostic error(const onnx::NodeProto &node);

  /// Input `index`; fails with an error when absent or undefined.
  llvm::FailureOr<mlir::Value> input(const onnx::NodeProto &node, int index);
  /// Input `index`, or a null value when the node omits it.
  llvm::FailureOr<mlir::Value> optionalInput(const onnx::NodeProto &node,
                                             int index);
  /// The compile-time value of input `index` (from an initializer, a
  /// Constant node or folded shape arithmetic); fails with an error naming
  /// `what` when it is not constant.
  llvm::FailureOr<mlir::DenseElementsAttr>
  constantInput(const onnx::NodeProto &node, int index, llvm::StringRef what);
  /// The one value of a constant scalar input, as a double (floats,
  /// integers and booleans); fails with an error naming `what` otherwise.
  llvm::FailureOr<double> constantScalar(const onnx::NodeProto &node, int index,
                                         llvm::StringRef what);
  /// Integer values of a constant input (axes, shapes).
  llvm::FailureOr<llvm::SmallVector<int64_t>>
  constantInts(const onnx::NodeProto &node, int index, llvm::StringRef what);

  /// Binds output `index` of `node` to `value`.
  void setOutput(const onnx::NodeProto &node, int index, mlir::Value value);
  /// Binds output 0 of `node` to `value`, or fails if it failed.
  llvm::LogicalResult setResult(const onnx::NodeProto &node,
                                llvm::FailureOr<mlir::Value> value) {
    if (failed(value))
      return mlir::failure();
    setOutput(node, 0, *value);
    return mlir::success();
  }
  /// An error when output `index` of `node` is used (it is not supported).
  llvm::LogicalResult unsupportedOutput(const onnx::NodeProto &node, int index,
                                        llvm::StringRef what);
  /// Binds output `index` of `node` to a sequence of tensors (as
  /// SplitToSequence makes), which only SequenceAt reads: any other use is
  /// an error naming it.
  void setSequence(const onnx::NodeProto &node, int index,
                   llvm::ArrayRef<mlir::Value> parts);
  /// The sequence input `index` of `node` names; fails with an error when
  /// it names none.
  llvm::FailureOr<llvm::ArrayRef<mlir::Value>>
  sequenceInput(const onnx::NodeProto &node, int index);
  /// Binds an ONNX name (graph input, initializer) to `value`.
  void define(llvm::StringRef name, mlir::Value value) { values[name] = value; }
  mlir::Value lookup(llvm::StringRef name) const { return values.lookup(name); }
  /// Why an output name has no value (an op output Accrue does not model),
  /// or empty.
  std::string unsupportedReason(llvm::StringRef name) const {
    return unsupported.lookup(name);
  }

  // Attributes.
  static const onnx::AttributeProto *attribute(const onnx::NodeProto &node,
                                               llvm::StringRef name);
  static int64_t intAttr(const onnx::NodeProto &node, llvm::StringRef name,
                         int64_t defaultValue);
  float floatAttr(const onnx::NodeProto &node, llvm::StringRef name,
                  float defaultValue);
  std::string stringAttr(const onnx::NodeProto &node, llvm::StringRef name,
                         llvm::StringRef defaultValue);
  std::optional<llvm::SmallVector<int64_t>>
  intsAttr(const onnx::NodeProto &node, llvm::StringRef name);

  /// Fails with an error naming input `index` of `node` unless `value`'s
  /// shape broadcasts (numpy rules) to `shape`; handlers that compose ops
  /// check their inputs with it before building.
  llvm::LogicalResult requireBroadcastsTo(const onnx::NodeProto &node,
                                          int index, mlir::Value value,
                                          llvm::ArrayRef<int64_t> shape);

  /// Normalizes `axis` for `rank` (negative counts from the end); fails
  /// with an error when out of range.
  llvm::FailureOr<int64_t> normalizeAxis(const onnx::NodeProto &node,
                                         int64_t axis, int64_t rank);
  /// normalizeAxis for each of `axes`, in their order.
  llvm::FailureOr<llvm::SmallVector<int64_t>>
  normalizeAxes(const onnx::NodeProto &node, llvm::ArrayRef<int64_t> axes,
                int64_t rank);

  /// Emits an op and checks it, so a shape error is reported at the node
  /// instead of surfacing later (or aborting in a builder); then folds it
  /// when its operands are constants (shape subgraphs become constants).
  /// Ops with inferred result types get them inferred here first; pass the
  /// result type explicitly for the others. Returns the op's result.
  template <typename OpTy, typename... Args>
  llvm::FailureOr<mlir::Value> create(const onnx::NodeProto &node,
                                      Args &&...args) {
    mlir::OperationState state(loc(node), OpTy::getOperationName());
    if constexpr (OpTy::template hasTrait<
                      mlir::InferTypeOpInterface::Trait>()) {
      OpTy::build(builder, state, mlir::Type(), std::forward<Args>(args)...);
      llvm::SmallVector<mlir::Type> types;
      mlir::MLIRContext *ctx = builder.getContext();
      if (failed(OpTy::inferReturnTypes(ctx, state.location, state.operands,
                                        state.attributes.getDictionary(ctx),
                                        state.getRawProperties(), state.regions,
                                        types)))
        return mlir::failure();
      state.types.assign(types.begin(), types.end());
    } else {
      OpTy::build(builder, state, std::forward<Args>(args)...);
    }
    return finishOp(builder.create(state));
  }

  /// Verifies and folds a freshly created single-result op.
  llvm::FailureOr<mlir::Value> finishOp(mlir::Operation *op);

  // Training-step context, set by the model importer.
  /// Whether the function is a training forward (Dropout is random).
  bool training = false;
  /// Refuse ops that break accumulation equivalence instead of warning.
  bool strict = false;
  /// The optimizer step and the global index of the micro-batch's first
  /// sample (0-d i64 tensors), for training-mode Dropout.
  mlir::Value stepArg, sampleBaseArg;
  /// Dropout nodes seen so far (each gets its own salt).
  int64_t dropoutCount = 0;
  /// Seed of Dropout nodes without a seed attribute.
  int64_t dropoutSeed = 0;
  /// The new value of each buffer argument (role buffers: running
  /// statistics) that a node updates, by argument number; the forward
  /// returns them after the loss.
  llvm::MapVector<unsigned, mlir::Value> bufferUpdates;

private:
  llvm::StringMap<mlir::Value> values;
  llvm::StringMap<std::string> unsupported;
  llvm::StringMap<llvm::SmallVector<mlir::Value>> sequences;
  llvm::DenseMap<const onnx::NodeProto *, mlir::Location> locations;
};

} // namespace accrue::onnx_import

#endif // ACCRUE_LIB_IMPORT_ONNX_GRAPHIMPORTER_H
