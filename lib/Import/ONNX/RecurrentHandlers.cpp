//===- RecurrentHandlers.cpp - import RNN, GRU and LSTM ---------*- C++ -*-===//
//
// The recurrent operators become one nn.scan per direction over their
// static sequence length: one contraction projects every time step's input
// at once, then the scan's body, the cell written once, applies the
// recurrent contraction and the gates. The scan's VJP is a scan in reverse
// (backpropagation through time); the CUDA pipeline unrolls scans.
//
// The steps work batch-major ([batch, ...], the layout the
// micro-batcher follows): a sequence-major input that is a transpose of a
// batch-major one (what PyTorch exports for batch_first) is read through the
// transpose, and the outputs are transposes of batch-major values, so the
// transposes and reshapes an exporter puts after them lead back to
// batch-major values (see reshapeTo in ShapeHandlers.cpp).
//
//===----------------------------------------------------------------------===//

#include "GraphImporter.h"

#include "mlir/IR/Matchers.h"
#include "llvm/ADT/StringExtras.h"

using namespace mlir;
using namespace accrue;
using namespace accrue::onnx_import;

namespace {

enum class Cell { RNN, GRU, LSTM };

/// Op builders for the cell, at the node's location.
struct CellBuilder {
  CellBuilder(OpBuilder &b, Location loc) : b(b), loc(loc), nnb(b, loc) {}

  Value slice(Value v, int64_t axis, int64_t start, int64_t size) {
    RankedTensorType type = typeOf(v);
    SmallVector<int64_t> starts(type.getRank(), 0), steps(type.getRank(), 1);
    SmallVector<int64_t> shape(type.getShape());
    starts[axis] = start;
    shape[axis] = size;
    return nn::SliceOp::create(
        b, loc, RankedTensorType::get(shape, type.getElementType()), v,
        b.getDenseI64ArrayAttr(starts), b.getDenseI64ArrayAttr(steps));
  }
  Value reshape(Value v, ArrayRef<int64_t> shape) {
    return nnb.reshape(
        v, RankedTensorType::get(shape, typeOf(v).getElementType()));
  }
  Value transpose(Value v, ArrayRef<int64_t> perm) {
    return nn::TransposeOp::create(b, loc, v, b.getDenseI64ArrayAttr(perm));
  }
  Value matmul(Value x, Value y) { return nn::MatMulOp::create(b, loc, x, y); }
  Value concat(ValueRange parts, int64_t axis) {
    if (parts.size() == 1)
      return parts.front();
    return nn::ConcatOp::create(b, loc, parts, b.getI64IntegerAttr(axis));
  }
  Value sigmoid(Value v) { return nn::SigmoidOp::create(b, loc, v); }
  Value tanh(Value v) { return nn::TanhOp::create(b, loc, v); }

  /// `v` [d0, d1, ...] as [d1, d0, ...]: through a transpose that made it.
  Value swapLeading(Value v) {
    if (auto t = v.getDefiningOp<nn::TransposeOp>())
      if (llvm::equal(t.getPerm(), ArrayRef<int64_t>{1, 0, 2}))
        return t.getInput();
    return transpose(v, {1, 0, 2});
  }

