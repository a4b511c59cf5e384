//===- AttentionHandlers.cpp - import Attention and RotaryEmbedding -------===//
//
// Attention (opsets 23 to 25: what PyTorch 2's exporter writes for
// scaled_dot_product_attention) and RotaryEmbedding (opset 23: LLaMA's
// positions), composed of nn ops the way their function bodies are, so
// their VJPs come from the parts.
//
// Attention's masks meet in one additive bias broadcast over [B, H, Sq,
// Skv] (0 where a query attends a key, -inf where not, or a float mask's
// values): the boolean or float attn_mask (its key dimension padded with
// -inf up to the keys), the causal frontier and the sliding window (key j
// is seen from query i where j <= i + offset, and p - left <= j <= p +
// right for p = i + offset; the offset is the past keys' count, or a
// sample's non-padding keys less the queries), and the keys past a
// sample's nonpad_kv_seqlen. A query row the bias masks entirely gives
// zeros, not the NaN a softmax of -inf makes; where the bias is known at
// compile time (no attn_mask, no nonpad_kv_seqlen), which rows those are is
// too.
//
//===----------------------------------------------------------------------===//

#include "GraphImporter.h"

#include <cmath>
#include <limits>

using namespace mlir;
using namespace accrue;
using namespace accrue::onnx_import;

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

/// [B, S, H * D] as [B, H, S, D].
FailureOr<Value> splitHeads(GraphImporter &im, const onnx::NodeProto &node,
                            Value x, int64_t heads, StringRef what) {
  RankedTensorType type = typeOf(x);
  int64_t hidden = type.getDimSize(2);
  if (heads <= 0 || hidden % heads != 0)
    return im.error(node) << what << "'s hidden size " << hidden
                          << " is not a multiple of its " << heads << " heads";
  nn::NNBuilder nnb(im.builder, im.loc(node));
  Value split = nnb.reshape(
      x, RankedTensorType::get(
             {type.getDimSize(0), type.getDimSize(1), heads, hidden / heads},
             type.getElementType()));
  return Value(
      nn::TransposeOp::create(im.builder, im.loc(node), split,
                              im.builder.getDenseI64ArrayAttr({0, 2, 1, 3})));
}

/// [B, Hkv, S, D] with each head repeated `times` times in place
/// ([h0, h0, h1, h1, ...]): grouped-query attention's keys and values.
Value repeatHeads(nn::NNBuilder &nnb, Value x, int64_t times) {
  if (times == 1)
    return x;
  RankedTensorType type = typeOf(x);
  ArrayRef<int64_t> s = type.getShape();
  Type element = type.getElementType();
  Value grouped = nnb.reshape(
      x, RankedTensorType::get({s[0], s[1], 1, s[2], s[3]}, element));
  Value repeated = nnb.broadcastTo(
      grouped, RankedTensorType::get({s[0], s[1], times, s[2], s[3]}, element));
  return nnb.reshape(repeated, RankedTensorType::get(
                                   {s[0], s[1] * times, s[2], s[3]}, element));
}

/// 0 where `allowed`, -inf elsewhere, in `element`.
Value additiveMask(nn::NNBuilder &nnb, Value allowed, Type element) {
  return nn::WhereOp::create(nnb.b, nnb.loc, allowed, nnb.scalar(element, 0.0),
                             nnb.scalar(element, -kInf));
}

/// Which keys the causal frontier and the sliding window leave a query:
/// with p the query's absolute position (its index plus the offset), key j
/// where j <= p (causal), p - left <= j and j <= p + right (-1: unbounded).
struct Frontier {
  bool causal;
  int64_t left, right;

  bool any() const { return causal || left >= 0 || right >= 0; }
  /// Whether the query at absolute position `p` sees none of `keys` keys.
  bool masksRow(int64_t p, int64_t keys) const {
    int64_t low = left >= 0 ? std::max<int64_t>(0, p - left) : 0;
    int64_t high = keys - 1;
    if (causal)
      high = std::min(high, p);
    if (right >= 0)
      high = std::min(high, p + right);
    return low > high;
  }
};

