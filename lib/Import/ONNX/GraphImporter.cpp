//===- GraphImporter.cpp - per-node import state ----------------*- C++ -*-===//

#include "GraphImporter.h"

#include "accrue-runtime/Arrays.h"

#include "mlir/IR/Matchers.h"
#include "llvm/ADT/SmallString.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MathExtras.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"

#include <limits>

using namespace mlir;
using namespace accrue;
using namespace accrue::onnx_import;

//===----------------------------------------------------------------------===//
// Handler registry
//===----------------------------------------------------------------------===//

static const std::vector<OpRegistration> &allHandlers() {
  static const std::vector<OpRegistration> handlers = [] {
    std::vector<OpRegistration> list;
    addElementwiseHandlers(list);
    addContractionHandlers(list);
    addReductionHandlers(list);
    addShapeHandlers(list);
    addIndexingHandlers(list);
    addLossHandlers(list);
    addNeuralHandlers(list);
    addAttentionHandlers(list);
    addWindowHandlers(list);
    addResizeHandlers(list);
    addRecurrentHandlers(list);
    addTrainingHandlers(list);
    return list;
  }();
  return handlers;
}

const OpRegistration *
onnx_import::lookupHandler(StringRef domain, StringRef opType, int64_t opset) {
  if (domain == "ai.onnx")
    domain = "";
  const OpRegistration *best = nullptr;
  for (const OpRegistration &reg : allHandlers())
    if (reg.domain == domain && reg.opType == opType &&
        reg.sinceVersion <= opset &&
        (!best || reg.sinceVersion > best->sinceVersion))
      best = &reg;
  return best;
}

bool onnx_import::isSupportedOperator(StringRef domain, StringRef opType,
                                      int64_t opset) {
  return lookupHandler(domain, opType, opset) != nullptr;
}

//===----------------------------------------------------------------------===//
// Tensors
//===----------------------------------------------------------------------===//

Value onnx_import::indexVector(OpBuilder &b, Location loc,
                               ArrayRef<int64_t> values) {
  auto type = RankedTensorType::get({static_cast<int64_t>(values.size())},
                                    b.getI64Type());
  return nn::ConstantOp::create(b, loc, DenseElementsAttr::get(type, values));
}

Value onnx_import::padAxis(OpBuilder &b, Location loc, Value x, int64_t axis,
                           int64_t before, int64_t after, double value) {
  if (!before && !after)
    return x;
  auto type = cast<RankedTensorType>(x.getType());
  auto block = [&](int64_t size) {
    SmallVector<int64_t> shape(type.getShape());
    shape[axis] = size;
    return nn::NNBuilder(b, loc).splat(
        RankedTensorType::get(shape, type.getElementType()), value);
  };
  SmallVector<Value> parts;
  if (before)
    parts.push_back(block(before));
  parts.push_back(x);
  if (after)
    parts.push_back(block(after));
  return nn::ConcatOp::create(b, loc, parts, b.getI64IntegerAttr(axis));
}

Type onnx_import::convertElementType(MLIRContext *context, int32_t onnxType) {
  Builder b(context);
  switch (onnxType) {
  case onnx::TensorProto::FLOAT:
    return b.getF32Type();
  case onnx::TensorProto::FLOAT16:
    return b.getF16Type();
  case onnx::TensorProto::BFLOAT16:
    return b.getBF16Type();
  case onnx::TensorProto::DOUBLE:
    return b.getF64Type();
  case onnx::TensorProto::INT64:
    return b.getI64Type();
  case onnx::TensorProto::INT32:
    return b.getI32Type();
  case onnx::TensorProto::BOOL:
    return b.getI1Type();
  // Narrow integers (token ids, masks) are widened to int32 at import: the
  // values are the same; arithmetic that would wrap around in 8 or 16 bits
  // does not.
  case onnx::TensorProto::INT8:
  case onnx::TensorProto::UINT8:
  case onnx::TensorProto::INT16:
  case onnx::TensorProto::UINT16:
    return b.getI32Type();
  default:
    return {};
  }
}

/// The bytes per element of a narrow integer type widened to int32 (see
/// convertElementType), or 0 for other types.
static int narrowIntegerWidth(int32_t onnxType, bool &isSigned) {
  switch (onnxType) {
  case onnx::TensorProto::INT8:
    isSigned = true;
    return 1;
  case onnx::TensorProto::UINT8:
    isSigned = false;
    return 1;
  case onnx::TensorProto::INT16:
    isSigned = true;
    return 2;
  case onnx::TensorProto::UINT16:
    isSigned = false;
    return 2;
  default:
    return 0;
  }
}

