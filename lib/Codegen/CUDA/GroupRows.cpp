//===- GroupRows.cpp - a row's ops in one kernel ----------------*- C++ -*-===//
//
// After cuda-fuse-kernels a LayerNorm or a softmax is still a few kernels
// over the same rows: warp reductions (a warp per row: the mean, the
// variance, the max, the sum) and the elementwise row maps between them
// (x - mean, the normalization), each reading its rows from memory again.
// This pass marks maximal runs of such ops as one row group (kRowGroup):
// neighbours in a block, nothing with memory effects between them, over
// the same points (the loops of more than one iteration but the last: a
// warp reduction's lanes, a row map's row), and at least one of them a
// warp reduction. cuda-form-kernels makes one kernel of a group: a block
// per point runs the members in order, with a block barrier between them.
//
// That is the same computation only where no block touches what another
// block of the kernel writes: the barrier orders one block's threads, not
// the blocks. So a member joins a group only if every element it and an
// earlier member access, one of them writing, lies in the rows of one
// point: each such access reaches, at point p (row-major index L(p) over
// the points), elements of [base + R L(p), base + R L(p) + span) with the
// same row stride R for both and both windows inside one row
// (max(base + span) - min(base) <= R). An operand's element comes from its
// map and view layout (elementOf); a load in a body (a warp reduction
// reading its row) from its indices: the index of a point's loop is that
// loop, a constant is itself, and anything else is taken anywhere in its
// dimension.
//
//===----------------------------------------------------------------------===//

#include "accrue/Codegen/CUDA/KernelReport.h"
#include "accrue/Codegen/CUDA/Passes.h"
#include "accrue/Codegen/Common/Contractions.h"

#include "BufferOps.h"
#include "WarpReductions.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/IR/Matchers.h"
#include "mlir/Interfaces/ViewLikeInterface.h"
#include "mlir/Transforms/RegionUtils.h"

namespace accrue::cuda {
#define GEN_PASS_DEF_CUDAGROUPROWS
#include "accrue/Codegen/CUDA/Passes.h.inc"
} // namespace accrue::cuda

using namespace mlir;
using namespace accrue::cuda;

namespace {

/// The elements an access reaches at point p of a group:
/// [base + stride L(p), base + stride L(p) + span).
struct Rows {
  int64_t base = 0, stride = 0, span = 1;
};

/// A buffer an op accesses, and where in its root, if in rows.
struct RowAccess {
  Value buffer;
  bool writes;
  std::optional<Rows> rows;
};

/// A group's candidate: a warp reduction or a row map, its loops' extents
/// and its points (the loops of more than one iteration but the last).
struct Member {
  linalg::GenericOp op;
  SmallVector<int64_t> ranges;
  SmallVector<unsigned> points;
  SmallVector<RowAccess> accesses;