/// The frontier's bias for queries offset by `offsets` (i64: one offset,
/// [1, 1], or one a sample, [B, 1, 1]): [Sq, Skv] or [B, 1, Sq, Skv] of 0
/// and -inf, from the positions' difference i - j (no table of Sq x Skv
/// is built here).
Value frontierBias(nn::NNBuilder &nnb, Type element, const Frontier &frontier,
                   Value offsets, int64_t queries, int64_t keys) {
  OpBuilder &b = nnb.b;
  Location loc = nnb.loc;
  Type i64 = b.getI64Type();
  Value rows = nnb.reshape(
      indexVector(b, loc, llvm::to_vector(llvm::seq<int64_t>(0, queries))),
      RankedTensorType::get({queries, 1}, i64));
  Value columns = nnb.reshape(
      indexVector(b, loc, llvm::to_vector(llvm::seq<int64_t>(0, keys))),
      RankedTensorType::get({1, keys}, i64));
  // p - j, for every sample's offset.
  Value diff = nnb.sub(nnb.add(rows, offsets), columns);
  Value allowed;
  auto meet = [&](Value condition) {
    allowed = allowed ? Value(nn::AndOp::create(b, loc, allowed, condition))
                      : condition;
  };
  if (frontier.causal)
    meet(nn::GreaterOrEqualOp::create(b, loc, diff, nnb.scalar(i64, 0)));
  if (frontier.left >= 0)
    meet(nn::LessOrEqualOp::create(b, loc, diff,
                                   nnb.scalar(i64, frontier.left)));
  if (frontier.right >= 0)
    meet(nn::GreaterOrEqualOp::create(b, loc, diff,
                                      nnb.scalar(i64, -frontier.right)));
  Value bias = additiveMask(nnb, allowed, element);
  RankedTensorType type = typeOf(bias);
  if (type.getRank() == 3)
    bias = nnb.reshape(
        bias,
        RankedTensorType::get({type.getDimSize(0), 1, queries, keys}, element));
  return bias;
}