/// Widens little-endian narrow integers to int32.
static std::string widenToInt32(StringRef bytes, int width, bool isSigned) {
  std::string out;
  out.reserve(bytes.size() / width * 4);
  for (size_t i = 0; i + width <= bytes.size(); i += width) {
    int32_t value = rt::widenToInt32(
        reinterpret_cast<const unsigned char *>(bytes.data() + i), width,
        isSigned);
    out.append(reinterpret_cast<const char *>(&value), 4);
  }
  return out;
}

/// Reads the bytes of a tensor stored outside the model file. The data must
/// lie inside the model's folder: a relative location without `..`, not a
/// symlink to elsewhere, and offset and length within the file. A model
/// from a stranger could otherwise read any file the compiler can (the
/// class of bug ONNX fixed in its own loader).
static FailureOr<std::string> readExternalData(const onnx::TensorProto &tensor,
                                               StringRef modelPath,
                                               Location loc) {
  std::string location;
  std::optional<uint64_t> offset, length;
  // The location names the tensor (its initializer or Constant node).
  auto fail = [&]() {
    return emitError(loc) << "external data '" << location << "' ";
  };
  for (const auto &entry : tensor.external_data()) {
    uint64_t value;
    if (entry.key() == "location") {
      location = entry.value();
    } else if (entry.key() == "offset" || entry.key() == "length") {
      if (StringRef(entry.value()).getAsInteger(10, value))
        return emitError(loc) << "external data " << entry.key() << " '"
                              << entry.value() << "' is not a number";
      (entry.key() == "offset" ? offset : length) = value;
    }
  }
  if (location.empty())
    return emitError(loc) << "external data without a location";
  namespace fs = llvm::sys::fs;
  namespace path = llvm::sys::path;
  if (modelPath.empty())
    return fail() << "cannot be read: the model was not given as a file";
  if (path::is_absolute(location) || path::is_absolute_gnu(location))
    return fail() << "is an absolute path; external data must lie in the "
                     "model's folder";
  for (StringRef component :
       llvm::make_range(path::begin(location), path::end(location)))
    if (component == "..")
      return fail() << "leaves the model's folder ('..'); external data "
                       "must lie in the model's folder";
  // Symlinks may point anywhere: compare the resolved paths.
  SmallString<256> folder(path::parent_path(modelPath));
  if (folder.empty())
    folder = ".";
  SmallString<256> file(folder), realFolder, realFile;
  path::append(file, location);
  if (fs::real_path(folder, realFolder) || fs::real_path(file, realFile))
    return fail() << "cannot be read: no such file next to the model";
  StringRef inside = realFile;
  if (!inside.consume_front(realFolder) || !inside.starts_with("/"))
    return fail() << "resolves to '" << realFile
                  << "', outside the model's folder (a symlink?); external "
                     "data must lie in the model's folder";
  fs::file_status status;
  if (fs::status(realFile, status) || !fs::is_regular_file(status))
    return fail() << "is not a regular file";
  uint64_t size = status.getSize();
  uint64_t start = offset.value_or(0);
  if (start > size || (length && *length > size - start))
    return fail() << "has offset " << start << " and length "
                  << (length ? std::to_string(*length) : "(rest)")
                  << ", past the end of the " << size << "-byte file";
  uint64_t count = length.value_or(size - start);
  auto buffer = llvm::MemoryBuffer::getFileSlice(realFile, count, start,
                                                 /*IsVolatile=*/false);
  if (!buffer)
    return fail() << "cannot be read: " << buffer.getError().message();
  return (*buffer)->getBuffer().str();
}

LogicalResult GraphImporter::requireBroadcastsTo(const onnx::NodeProto &node,
                                                 int index, Value value,
                                                 ArrayRef<int64_t> shape) {
  ArrayRef<int64_t> have = cast<RankedTensorType>(value.getType()).getShape();
  FailureOr<SmallVector<int64_t>> result = nn::broadcastShapes(have, shape);
  if (succeeded(result) && ArrayRef<int64_t>(*result) == shape)
    return success();
  return error(node) << "input " << index << " ('" << node.input(index)
                     << "') has shape ["
                     << llvm::make_range(have.begin(), have.end())
                     << "], which does not broadcast to ["
                     << llvm::make_range(shape.begin(), shape.end()) << "]";
}