  SmallVector<int64_t> pointExtents() const {
    SmallVector<int64_t> extents;
    for (unsigned d : points)
      extents.push_back(ranges[d]);
    return extents;
  }
};

/// `expr` as a constant plus a coefficient per loop, where it is linear.
std::optional<std::pair<int64_t, SmallVector<int64_t>>>
linearForm(AffineExpr expr, unsigned loops) {
  SmallVector<int64_t> none(loops, 0);
  if (auto constant = dyn_cast<AffineConstantExpr>(expr))
    return std::make_pair(constant.getValue(), none);
  if (auto dim = dyn_cast<AffineDimExpr>(expr)) {
    none[dim.getPosition()] = 1;
    return std::make_pair(int64_t(0), none);
  }
  auto binary = dyn_cast<AffineBinaryOpExpr>(expr);
  if (!binary)
    return std::nullopt;
  auto lhs = linearForm(binary.getLHS(), loops);
  auto rhs = linearForm(binary.getRHS(), loops);
  if (!lhs || !rhs)
    return std::nullopt;
  if (expr.getKind() == AffineExprKind::Add) {
    for (unsigned d = 0; d < loops; ++d)
      lhs->second[d] += rhs->second[d];
    lhs->first += rhs->first;
    return lhs;
  }
  if (expr.getKind() != AffineExprKind::Mul)
    return std::nullopt;
  // An affine product: one side is a constant.
  auto isConstant = [](const auto &form) {
    return llvm::all_of(form->second, [](int64_t c) { return c == 0; });
  };
  if (!isConstant(lhs) && !isConstant(rhs))
    return std::nullopt;
  int64_t factor = isConstant(rhs) ? rhs->first : lhs->first;
  auto product = isConstant(rhs) ? *lhs : *rhs;
  product.first *= factor;
  for (int64_t &c : product.second)
    c *= factor;
  return product;
}

/// The rows of an access reaching `constant` + sum of `coefficients` x
/// loop, and anywhere in a further `free` elements, at each point of
/// `member`; none unless the points' coefficients are the row stride
/// times the row-major weight of each point loop.
std::optional<Rows> rowsOf(const Member &member, int64_t constant,
                           ArrayRef<int64_t> coefficients, int64_t free) {
  Rows rows{constant, 0, 1 + free};
  for (auto [d, c] : llvm::enumerate(coefficients)) {
    if (llvm::is_contained(member.points, d) || member.ranges[d] == 1)
      continue;
    if (c < 0)
      return std::nullopt;
    rows.span += c * (member.ranges[d] - 1);
  }
  // The innermost point's coefficient is the row stride.
  rows.stride = coefficients[member.points.back()];
  int64_t weight = 1;
  for (unsigned d : llvm::reverse(member.points)) {
    if (rows.stride <= 0 || coefficients[d] != rows.stride * weight)
      return std::nullopt;
    weight *= member.ranges[d];
  }
  return rows;
}

/// The rows the load `load` in `member`'s body reaches.
std::optional<Rows> rowsOfLoad(const Member &member, memref::LoadOp load) {
  auto layout = staticLayout(load.getMemRef());
  if (!layout || !load.getMemRefType().hasStaticShape())
    return std::nullopt;
  auto [strides, offset] = *layout;
  ArrayRef<int64_t> shape = load.getMemRefType().getShape();
  SmallVector<int64_t> coefficients(member.ranges.size(), 0);
  int64_t constant = offset, free = 0;
  for (auto [k, index] : llvm::enumerate(load.getIndices())) {
    APInt value;
    if (matchPattern(index, m_ConstantInt(&value))) {
      constant += value.getSExtValue() * strides[k];
      continue;
    }
    auto loop = index.getDefiningOp<linalg::IndexOp>();
    if (loop && loop->getParentOp() == member.op &&
        llvm::is_contained(member.points, loop.getDim())) {
      coefficients[loop.getDim()] += strides[k];
      continue;
    }
    if (strides[k] < 0)
      return std::nullopt;
    free += (shape[k] - 1) * strides[k];
  }
  return rowsOf(member, constant, coefficients, free);
}

/// The longest row a row map takes: 64 elements a lane of a warp, as a
/// warp reduction's (cuda-split-reductions' lane-elements).
constexpr int64_t kMaxRowElements = 64 * kWarpSize;

/// `op` as a member, where it is a warp reduction or a row map (an
/// elementwise op, not a transpose, over rows of at most kMaxRowElements)
/// on static buffers, with more than one point (a kernel of one block
/// would be a row map's whole parallelism).
std::optional<Member> memberOf(Operation &op) {
  auto generic = dyn_cast<linalg::GenericOp>(op);
  if (!generic || generic.getNumLoops() == 0)
    return std::nullopt;
  bool warp = isWarpReduction(generic);
  if (!warp && !(isFusible(generic) && !isTranspose(generic) &&
                 generic.getStaticLoopRanges().back() <= kMaxRowElements))
    return std::nullopt;
  Member member{generic, generic.getStaticLoopRanges(), {}, {}};
  for (unsigned d = 0; d + 1 < member.ranges.size(); ++d)
    if (member.ranges[d] != 1)
      member.points.push_back(d);
  if (member.points.empty())
    return std::nullopt;
  unsigned loops = member.ranges.size();
  for (OpOperand &operand : generic->getOpOperands()) {
    if (!isa<MemRefType>(operand.get().getType()))
      continue;
    RowAccess access{operand.get(), generic.isDpsInit(&operand), {}};
    AffineMap map = generic.getMatchingIndexingMap(&operand);
    if (AffineExpr element = elementOf(operand.get(), map, member.ranges))
      if (auto form = linearForm(element, loops))
        access.rows = rowsOf(member, form->first, form->second, 0);
    member.accesses.push_back(access);
  }
  // What the body accesses itself: loads (a warp reduction's row), and
  // anything else as an unknown write; but its own stack buffers.
  WalkResult walk = generic.getRegion().walk([&](Operation *nested) {
    for (Value operand : nested->getOperands()) {
      if (!isa<MemRefType>(operand.getType()))
        continue;
      if (auto local = viewRoot(operand).getDefiningOp<memref::AllocaOp>();
          local && generic->isAncestor(local))
        continue;
      auto load = dyn_cast<memref::LoadOp>(nested);
      if (!load)
        return WalkResult::interrupt();
      member.accesses.push_back({operand, false, rowsOfLoad(member, load)});
    }
    return WalkResult::advance();
  });
  if (walk.wasInterrupted())
    return std::nullopt;
  return member;
}

/// The most bytes of one point's rows of a buffer, and of all a group's
/// buffers, kept in a block's workgroup memory (of the 48 KB a block may
/// have statically).
constexpr int64_t kMaxLocalRowBytes = 16 * 1024;
constexpr int64_t kMaxLocalGroupBytes = 32 * 1024;

/// Whether `op` reads the old value of its init `init` (a row map's block
/// argument used; a warp reduction's used but by the select of the
/// constant lane 0 starts from, which replaces it).
bool readsOldValue(linalg::GenericOp op, OpOperand &init) {
  BlockArgument arg = op.getMatchingBlockArgument(&init);
  return llvm::any_of(arg.getUsers(), [&](Operation *user) {
    auto select = dyn_cast<arith::SelectOp>(user);
    return !isWarpReduction(op) || !select || select.getFalseValue() != arg ||
           !matchPattern(select.getTrueValue(), m_Constant());
  });
}

/// The groups (by their index in `groupOf`) whose members use `value`,
/// through views; nullopt if something else uses it.
std::optional<llvm::SmallSetVector<int64_t, 4>>
groupsUsing(Value value, const DenseMap<Operation *, int64_t> &groupOf) {
  llvm::SmallSetVector<int64_t, 4> groups;
  for (OpOperand &use : value.getUses()) {
    Operation *user = use.getOwner();
    if (isa<ViewLikeOpInterface>(user)) {
      // A view that reinterprets the elements (memref.view to another
      // element type) is not one of the buffer's rows.
      if (llvm::any_of(user->getResults(), [&](Value result) {
            return getElementTypeOrSelf(result.getType()) !=
                   getElementTypeOrSelf(value.getType());
          }))
        return std::nullopt;
      for (Value result : user->getResults()) {
        auto nested = groupsUsing(result, groupOf);
        if (!nested)
          return std::nullopt;
        groups.insert(nested->begin(), nested->end());
      }
      continue;
    }
    while (user && !groupOf.contains(user))
      user = user->getParentOp();
    if (!user)
      return std::nullopt;
    groups.insert(groupOf.lookup(user));
  }
  return groups;
}

/// Whether `init` of `op` is all of `root` (through reshapes only) and `op`
/// writes every element of it (its map names each dimension's loop, or 0
/// for a unit one).
bool writesAll(linalg::GenericOp op, OpOperand &init, Value root) {
  if (!isWhole(init.get(), root))
    return false;
  auto type = cast<MemRefType>(init.get().getType());
  std::optional<SmallVector<int64_t>> loops =
      accrue::codegen::loopsOf(op.getMatchingIndexingMap(&init));
  if (!loops)
    return false;
  llvm::SmallDenseSet<int64_t> named;
  for (auto [dim, loop] : llvm::enumerate(*loops))
    if ((loop < 0 && type.getDimSize(dim) != 1) ||
        (loop >= 0 && !named.insert(loop).second))
      return false;
  return true;
}

/// The row stride R of `root` in the group `run`, where the group may keep
/// a point's rows of it in workgroup memory: the first member to touch it
/// writes all of it without reading what it held (so no later member
/// reads an element the block did not write), and every access reaches, at
/// each point, elements [R L(p), R L(p) + R).
std::optional<int64_t> localStride(ArrayRef<Member> run, Value root) {
  std::optional<int64_t> stride;
  bool first = true;
  for (const Member &m : run) {
    bool touches = false;
    for (const RowAccess &access : m.accesses) {
      if (viewRoot(access.buffer) != root)
        continue;
      touches = true;
      if (!access.rows || access.rows->base < 0 ||
          access.rows->base + access.rows->span > access.rows->stride ||
          (stride && *stride != access.rows->stride) ||
          (first && !access.writes))
        return std::nullopt;
      stride = access.rows->stride;
    }
    if (touches && first) {
      bool whole = false;
      for (OpOperand &init : linalg::GenericOp(m.op).getDpsInitsMutable()) {
        if (viewRoot(init.get()) != root)
          continue;
        if (readsOldValue(m.op, init))
          return std::nullopt;
        whole = whole || writesAll(m.op, init, root);
      }
      if (!whole)
        return std::nullopt;
    }
    first = first && !touches;
  }
  return stride;
}

/// Marks (kRowLocal) each allocation of static shape that only row groups
/// touch, where each of them may keep a point's rows of it in workgroup
/// memory (localStride): no group reads what another wrote there, and
/// what a group's members pass each other through it stays in the block.
void markRowLocal(ArrayRef<SmallVector<Member>> groups, Builder &builder) {
  DenseMap<Operation *, int64_t> groupOf;
  llvm::SetVector<Value> roots;
  for (auto [g, run] : llvm::enumerate(groups))
    for (const Member &m : run) {
      groupOf[m.op] = g;
      for (const RowAccess &access : m.accesses)
        if (auto alloc =
                viewRoot(access.buffer).getDefiningOp<memref::AllocOp>())
          roots.insert(alloc);
    }
  DenseMap<int64_t, int64_t> groupBytes;
  for (Value root : roots) {
    auto type = cast<MemRefType>(root.getType());
    if (!type.hasStaticShape() || !type.getLayout().isIdentity() ||
        !type.getElementType().isIntOrFloat())
      continue;
    auto users = groupsUsing(root, groupOf);
    if (!users)
      continue;
    SmallVector<int64_t> mark, order(users->begin(), users->end());
    llvm::sort(order);
    for (int64_t g : order) {
      std::optional<int64_t> stride = localStride(groups[g], root);
      int64_t bytes = stride ? *stride * type.getElementTypeBitWidth() / 8 : 0;
      if (!stride || bytes > kMaxLocalRowBytes ||
          groupBytes[g] + bytes > kMaxLocalGroupBytes) {
        mark.clear();
        break;
      }
      mark.append({g, *stride});
    }
    if (mark.empty())
      continue;
    for (size_t k = 0; k < mark.size(); k += 2)
      groupBytes[mark[k]] += mark[k + 1] * type.getElementTypeBitWidth() / 8;
    root.getDefiningOp()->setAttr(kRowLocal,
                                  builder.getDenseI64ArrayAttr(mark));
  }
}

/// Whether no block of a kernel running `member` after `earlier` would
/// touch what another writes: every pair of their accesses that may meet,
/// one of them writing, stays within the rows of one point.
bool joins(ArrayRef<Member> earlier, const Member &member) {
  for (const Member &other : earlier)
    for (const RowAccess &x : other.accesses)
      for (const RowAccess &y : member.accesses) {
        if ((!x.writes && !y.writes) || !mayOverlap(x.buffer, y.buffer))
          continue;
        if (!x.rows || !y.rows || x.rows->stride != y.rows->stride)
          return false;
        int64_t first = std::min(x.rows->base, y.rows->base);
        int64_t end =
            std::max(x.rows->base + x.rows->span, y.rows->base + y.rows->span);
        if (end - first > x.rows->stride)
          return false;
      }
  return true;
}

struct CudaGroupRowsPass
    : public accrue::cuda::impl::CudaGroupRowsBase<CudaGroupRowsPass> {
  void runOnOperation() override {
    Builder builder(&getContext());
    SmallVector<SmallVector<Member>> groups;
    SmallVector<Member> run;
    auto close = [&] {
      bool warp = llvm::any_of(
          run, [](const Member &m) { return isWarpReduction(m.op); });
      if (run.size() >= 2 && warp) {
        for (Member &m : run)
          m.op->setAttr(kRowGroup, builder.getI64IntegerAttr(groups.size()));
        groups.push_back(run);
      }
      run.clear();
    };
    getOperation().walk([&](Block *block) {
      Operation *parent = block->getParentOp();
      if (isa<linalg::LinalgOp>(parent) ||
          parent->getParentOfType<linalg::LinalgOp>())
        return;
      for (Operation &op : *block) {
        if (staysBetween(op))
          continue;
        std::optional<Member> member = memberOf(op);
        if (!member) {
          close();
          continue;
        }
        if (!run.empty() &&
            (member->pointExtents() != run.front().pointExtents() ||
             !joins(run, *member)))
          close();
        run.push_back(std::move(*member));
      }
      close();
    });
    markRowLocal(groups, builder);
  }
};

} // namespace