LogicalResult importAttention(GraphImporter &im, const onnx::NodeProto &node) {
  FailureOr<Value> q = im.input(node, 0), k = im.input(node, 1),
                   v = im.input(node, 2);
  FailureOr<Value> mask = im.optionalInput(node, 3),
                   pastKey = im.optionalInput(node, 4),
                   pastValue = im.optionalInput(node, 5),
                   nonpad = im.optionalInput(node, 6);
  if (failed(q) || failed(k) || failed(v) || failed(mask) || failed(pastKey) ||
      failed(pastValue) || failed(nonpad))
    return failure();
  OpBuilder &b = im.builder;
  Location loc = im.loc(node);
  nn::NNBuilder nnb(b, loc);
  Type element = typeOf(*q).getElementType();
  if (!isa<FloatType>(element))
    return im.error(node) << "expects floating-point Q, K and V, got "
                          << q->getType();
  if (typeOf(*k).getElementType() != element ||
      typeOf(*v).getElementType() != element)
    return im.error(node) << "Q, K and V have different element types";
  int64_t rank = typeOf(*q).getRank();
  if ((rank != 3 && rank != 4) || typeOf(*k).getRank() != rank ||
      typeOf(*v).getRank() != rank)
    return im.error(node) << "Q, K and V must all be 3-D or all 4-D";
  if (static_cast<bool>(*pastKey) != static_cast<bool>(*pastValue))
    return im.error(node) << "past_key and past_value go together";
  if (*nonpad && *pastKey)
    return im.error(node)
           << "nonpad_kv_seqlen cannot be combined with past_key/past_value";
  int64_t mode = im.intAttr(node, "qk_matmul_output_mode", 0);
  if (mode < 0 || mode > 3)
    return im.error(node) << "qk_matmul_output_mode " << mode
                          << " is not one of 0, 1, 2, 3";
  Frontier frontier{im.intAttr(node, "is_causal", 0) != 0,
                    im.intAttr(node, "left_window_size", -1),
                    im.intAttr(node, "right_window_size", -1)};
  if (frontier.left < -1 || frontier.right < -1)
    return im.error(node) << "left_window_size and right_window_size must be "
                             "-1 or nonnegative";

  // Heads: [B, S, H * D] inputs are split into [B, H, S, D].
  Value query = *q, key = *k, value = *v;
  if (rank == 4 && im.opset >= 25 &&
      (GraphImporter::attribute(node, "q_num_heads") ||
       GraphImporter::attribute(node, "kv_num_heads")))
    return im.error(node) << "q_num_heads and kv_num_heads are for 3-D "
                             "inputs only (opset 25)";
  if (rank == 3) {
    int64_t qHeads = im.intAttr(node, "q_num_heads", 0);
    int64_t kvHeads = im.intAttr(node, "kv_num_heads", 0);
    if (qHeads <= 0 || kvHeads <= 0)
      return im.error(node) << "3-D inputs need q_num_heads and kv_num_heads";
    FailureOr<Value> splitQ = splitHeads(im, node, query, qHeads, "Q");
    FailureOr<Value> splitK = splitHeads(im, node, key, kvHeads, "K");
    FailureOr<Value> splitV = splitHeads(im, node, value, kvHeads, "V");
    if (failed(splitQ) || failed(splitK) || failed(splitV))
      return failure();
    query = *splitQ, key = *splitK, value = *splitV;
  }
  ArrayRef<int64_t> qShape = typeOf(query).getShape(),
                    kShape = typeOf(key).getShape(),
                    vShape = typeOf(value).getShape();
  int64_t batch = qShape[0], heads = qShape[1], queries = qShape[2];
  if (kShape[0] != batch || vShape[0] != batch)
    return im.error(node) << "Q, K and V have different batch sizes";
  if (kShape[1] != vShape[1] || kShape[2] != vShape[2])
    return im.error(node) << "K and V differ in heads or sequence length";
  if (kShape[3] != qShape[3])
    return im.error(node) << "Q's head size " << qShape[3]
                          << " differs from K's " << kShape[3];
  if (heads <= 0 || kShape[1] <= 0)
    return im.error(node) << "Q and K need at least one head each";
  if (heads % kShape[1] != 0)
    return im.error(node) << "Q's " << heads
                          << " heads are not a multiple of K's " << kShape[1];

  // The cache: past keys and values come first.
  if (*pastKey) {
    FailureOr<Value> presentKey = im.create<nn::ConcatOp>(
        node, ValueRange{*pastKey, key}, b.getI64IntegerAttr(2));
    FailureOr<Value> presentValue = im.create<nn::ConcatOp>(
        node, ValueRange{*pastValue, value}, b.getI64IntegerAttr(2));
    if (failed(presentKey) || failed(presentValue))
      return failure();
    key = *presentKey, value = *presentValue;
  }
  im.setOutput(node, 1, key);
  im.setOutput(node, 2, value);
  int64_t keys = typeOf(key).getDimSize(2);
  int64_t past = *pastKey ? typeOf(*pastKey).getDimSize(2) : 0;

  // The bias.
  SmallVector<Value> biases;
  bool runtimeBias = false;
  if (*mask) {
    RankedTensorType maskType = typeOf(*mask);
    Value maskBias = *mask;
    if (maskType.getElementType().isInteger(1))
      maskBias = additiveMask(nnb, maskBias, element);
    else if (maskType.getElementType() != element)
      return im.error(node)
             << "attn_mask must be boolean or of Q's type, got " << maskType;
    int64_t maskRank = maskType.getRank();
    int64_t maskKeys = maskRank ? maskType.getDimSize(maskRank - 1) : 1;
    if (maskRank == 0 || maskKeys > keys)
      return im.error(node) << "attn_mask of shape " << maskType
                            << " does not fit " << keys << " keys";
    // Keys past the mask's last are masked, as ONNX's reference pads it
    // (a mask of one key too).
    maskBias =
        padAxis(b, loc, maskBias, maskRank - 1, 0, keys - maskKeys, -kInf);
    if (failed(im.requireBroadcastsTo(node, 3, maskBias,
                                      {batch, heads, queries, keys})))
      return failure();
    biases.push_back(maskBias);
    runtimeBias = true;
  }
  if (*nonpad) {
    RankedTensorType nonpadType = typeOf(*nonpad);
    if (nonpadType.getRank() != 1 || nonpadType.getDimSize(0) != batch ||
        !nonpadType.getElementType().isInteger(64))
      return im.error(node) << "nonpad_kv_seqlen must be int64 [" << batch
                            << "], got " << nonpadType;
    Type i64 = b.getI64Type();
    // Keys past a sample's count are padding.
    Value positions = nnb.reshape(
        indexVector(b, loc, llvm::to_vector(llvm::seq<int64_t>(0, keys))),
        RankedTensorType::get({1, keys}, i64));
    Value counts = nnb.reshape(*nonpad, RankedTensorType::get({batch, 1}, i64));
    Value padding = additiveMask(
        nnb, nn::LessOp::create(b, loc, positions, counts), element);
    biases.push_back(nnb.reshape(
        padding, RankedTensorType::get({batch, 1, 1, keys}, element)));
    if (frontier.any())
      biases.push_back(
          frontierBias(nnb, element, frontier,
                       nnb.reshape(nnb.sub(*nonpad, nnb.scalar(i64, queries)),
                                   RankedTensorType::get({batch, 1, 1}, i64)),
                       queries, keys));
    runtimeBias = true;
  } else if (frontier.any()) {
    biases.push_back(
        frontierBias(nnb, element, frontier,
                     nn::ConstantOp::create(
                         b, loc,
                         DenseElementsAttr::get(
                             RankedTensorType::get({1, 1}, b.getI64Type()),
                             ArrayRef<int64_t>{past})),
                     queries, keys));
  }
  Value bias;
  for (Value part : biases)
    bias = bias ? nnb.add(bias, part) : part;
  // Rows the bias masks entirely (known at compile time where the bias is).
  bool rowsMayBeMasked = runtimeBias;
  for (int64_t i = 0; i < queries && bias && !rowsMayBeMasked; ++i)
    rowsMayBeMasked = frontier.masksRow(i + past, keys);

  // The scores: Q and K each scaled by the scale's square root, as the
  // function body rounds them.
  double scale = 1.0 / std::sqrt(static_cast<double>(qShape[3]));
  if (GraphImporter::attribute(node, "scale"))
    scale = im.floatAttr(node, "scale", 1.0f);
  if (!(scale > 0))
    return im.error(node) << "scale must be positive (Q and K are each "
                             "scaled by its square root), got "
                          << scale;
  Value root = nnb.scalar(element, std::sqrt(scale));
  int64_t groups = heads / kShape[1];
  Value scaledKey = repeatHeads(nnb, nnb.mul(key, root), groups);
  Value scores = nn::MatMulOp::create(
      b, loc, nnb.mul(query, root),
      nn::TransposeOp::create(b, loc, scaledKey,
                              b.getDenseI64ArrayAttr({0, 1, 3, 2})));
  float softcap = im.floatAttr(node, "softcap", 0.0f);
  if (softcap > 0) {
    Value cap = nnb.scalar(element, softcap);
    scores = nnb.mul(nn::TanhOp::create(b, loc, nnb.div(scores, cap)), cap);
  }
  Value qkOutput = scores;
  if (bias)
    scores = nnb.add(scores, bias);
  if (mode == 2)
    qkOutput = scores;

  // Softmax, in softmax_precision where given.
  Type precision = element;
  if (GraphImporter::attribute(node, "softmax_precision")) {
    precision = convertElementType(b.getContext(),
                                   im.intAttr(node, "softmax_precision", 0));
    if (!precision || !isa<FloatType>(precision))
      return im.error(node) << "softmax_precision must name a floating-point "
                               "type";
  }
  auto withElement = [](Value x, Type type) {
    return RankedTensorType::get(typeOf(x).getShape(), type);
  };
  if (precision != element)
    scores = nn::CastOp::create(b, loc, withElement(scores, precision), scores);
  Value masked;
  if (rowsMayBeMasked) {
    Value widestBias = bias;
    if (precision != element)
      widestBias =
          nn::CastOp::create(b, loc, withElement(bias, precision), bias);
    masked = nn::EqualOp::create(
        b, loc,
        nn::ReduceMaxOp::create(
            b, loc, widestBias,
            b.getDenseI64ArrayAttr({typeOf(widestBias).getRank() - 1}),
            b.getBoolAttr(true)),
        nnb.scalar(precision, -kInf));
    // A fully masked row's softmax is taken of zeros, then zeroed.
    scores =
        nn::WhereOp::create(b, loc, masked, nnb.scalar(precision, 0.0), scores);
  }
  Value probabilities =
      nn::SoftmaxOp::create(b, loc, scores, b.getI64IntegerAttr(3));
  if (masked)
    probabilities = nn::WhereOp::create(
        b, loc, masked, nnb.scalar(precision, 0.0), probabilities);
  if (precision != element)
    probabilities = nn::CastOp::create(
        b, loc, withElement(probabilities, element), probabilities);
  if (mode == 3)
    qkOutput = probabilities;

  FailureOr<Value> y = im.create<nn::MatMulOp>(node, probabilities,
                                               repeatHeads(nnb, value, groups));
  if (failed(y))
    return failure();
  Value output = *y;
  if (rank == 3) {
    ArrayRef<int64_t> s = typeOf(output).getShape();
    output =
        nnb.reshape(nn::TransposeOp::create(
                        b, loc, output, b.getDenseI64ArrayAttr({0, 2, 1, 3})),
                    RankedTensorType::get({s[0], s[2], s[1] * s[3]}, element));
  }
  im.setOutput(node, 0, output);
  im.setOutput(node, 3, qkOutput);
  return success();
}