int64_t TensorData::numElements() const {
  // Saturates: a shape from a file may describe more elements than int64
  // counts (it is refused against the limits, never allocated).
  int64_t n = 1;
  for (int64_t d : shape)
    if (llvm::MulOverflow(n, d, n))
      return std::numeric_limits<int64_t>::max();
  return n;
}

/// Appends the little-endian bytes of `values` to `out`.
template <typename T, typename Range>
static void appendBytes(std::string &out, const Range &values) {
  for (auto v : values) {
    T typed = static_cast<T>(v);
    out.append(reinterpret_cast<const char *>(&typed), sizeof(T));
  }
}

FailureOr<TensorData>
onnx_import::readTensorData(const onnx::TensorProto &tensor,
                            MLIRContext *context, StringRef modelPath,
                            Location loc, onnx::TensorProto *steal) {
  TensorData data;
  data.elementType = convertElementType(context, tensor.data_type());
  if (!data.elementType)
    return emitError(loc) << "tensor '" << tensor.name()
                          << "' has unsupported element type "
                          << onnx::TensorProto::DataType_Name(
                                 static_cast<onnx::TensorProto::DataType>(
                                     tensor.data_type()));
  for (int64_t d : tensor.dims()) {
    if (d < 0)
      return emitError(loc)
             << "tensor '" << tensor.name() << "' has a negative dimension";
    data.shape.push_back(d);
  }
  int64_t count = data.numElements();
  bool narrowSigned = false;
  int narrow = narrowIntegerWidth(tensor.data_type(), narrowSigned);
  size_t width = narrow ? narrow
                 : data.elementType.isInteger(1)
                     ? 1
                     : data.elementType.getIntOrFloatBitWidth() / 8;

  if (tensor.data_location() == onnx::TensorProto::EXTERNAL) {
    FailureOr<std::string> bytes = readExternalData(tensor, modelPath, loc);
    if (failed(bytes))
      return failure();
    data.bytes = std::move(*bytes);
  } else if (tensor.has_raw_data()) {
    if (steal)
      data.bytes.swap(*steal->mutable_raw_data());
    else
      data.bytes = tensor.raw_data();
  } else {
    switch (tensor.data_type()) {
    case onnx::TensorProto::FLOAT:
      appendBytes<float>(data.bytes, tensor.float_data());
      break;
    case onnx::TensorProto::DOUBLE:
      appendBytes<double>(data.bytes, tensor.double_data());
      break;
    case onnx::TensorProto::INT64:
      appendBytes<int64_t>(data.bytes, tensor.int64_data());
      break;
    case onnx::TensorProto::INT32:
      appendBytes<int32_t>(data.bytes, tensor.int32_data());
      break;
    case onnx::TensorProto::INT8:
    case onnx::TensorProto::UINT8:
      appendBytes<uint8_t>(data.bytes, tensor.int32_data());
      break;
    case onnx::TensorProto::INT16:
    case onnx::TensorProto::UINT16:
      appendBytes<uint16_t>(data.bytes, tensor.int32_data());
      break;
    case onnx::TensorProto::BOOL:
      appendBytes<uint8_t>(data.bytes, tensor.int32_data());
      break;
    default: // f16 and bf16 store their bit patterns in int32_data.
      appendBytes<uint16_t>(data.bytes, tensor.int32_data());
      break;
    }
  }
  if (data.bytes.size() != count * width)
    return emitError(loc) << "tensor '" << tensor.name() << "' holds "
                          << data.bytes.size() / width
                          << " values, but its shape needs " << count
                          << " (truncated or corrupt data)";
  if (narrow)
    data.bytes = widenToInt32(data.bytes, narrow, narrowSigned);
  return data;
}

FailureOr<TensorData> onnx_import::readTensorProtoBytes(StringRef bytes,
                                                        MLIRContext *context,
                                                        Location loc) {
  onnx::TensorProto tensor;
  if (!tensor.ParseFromArray(bytes.data(), static_cast<int>(bytes.size())))
    return emitError(loc) << "not a valid TensorProto";
  return readTensorData(tensor, context, "", loc);
}

FailureOr<DenseElementsAttr>
onnx_import::decodeTensor(const onnx::TensorProto &tensor, MLIRContext *context,
                          StringRef modelPath, Location loc) {
  FailureOr<TensorData> data = readTensorData(tensor, context, modelPath, loc);
  if (failed(data))
    return failure();
  auto type = RankedTensorType::get(data->shape, data->elementType);
  if (data->elementType.isInteger(1)) {
    SmallVector<bool> values;
    for (char c : data->bytes)
      values.push_back(c != 0);
    return DenseElementsAttr::get(type, ArrayRef<bool>(values));
  }
  return DenseElementsAttr::getFromRawBuffer(
      type, ArrayRef<char>(data->bytes.data(), data->bytes.size()));
}