  OpBuilder &b;
  Location loc;
  nn::NNBuilder nnb;
};

template <Cell kCell>
LogicalResult importRecurrent(GraphImporter &im, const onnx::NodeProto &node) {
  const int64_t gates = kCell == Cell::RNN ? 1 : kCell == Cell::GRU ? 3 : 4;
  FailureOr<Value> x = im.input(node, 0), w = im.input(node, 1),
                   r = im.input(node, 2);
  FailureOr<Value> bias = im.optionalInput(node, 3),
                   lengths = im.optionalInput(node, 4),
                   h0 = im.optionalInput(node, 5);
  FailureOr<Value> c0 = Value(), peepholes = Value();
  if (kCell == Cell::LSTM) {
    c0 = im.optionalInput(node, 6);
    peepholes = im.optionalInput(node, 7);
  }
  if (failed(x) || failed(w) || failed(r) || failed(bias) || failed(lengths) ||
      failed(h0) || failed(c0) || failed(peepholes))
    return failure();

  int64_t hidden = im.intAttr(node, "hidden_size", 0);
  std::string direction = im.stringAttr(node, "direction", "forward");
  int64_t layout = im.intAttr(node, "layout", 0);
  if (hidden <= 0)
    return im.error(node) << "hidden_size must be positive";
  if (direction != "forward" && direction != "reverse" &&
      direction != "bidirectional")
    return im.error(node) << "unknown direction '" << direction << "'";
  if (layout != 0 && layout != 1)
    return im.error(node) << "layout must be 0 or 1";
  int64_t directions = direction == "bidirectional" ? 2 : 1;
  if (im.attribute(node, "clip"))
    return im.error(node) << "clip is not supported";
  if (kCell == Cell::LSTM && im.intAttr(node, "input_forget", 0) != 0)
    return im.error(node) << "input_forget is not supported";
  // Only the default activations (the ones PyTorch exports).
  if (const onnx::AttributeProto *acts = im.attribute(node, "activations")) {
    SmallVector<StringRef> defaults =
        kCell == Cell::RNN ? SmallVector<StringRef>{"tanh"}
        : kCell == Cell::GRU
            ? SmallVector<StringRef>{"sigmoid", "tanh"}
            : SmallVector<StringRef>{"sigmoid", "tanh", "tanh"};
    for (int i = 0; i < acts->strings_size(); ++i)
      if (StringRef(acts->strings(i)).lower() != defaults[i % defaults.size()])
        return im.error(node)
               << "activations other than the defaults ("
               << llvm::join(defaults, ", ") << ") are not supported";
  }

  RankedTensorType xType = typeOf(*x);
  if (xType.getRank() != 3)
    return im.error(node) << "X must have rank 3";
  OpBuilder &b = im.builder;
  Location loc = im.loc(node);
  CellBuilder u(b, loc);
  // Batch-major input [N, T, I].
  Value xb = layout == 1 ? *x : u.swapLeading(*x);
  int64_t batch = typeOf(xb).getDimSize(0), steps = typeOf(xb).getDimSize(1),
          inputSize = typeOf(xb).getDimSize(2);
  Type element = xType.getElementType();

  auto requireShape = [&](int index, Value v,
                          ArrayRef<int64_t> shape) -> LogicalResult {
    if (typeOf(v).getShape() == shape)
      return success();
    InFlightDiagnostic diag = im.error(node);
    diag << "input " << index << " ('" << node.input(index)
         << "') must have shape [";
    llvm::interleaveComma(shape, diag);
    return diag << "], not " << typeOf(v);
  };
  if (failed(requireShape(1, *w, {directions, gates * hidden, inputSize})) ||
      failed(requireShape(2, *r, {directions, gates * hidden, hidden})) ||
      (*bias &&
       failed(requireShape(3, *bias, {directions, 2 * gates * hidden}))) ||
      (*peepholes &&
       failed(requireShape(7, *peepholes, {directions, 3 * hidden}))))
    return failure();
  // Sequence lengths [N] (compile-time or a batch input, PyTorch's packed
  // sequences): step t of sample n runs only if t < lengths[n]; the state
  // carries over the others and their outputs are 0. Lengths known to be
  // full need no masks.
  Value stepMask;
  if (*lengths) {
    if (failed(requireShape(4, *lengths, {batch})))
      return failure();
    if (!isa<IntegerType>(typeOf(*lengths).getElementType()))
      return im.error(node) << "sequence_lens must be integers";
    DenseElementsAttr given;
    bool full = matchPattern(*lengths, m_Constant(&given)) &&
                llvm::all_of(given.getValues<APInt>(), [&](const APInt &l) {
                  return l.getSExtValue() >= steps;
                });
    if (!full)
      stepMask = u.reshape(*lengths, {batch, 1});
  }
  // Initial states [N, D, H].
  auto initial = [&](int index, Value v) -> FailureOr<Value> {
    if (!v)
      return Value();
    SmallVector<int64_t> shape =
        layout == 1 ? SmallVector<int64_t>{batch, directions, hidden}
                    : SmallVector<int64_t>{directions, batch, hidden};
    if (failed(requireShape(index, v, shape)))
      return failure();
    return layout == 1 ? v : u.swapLeading(v);
  };
  FailureOr<Value> hInit = initial(5, *h0), cInit = initial(6, *c0);
  if (failed(hInit) || failed(cInit))
    return failure();

  // The running mask [N, T, 1]: step t of sample n runs if t < lengths[n].
  Value running;
  if (stepMask) {
    Type lengthType = typeOf(stepMask).getElementType();
    SmallVector<Attribute> times;
    for (int64_t t = 0; t < steps; ++t)
      times.push_back(b.getIntegerAttr(lengthType, t));
    Value time = nn::ConstantOp::create(
        b, loc,
        DenseElementsAttr::get(RankedTensorType::get({1, steps}, lengthType),
                               times));
    running = u.reshape(nn::GreaterOp::create(b, loc, stepMask, time),
                        {batch, steps, 1});
  }
  const bool linearBeforeReset =
      im.intAttr(node, "linear_before_reset", 0) != 0;
  Type stateType = RankedTensorType::get({batch, hidden}, element);
  SmallVector<Value> sequences, finalH, finalC;
  for (int64_t d = 0; d < directions; ++d) {
    bool reverse = direction == "reverse" || d == 1;
    auto perDirection = [&](Value v, ArrayRef<int64_t> shape) {
      return u.reshape(u.slice(v, 0, d, 1), shape);
    };
    Value wd = perDirection(*w, {gates * hidden, inputSize});
    Value rdT = u.transpose(perDirection(*r, {gates * hidden, hidden}), {1, 0});
    // x W^T + Wb for every step at once: [N, T, G H].
    Value projected = u.matmul(xb, u.transpose(wd, {1, 0}));
    Value rb;
    if (*bias) {
      Value bd = perDirection(*bias, {2 * gates * hidden});
      projected = u.nnb.add(projected, u.slice(bd, 0, 0, gates * hidden));
      rb = u.slice(bd, 0, gates * hidden, gates * hidden);
    }
    Value pd = *peepholes ? perDirection(*peepholes, {3 * hidden}) : Value();
    auto state = [&](Value init) {
      return init ? u.reshape(u.slice(init, 1, d, 1), {batch, hidden})
                  : u.nnb.splat(cast<RankedTensorType>(stateType), 0.0);
    };

    // One nn.scan over the steps: carries h (and c), scanned the projected
    // input (and the running mask), invariants R^T and its bias (and the
    // peepholes).
    SmallVector<Value> inputs{state(*hInit)};
    if (kCell == Cell::LSTM)
      inputs.push_back(state(*cInit));
    int64_t carries = inputs.size();
    inputs.push_back(projected);
    if (running)
      inputs.push_back(running);
    int64_t scanned = inputs.size() - carries;
    inputs.push_back(rdT);
    if (rb)
      inputs.push_back(rb);
    if (pd)
      inputs.push_back(pd);
    SmallVector<Type> resultTypes(carries, stateType);
    resultTypes.push_back(nn::ScanOp::stackedType(stateType, steps));
    auto scan = nn::ScanOp::create(b, loc, resultTypes, inputs, carries,
                                   scanned, reverse, /*saves_carries=*/false);
    Block *body = &scan.addBody();
    OpBuilder cellBuilder = OpBuilder::atBlockEnd(body);
    CellBuilder cu(cellBuilder, loc);
    int64_t next = 0;
    auto arg = [&]() { return body->getArgument(next++); };
    Value h = arg(), c = kCell == Cell::LSTM ? arg() : Value();
    Value xt = arg(), runningT = running ? arg() : Value();
    Value rT = arg(), rB = rb ? arg() : Value(), peep = pd ? arg() : Value();
    Value previousH = h, previousC = c;
    auto gate = [&](Value v, int64_t k) {
      return cu.slice(v, 1, k * hidden, hidden);
    };
    // Gates k .. k + n along the last axis (of R^T [H, G H] or its bias).
    auto columns = [&](Value v, int64_t k, int64_t n) {
      return cu.slice(v, typeOf(v).getRank() - 1, k * hidden, n * hidden);
    };
    if (kCell == Cell::RNN) {
      Value hr = cu.matmul(h, rT);
      if (rB)
        hr = cu.nnb.add(hr, rB);
      h = cu.tanh(cu.nnb.add(xt, hr));
    } else if (kCell == Cell::GRU) {
      // Gates z, r, then the candidate n.
      Value hzr = cu.matmul(h, columns(rT, 0, 2));
      if (rB)
        hzr = cu.nnb.add(hzr, columns(rB, 0, 2));
      Value z = cu.sigmoid(cu.nnb.add(gate(xt, 0), gate(hzr, 0)));
      Value reset = cu.sigmoid(cu.nnb.add(gate(xt, 1), gate(hzr, 1)));
      Value rhT = columns(rT, 2, 1);
      Value hn;
      if (linearBeforeReset) {
        hn = cu.matmul(h, rhT);
        if (rB)
          hn = cu.nnb.add(hn, columns(rB, 2, 1));
        hn = cu.nnb.mul(reset, hn);
      } else {
        hn = cu.matmul(cu.nnb.mul(reset, h), rhT);
        if (rB)
          hn = cu.nnb.add(hn, columns(rB, 2, 1));
      }
      Value n = cu.tanh(cu.nnb.add(gate(xt, 2), hn));
      // (1 - z) n + z h = n + z (h - n).
      h = cu.nnb.add(n, cu.nnb.mul(z, cu.nnb.sub(h, n)));
    } else {
      // Gates i, o, f, c; peepholes i, o, f.
      Value hr = cu.matmul(h, rT);
      if (rB)
        hr = cu.nnb.add(hr, rB);
      Value pre = cu.nnb.add(xt, hr);
      auto peephole = [&](Value v, int64_t k, Value cell) {
        return peep ? cu.nnb.add(
                          v, cu.nnb.mul(cu.slice(peep, 0, k * hidden, hidden),
                                        cell))
                    : v;
      };
      Value i = cu.sigmoid(peephole(gate(pre, 0), 0, c));
      Value f = cu.sigmoid(peephole(gate(pre, 2), 2, c));
      Value candidate = cu.tanh(gate(pre, 3));
      c = cu.nnb.add(cu.nnb.mul(f, c), cu.nnb.mul(i, candidate));
      Value o = cu.sigmoid(peephole(gate(pre, 1), 1, c));
      h = cu.nnb.mul(o, cu.tanh(c));
    }
    Value out = h;
    if (runningT) {
      // Samples whose sequence ended keep their state and output 0.
      h = nn::WhereOp::create(cellBuilder, loc, runningT, h, previousH);
      if (kCell == Cell::LSTM)
        c = nn::WhereOp::create(cellBuilder, loc, runningT, c, previousC);
      out = nn::WhereOp::create(
          cellBuilder, loc, runningT, h,
          cu.nnb.splat(cast<RankedTensorType>(stateType), 0.0));
    }
    SmallVector<Value> yields{h};
    if (kCell == Cell::LSTM)
      yields.push_back(c);
    yields.push_back(out);
    nn::YieldOp::create(cellBuilder, loc, yields);

    sequences.push_back(
        u.reshape(scan.getStackedOutputs()[0], {batch, steps, 1, hidden}));
    finalH.push_back(u.reshape(scan.getFinalCarries()[0], {batch, 1, hidden}));
    if (kCell == Cell::LSTM)
      finalC.push_back(
          u.reshape(scan.getFinalCarries()[1], {batch, 1, hidden}));
  }
  // Y [T, D, N, H] (layout 0) or [N, T, D, H]; Y_h and Y_c [D, N, H] or
  // [N, D, H].
  Value y = u.concat(sequences, 2);
  if (layout == 0)
    y = u.transpose(y, {1, 2, 0, 3});
  im.setOutput(node, 0, y);
  auto last = [&](ArrayRef<Value> states) {
    Value v = u.concat(states, 1);
    return layout == 0 ? u.transpose(v, {1, 0, 2}) : v;
  };
  if (node.output_size() > 1)
    im.setOutput(node, 1, last(finalH));
  if (kCell == Cell::LSTM && node.output_size() > 2)
    im.setOutput(node, 2, last(finalC));
  return success();
}

} // namespace

void onnx_import::addRecurrentHandlers(std::vector<OpRegistration> &list) {
  list.push_back({"RNN", 7, importRecurrent<Cell::RNN>});
  list.push_back({"GRU", 7, importRecurrent<Cell::GRU>});
  list.push_back({"LSTM", 7, importRecurrent<Cell::LSTM>});
}