/// RotaryEmbedding: each head's first rotary_embedding_dim features rotated
/// in pairs (halves, or neighbours when interleaved) by the cosines and
/// sines of the token's position.
LogicalResult importRotaryEmbedding(GraphImporter &im,
                                    const onnx::NodeProto &node) {
  FailureOr<Value> x = im.input(node, 0), cosCache = im.input(node, 1),
                   sinCache = im.input(node, 2),
                   positions = im.optionalInput(node, 3);
  if (failed(x) || failed(cosCache) || failed(sinCache) || failed(positions))
    return failure();
  OpBuilder &b = im.builder;
  Location loc = im.loc(node);
  nn::NNBuilder nnb(b, loc);
  RankedTensorType type = typeOf(*x);
  Type element = type.getElementType();
  if (!isa<FloatType>(element))
    return im.error(node) << "expects a floating-point input, got " << type;
  if (typeOf(*cosCache).getElementType() != element ||
      typeOf(*sinCache).getElementType() != element)
    return im.error(node) << "cos_cache and sin_cache must have the input's "
                             "element type";
  // To [B, S, H, D].
  Value rows;
  if (type.getRank() == 4) {
    rows = nn::TransposeOp::create(b, loc, *x,
                                   b.getDenseI64ArrayAttr({0, 2, 1, 3}));
  } else if (type.getRank() == 3) {
    int64_t heads = im.intAttr(node, "num_heads", 0);
    if (heads <= 0 || type.getDimSize(2) % heads != 0)
      return im.error(node) << "a 3-D input needs num_heads dividing its "
                            << type.getDimSize(2) << " features";
    rows = nnb.reshape(
        *x, RankedTensorType::get({type.getDimSize(0), type.getDimSize(1),
                                   heads, type.getDimSize(2) / heads},
                                  element));
  } else {
    return im.error(node) << "expects a 3-D or 4-D input, got " << type;
  }
  ArrayRef<int64_t> shape = typeOf(rows).getShape();
  int64_t batch = shape[0], length = shape[1], heads = shape[2],
          size = shape[3];
  int64_t rotated = im.intAttr(node, "rotary_embedding_dim", 0);
  if (rotated == 0)
    rotated = size;
  if (rotated < 0 || rotated > size || rotated % 2)
    return im.error(node) << "rotary_embedding_dim " << rotated
                          << " must be even and at most the head size " << size;
  int64_t half = rotated / 2;
  // The caches at the tokens' positions: [B, S, 1, half].
  auto cacheAt = [&](Value cache, int index) -> FailureOr<Value> {
    if (*positions) {
      FailureOr<Value> gathered = im.create<nn::GatherOp>(
          node, cache, *positions, b.getI64IntegerAttr(0));
      if (failed(gathered))
        return failure();
      cache = *gathered;
    }
    ArrayRef<int64_t> s = typeOf(cache).getShape();
    if (s.size() != 3 || s[0] != batch || s[1] != length || s[2] != half) {
      im.error(node) << "input " << index << " gives a cache of shape "
                     << cache.getType() << " where [" << batch << ", " << length
                     << ", " << half << "] is needed";
      return failure();
    }
    return nnb.reshape(
        cache, RankedTensorType::get({batch, length, 1, half}, element));
  };
  FailureOr<Value> cos = cacheAt(*cosCache, 1), sin = cacheAt(*sinCache, 2);
  if (failed(cos) || failed(sin))
    return failure();
  bool interleaved = im.intAttr(node, "interleaved", 0) != 0;
  auto part = [&](int64_t start, int64_t step) -> Value {
    return nn::SliceOp::create(
        b, loc, RankedTensorType::get({batch, length, heads, half}, element),
        rows, b.getDenseI64ArrayAttr({0, 0, 0, start}),
        b.getDenseI64ArrayAttr({1, 1, 1, step}));
  };
  Value first = interleaved ? part(0, 2) : part(0, 1);
  Value second = interleaved ? part(1, 2) : part(half, 1);
  Value real = nnb.sub(nnb.mul(*cos, first), nnb.mul(*sin, second));
  Value imaginary = nnb.add(nnb.mul(*sin, first), nnb.mul(*cos, second));
  Value result;
  if (interleaved) {
    auto pairType =
        RankedTensorType::get({batch, length, heads, half, 1}, element);
    result = nnb.reshape(
        nn::ConcatOp::create(b, loc,
                             ValueRange{nnb.reshape(real, pairType),
                                        nnb.reshape(imaginary, pairType)},
                             b.getI64IntegerAttr(4)),
        RankedTensorType::get({batch, length, heads, rotated}, element));
  } else {
    result = nn::ConcatOp::create(b, loc, ValueRange{real, imaginary},
                                  b.getI64IntegerAttr(3));
  }
  if (rotated < size)
    result = nn::ConcatOp::create(
        b, loc,
        ValueRange{result,
                   nn::SliceOp::create(
                       b, loc,
                       RankedTensorType::get(
                           {batch, length, heads, size - rotated}, element),
                       rows, b.getDenseI64ArrayAttr({0, 0, 0, rotated}),
                       b.getDenseI64ArrayAttr({1, 1, 1, 1}))},
        b.getI64IntegerAttr(3));
  if (type.getRank() == 4)
    return im.setResult(
        node, Value(nn::TransposeOp::create(
                  b, loc, result, b.getDenseI64ArrayAttr({0, 2, 1, 3}))));
  return im.setResult(node, nnb.reshape(result, type));
}

} // namespace

void onnx_import::addAttentionHandlers(std::vector<OpRegistration> &list) {
  list.push_back({"Attention", 23, importAttention, {6}});
  list.push_back({"RotaryEmbedding", 23, importRotaryEmbedding, {1, 2, 3}});
}