//===----------------------------------------------------------------------===//
// GraphImporter
//===----------------------------------------------------------------------===//

void GraphImporter::nameNode(const onnx::NodeProto &node, int index) {
  std::string name = node.name();
  if (name.empty())
    name = node.op_type() + "_" + std::to_string(index);
  Location fileLoc = FileLineColLoc::get(
      builder.getContext(), modelPath.empty() ? "<model>" : modelPath, 0, 0);
  locations.try_emplace(&node,
                        NameLoc::get(builder.getStringAttr(name), fileLoc));
}

FailureOr<Value> GraphImporter::finishOp(Operation *op) {
  // Result shapes first: the verifier counts elements, which a shape from
  // a file (negative, or beyond int64) must not reach.
  for (Type type : op->getResultTypes())
    if (auto shaped = dyn_cast<RankedTensorType>(type);
        shaped && !withinElementLimit(shaped.getShape())) {
      InFlightDiagnostic diag =
          op->emitError("the result ")
          << type << " has a negative extent or more than 2^40 elements";
      op->erase();
      return failure();
    }
  if (failed(mlir::verify(op))) {
    op->erase();
    return failure();
  }
  assert(op->getNumResults() == 1 && "importer ops have one result");
  if (auto shaped = dyn_cast<RankedTensorType>(op->getResult(0).getType());
      shaped && shaped.getNumElements() > kMaxFoldedElements)
    return op->getResult(0);
  SmallVector<Attribute> constants;
  for (Value operand : op->getOperands()) {
    Attribute attr;
    (void)matchPattern(operand, m_Constant(&attr));
    constants.push_back(attr);
  }
  SmallVector<OpFoldResult> folded;
  if (failed(op->fold(constants, folded)) || folded.size() != 1)
    return op->getResult(0);
  Value result;
  if (auto value = dyn_cast<Value>(folded[0])) {
    result = value;
  } else {
    auto attr = cast<ElementsAttr>(cast<Attribute>(folded[0]));
    result = nn::ConstantOp::create(builder, op->getLoc(), attr);
  }
  if (result != op->getResult(0)) {
    op->getResult(0).replaceAllUsesWith(result);
    op->erase();
  }
  return result;
}

Location GraphImporter::loc(const onnx::NodeProto &node) {
  auto it = locations.find(&node);
  assert(it != locations.end() && "nameNode must be called first");
  return it->second;
}

InFlightDiagnostic GraphImporter::error(const onnx::NodeProto &node) {
  return emitError(loc(node)) << node.op_type() << ": ";
}

LogicalResult GraphImporter::unsupportedOutput(const onnx::NodeProto &node,
                                               int index, StringRef what) {
  if (index < node.output_size() && !node.output(index).empty())
    unsupported[node.output(index)] =
        node.op_type() + " output " + what.str() + " is not supported";
  return success();
}

void GraphImporter::setSequence(const onnx::NodeProto &node, int index,
                                ArrayRef<Value> parts) {
  if (index >= node.output_size() || node.output(index).empty())
    return;
  sequences[node.output(index)].assign(parts.begin(), parts.end());
  unsupported[node.output(index)] =
      node.op_type() + " output is a sequence of tensors, not supported "
                       "but as SequenceAt's input at a constant position";
}

FailureOr<ArrayRef<Value>>
GraphImporter::sequenceInput(const onnx::NodeProto &node, int index) {
  if (index < node.input_size()) {
    auto found = sequences.find(node.input(index));
    if (found != sequences.end())
      return ArrayRef<Value>(found->second);
  }
  return error(node) << "input #" << index
                     << " is not a sequence made by SplitToSequence (the "
                        "only sequences supported)";
}

FailureOr<Value> GraphImporter::optionalInput(const onnx::NodeProto &node,
                                              int index) {
  if (index >= node.input_size() || node.input(index).empty())
    return Value();
  Value value = values.lookup(node.input(index));
  if (!value && unsupported.count(node.input(index)))
    return error(node) << "uses '" << node.input(index)
                       << "': " << unsupported.lookup(node.input(index));
  if (!value)
    return error(node) << "input '" << node.input(index)
                       << "' is not defined by any earlier node, "
                          "initializer or graph input";
  return value;
}

