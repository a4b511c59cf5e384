//===- ContractionHandlers.cpp - import Gemm and MatMul ---------*- C++ -*-===//

#include "GraphImporter.h"

#include "llvm/ADT/StringExtras.h"

using namespace mlir;
using namespace accrue;
using namespace accrue::onnx_import;

namespace {

LogicalResult importGemm(GraphImporter &im, const onnx::NodeProto &node) {
  FailureOr<Value> a = im.input(node, 0), b = im.input(node, 1);
  FailureOr<Value> c = im.optionalInput(node, 2);
  if (failed(a) || failed(b) || failed(c))
    return failure();
  OpBuilder &builder = im.builder;
  FailureOr<Value> op = im.create<nn::GemmOp>(
      node, *a, *b, *c,
      builder.getF32FloatAttr(im.floatAttr(node, "alpha", 1.0f)),
      builder.getF32FloatAttr(im.floatAttr(node, "beta", 1.0f)),
      builder.getBoolAttr(im.intAttr(node, "transA", 0) != 0),
      builder.getBoolAttr(im.intAttr(node, "transB", 0) != 0));
  if (failed(op))
    return failure();
  im.setOutput(node, 0, *op);
  return success();
}

/// numpy.matmul's rank-1 rules: a rank-1 lhs is a row, a rank-1 rhs a
/// column, and the added dimension is dropped from the result.
LogicalResult importMatMul(GraphImporter &im, const onnx::NodeProto &node) {
  FailureOr<Value> lhs = im.input(node, 0), rhs = im.input(node, 1);
  if (failed(lhs) || failed(rhs))
    return failure();
  nn::NNBuilder nnb(im.builder, im.loc(node));
  auto lhsType = cast<RankedTensorType>(lhs->getType());
  auto rhsType = cast<RankedTensorType>(rhs->getType());
  if (lhsType.getRank() == 0 || rhsType.getRank() == 0)
    return im.error(node) << "operands must have rank >= 1";
  bool lhsVector = lhsType.getRank() == 1, rhsVector = rhsType.getRank() == 1;
  Value l = *lhs, r = *rhs;
  if (lhsVector)
    l = nnb.reshape(l, RankedTensorType::get({1, lhsType.getDimSize(0)},
                                             lhsType.getElementType()));
  if (rhsVector)
    r = nnb.reshape(r, RankedTensorType::get({rhsType.getDimSize(0), 1},
                                             rhsType.getElementType()));
  FailureOr<Value> op = im.create<nn::MatMulOp>(node, l, r);
  if (failed(op))
    return failure();
  Value result = *op;
  if (lhsVector || rhsVector) {
    auto type = cast<RankedTensorType>(result.getType());
    SmallVector<int64_t> shape(type.getShape());
    if (rhsVector)
      shape.pop_back();
    if (lhsVector)
      shape.erase(shape.end() - (rhsVector ? 1 : 2));
    result = nnb.reshape(result,
                         RankedTensorType::get(shape, type.getElementType()));
  }
  im.setOutput(node, 0, result);
  return success();
}

/// An Einsum operand: its value and one index id per dimension.
struct Term {
  Value value;
  SmallVector<int> indices;
};

/// Einsum as nn ops: indices used by one operand only (and not the output)
/// are summed first, then operands contract pairwise, left to right, as
/// batched MatMuls ([batch, free, contracted] x [batch, contracted, free]),
/// and the result is transposed to the output's order. The operand holding
/// the output's leading index goes left, so a batch-major operand keeps
/// its samples in the leading dimension. Ellipses stand for the same
/// dimensions in every operand; repeated indices within an operand
/// (diagonals) and broadcasting of size-1 dimensions are not supported.
LogicalResult importEinsum(GraphImporter &im, const onnx::NodeProto &node) {
  std::string equation = im.stringAttr(node, "equation", "");
  llvm::erase_if(equation, [](char c) { return c == ' '; });
  StringRef eq(equation);
  auto [lhs, out] = eq.split("->");
  bool explicitOutput = eq.contains("->");
  SmallVector<StringRef> specs;
  lhs.split(specs, ',');
  if (static_cast<int>(specs.size()) != node.input_size())
    return im.error(node) << "equation '" << equation << "' names "
                          << specs.size() << " operands, the node has "
                          << node.input_size();
  OpBuilder &b = im.builder;
  Location loc = im.loc(node);
  nn::NNBuilder nnb(b, loc);
  // Index ids: letters by character; ellipsis dimensions by position from
  // the right (ids 1000 + k).
  auto parse = [&](StringRef spec, int64_t rank,
                   SmallVector<int> &ids) -> LogicalResult {
    size_t dots = spec.find("...");
    int64_t letters =
        static_cast<int64_t>(spec.size()) - (dots == StringRef::npos ? 0 : 3);
    int64_t ellipsis = dots == StringRef::npos ? 0 : rank - letters;
    if (ellipsis < 0 || (dots == StringRef::npos && letters != rank))
      return im.error(node) << "'" << spec << "' does not match an operand "
                            << "of rank " << rank;
    for (size_t i = 0; i < spec.size(); ++i) {
      if (i == dots) {
        for (int64_t k = ellipsis; k > 0; --k)
          ids.push_back(1000 + static_cast<int>(k));
        i += 2;
        continue;
      }
      if (!llvm::isAlpha(spec[i]))
        return im.error(node)
               << "unexpected '" << spec[i] << "' in the equation";
      ids.push_back(spec[i]);
    }
    return success();
  };
  SmallVector<Term> terms;
  llvm::DenseMap<int, int64_t> sizes;
  int64_t maxEllipsis = 0;
  for (auto [i, spec] : llvm::enumerate(specs)) {
    FailureOr<Value> v = im.input(node, i);
    if (failed(v))
      return failure();
    auto type = cast<RankedTensorType>(v->getType());
    Term term{*v, {}};
    if (failed(parse(spec, type.getRank(), term.indices)))
      return failure();
    for (auto [d, id] : llvm::enumerate(term.indices)) {
      if (llvm::count(term.indices, id) > 1)
        return im.error(node) << "repeated indices within an operand "
                                 "(diagonals) are not supported";
      auto [it, inserted] = sizes.try_emplace(id, type.getDimSize(d));
      if (!inserted && it->second != type.getDimSize(d))
        return im.error(node) << "index sizes differ between operands ("
                              << it->second << " and " << type.getDimSize(d)
                              << "); broadcasting is not supported";
      if (id >= 1000)
        maxEllipsis = std::max<int64_t>(maxEllipsis, id - 1000);
    }
    terms.push_back(term);
  }
  SmallVector<int> output;
  if (explicitOutput) {
    bool dots = out.contains("...");
    if (!dots && maxEllipsis > 0)
      return im.error(node) << "the output must keep the ellipsis";
    // The output's ellipsis is as wide as the widest operand's.
    int64_t letters = static_cast<int64_t>(out.size()) - (dots ? 3 : 0);
    if (failed(parse(out, letters + (dots ? maxEllipsis : 0), output)))
      return failure();
    for (int id : output)
      if (!sizes.count(id))
        return im.error(node)
               << "output index '" << char(id) << "' appears in no operand";
  } else {
    // numpy's implicit output: the ellipsis, then the letters that appear
    // once, in alphabetical order.
    for (int64_t k = maxEllipsis; k > 0; --k)
      output.push_back(1000 + static_cast<int>(k));
    SmallVector<int> once;
    for (auto [id, size] : sizes) {
      int uses = 0;
      for (const Term &t : terms)
        uses += llvm::count(t.indices, id);
      if (id < 1000 && uses == 1)
        once.push_back(id);
    }
    llvm::sort(once);
    llvm::append_range(output, once);
  }

  auto neededOutside = [&](int id, size_t self, size_t other) {
    if (llvm::is_contained(output, id))
      return true;
    for (size_t t = 0; t < terms.size(); ++t)
      if (t != self && t != other && llvm::is_contained(terms[t].indices, id))
        return true;
    return false;
  };
  auto permute = [&](Term &t, ArrayRef<int> order) {
    if (ArrayRef<int>(t.indices) == order)
      return;
    SmallVector<int64_t> perm;
    for (int id : order)
      perm.push_back(llvm::find(t.indices, id) - t.indices.begin());
    t.value =
        nn::TransposeOp::create(b, loc, t.value, b.getDenseI64ArrayAttr(perm));
    t.indices.assign(order.begin(), order.end());
  };
  auto shapeOf = [&](ArrayRef<int> ids) {
    SmallVector<int64_t> shape;
    for (int id : ids)
      shape.push_back(sizes[id]);
    return shape;
  };
  auto product = [&](ArrayRef<int> ids) {
    int64_t p = 1;
    for (int id : ids)
      p *= sizes[id];
    return p;
  };
  Type element =
      cast<RankedTensorType>(terms[0].value.getType()).getElementType();
  auto reshape = [&](Value v, ArrayRef<int64_t> shape) {
    return nnb.reshape(v, RankedTensorType::get(shape, element));
  };
  // Sum the indices only one operand uses and the output does not keep.
  for (size_t t = 0; t < terms.size(); ++t) {
    SmallVector<int64_t> axes;
    SmallVector<int> kept;
    for (auto [d, id] : llvm::enumerate(terms[t].indices)) {
      if (neededOutside(id, t, t))
        kept.push_back(id);
      else
        axes.push_back(d);
    }
    if (axes.empty())
      continue;
    terms[t].value = nn::ReduceSumOp::create(b, loc, terms[t].value, axes,
                                             /*keepdims=*/false);
    terms[t].indices = kept;
  }
  // Contract pairwise.
  while (terms.size() > 1) {
    Term a = terms[0], c = terms[1];
    // The operand with the output's leading index goes left.
    if (!output.empty() && llvm::is_contained(c.indices, output.front()) &&
        !llvm::is_contained(a.indices, output.front()))
      std::swap(a, c);
    SmallVector<int> batch, contracted, aFree, cFree;
    for (int id : a.indices) {
      if (!llvm::is_contained(c.indices, id))
        aFree.push_back(id);
      else if (neededOutside(id, 0, 1))
        batch.push_back(id);
      else
        contracted.push_back(id);
    }
    for (int id : c.indices)
      if (!llvm::is_contained(a.indices, id))
        cFree.push_back(id);
    SmallVector<int> aOrder(batch), cOrder(batch);
    llvm::append_range(aOrder, aFree);
    llvm::append_range(aOrder, contracted);
    llvm::append_range(cOrder, contracted);
    llvm::append_range(cOrder, cFree);
    permute(a, aOrder);
    permute(c, cOrder);
    int64_t nb = product(batch), m = product(aFree), k = product(contracted),
            n = product(cFree);
    Value lhs =
        reshape(a.value, batch.empty() ? SmallVector<int64_t>{m, k}
                                       : SmallVector<int64_t>{nb, m, k});
    Value rhs =
        reshape(c.value, batch.empty() ? SmallVector<int64_t>{k, n}
                                       : SmallVector<int64_t>{nb, k, n});
    Term result;
    result.indices = batch;
    llvm::append_range(result.indices, aFree);
    llvm::append_range(result.indices, cFree);
    result.value = reshape(nn::MatMulOp::create(b, loc, lhs, rhs),
                           shapeOf(result.indices));
    terms.erase(terms.begin(), terms.begin() + 2);
    terms.insert(terms.begin(), result);
  }
  Term &last = terms.front();
  if (last.indices.size() != output.size())
    return im.error(node) << "the output does not name every index left";
  permute(last, output);
  return im.setResult(node, im.create<nn::IdentityOp>(node, last.value));
}

} // namespace

void onnx_import::addContractionHandlers(std::vector<OpRegistration> &list) {
  list.push_back({"Gemm", 7, importGemm});
  list.push_back({"MatMul", 1, importMatMul});
  list.push_back({"Einsum", 12, importEinsum});
}