FailureOr<Value> GraphImporter::input(const onnx::NodeProto &node, int index) {
  FailureOr<Value> value = optionalInput(node, index);
  if (succeeded(value) && !*value)
    return error(node) << "missing input #" << index;
  return value;
}

FailureOr<DenseElementsAttr>
GraphImporter::constantInput(const onnx::NodeProto &node, int index,
                             StringRef what) {
  FailureOr<Value> value = input(node, index);
  if (failed(value))
    return failure();
  DenseElementsAttr attr;
  if (auto constant = value->getDefiningOp<nn::ConstantOp>())
    attr = dyn_cast<DenseElementsAttr>(constant.getValue());
  if (!attr)
    return error(node) << what << " (input '" << node.input(index)
                       << "') must be a compile-time constant (values "
                          "computed at run time are not supported here)";
  return attr;
}

FailureOr<SmallVector<int64_t>>
GraphImporter::constantInts(const onnx::NodeProto &node, int index,
                            StringRef what) {
  FailureOr<DenseElementsAttr> attr = constantInput(node, index, what);
  if (failed(attr))
    return failure();
  if (!attr->getElementType().isInteger())
    return error(node) << what << " must be an integer tensor";
  SmallVector<int64_t> ints;
  for (const APInt &v : attr->getValues<APInt>())
    ints.push_back(v.getSExtValue());
  return ints;
}

FailureOr<double> GraphImporter::constantScalar(const onnx::NodeProto &node,
                                                int index, StringRef what) {
  FailureOr<DenseElementsAttr> attr = constantInput(node, index, what);
  if (failed(attr))
    return failure();
  if (attr->getNumElements() != 1)
    return error(node) << what << " must hold one value, not "
                       << attr->getNumElements();
  Type element = attr->getElementType();
  if (isa<FloatType>(element))
    return (*attr->getValues<APFloat>().begin()).convertToDouble();
  if (element.isInteger(1))
    return (*attr->getValues<APInt>().begin()).getBoolValue() ? 1.0 : 0.0;
  if (element.isInteger())
    return static_cast<double>(
        (*attr->getValues<APInt>().begin()).getSExtValue());
  return error(node) << what << " must be a number, not " << element;
}

void GraphImporter::setOutput(const onnx::NodeProto &node, int index,
                              Value value) {
  if (index < node.output_size() && !node.output(index).empty())
    values[node.output(index)] = value;
}

const onnx::AttributeProto *
GraphImporter::attribute(const onnx::NodeProto &node, StringRef name) {
  for (const auto &attr : node.attribute())
    if (attr.name() == name)
      return &attr;
  return nullptr;
}

int64_t GraphImporter::intAttr(const onnx::NodeProto &node, StringRef name,
                               int64_t defaultValue) {
  const onnx::AttributeProto *attr = attribute(node, name);
  return attr ? attr->i() : defaultValue;
}

float GraphImporter::floatAttr(const onnx::NodeProto &node, StringRef name,
                               float defaultValue) {
  const onnx::AttributeProto *attr = attribute(node, name);
  return attr ? attr->f() : defaultValue;
}

std::string GraphImporter::stringAttr(const onnx::NodeProto &node,
                                      StringRef name, StringRef defaultValue) {
  const onnx::AttributeProto *attr = attribute(node, name);
  return attr ? attr->s() : defaultValue.str();
}

std::optional<SmallVector<int64_t>>
GraphImporter::intsAttr(const onnx::NodeProto &node, StringRef name) {
  const onnx::AttributeProto *attr = attribute(node, name);
  if (!attr)
    return std::nullopt;
  return SmallVector<int64_t>(attr->ints().begin(), attr->ints().end());
}

FailureOr<int64_t> GraphImporter::normalizeAxis(const onnx::NodeProto &node,
                                                int64_t axis, int64_t rank) {
  if (axis < -rank || axis >= rank)
    return error(node) << "axis " << axis << " is out of range for rank "
                       << rank;
  return axis < 0 ? axis + rank : axis;
}

FailureOr<SmallVector<int64_t>>
GraphImporter::normalizeAxes(const onnx::NodeProto &node,
                             ArrayRef<int64_t> axes, int64_t rank) {
  SmallVector<int64_t> normalized;
  for (int64_t axis : axes) {
    FailureOr<int64_t> a = normalizeAxis(node, axis, rank);
    if (failed(a))
      return failure();
    normalized.push_back(*a);
  }
  return normalized;
}
