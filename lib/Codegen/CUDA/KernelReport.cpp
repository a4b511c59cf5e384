//===- KernelReport.cpp - what a CUDA step's kernels do ---------*- C++ -*-===//
//
// The kernels are read, not run: an Evaluator computes the integer values
// of a kernel's index arithmetic for one thread at the first iteration of
// every loop around it (the first micro-batch on the host), and the report
// is made from the addresses it gives the first warp's threads.
//
//===----------------------------------------------------------------------===//

#include "accrue/Codegen/CUDA/KernelReport.h"

#include "accrue-runtime/StepABI.h"
#include "accrue/Dialect/Train/IR/Train.h"

#include "mlir/Dialect/Affine/IR/AffineOps.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/IR/Matchers.h"
#include "mlir/Interfaces/ViewLikeInterface.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/TypeSwitch.h"

#include <algorithm>
#include <set>
#include <tuple>

using namespace mlir;
using namespace accrue;
using namespace accrue::cuda;

namespace {

constexpr int64_t kWarp = 32, kSector = 32;

//===----------------------------------------------------------------------===//
// Evaluating index arithmetic
//===----------------------------------------------------------------------===//

/// The integer values of SSA values for one thread: the launch's ids and
/// sizes are bound, every loop is at its first iteration, and values loaded
/// from memory or passed in from outside the step are unknown.
class Evaluator {
public:
  void bind(Value value, int64_t v) { bound[value] = v; }

  std::optional<int64_t> operator()(Value value) {
    if (auto it = bound.find(value); it != bound.end())
      return it->second;
    if (auto it = memo.find(value); it != memo.end())
      return it->second;
    std::optional<int64_t> v = compute(value);
    memo[value] = v;
    return v;
  }

  /// Iterations of `loop` for this thread.
  std::optional<int64_t> tripCount(scf::ForOp loop) {
    std::optional<int64_t> lb = (*this)(loop.getLowerBound()),
                           ub = (*this)(loop.getUpperBound()),
                           step = (*this)(loop.getStep());
    if (!lb || !ub || !step || *step <= 0)
      return std::nullopt;
    return *ub > *lb ? (*ub - *lb + *step - 1) / *step : 0;
  }

private:
  std::optional<int64_t> compute(Value value) {
    if (auto arg = dyn_cast<BlockArgument>(value)) {
      // An induction variable starts at its lower bound; nothing else is
      // known of block arguments (iteration values, the step's arguments).
      auto loop = dyn_cast<scf::ForOp>(arg.getOwner()->getParentOp());
      if (loop && arg == loop.getInductionVar())
        return (*this)(loop.getLowerBound());
      return std::nullopt;
    }
    Operation *op = value.getDefiningOp();
    if (auto constant = dyn_cast<arith::ConstantOp>(op)) {
      if (auto integer = dyn_cast<IntegerAttr>(constant.getValue()))
        return integer.getType().isInteger(1)
                   ? int64_t(integer.getValue() != 0)
                   : integer.getValue().getSExtValue();
      return std::nullopt;
    }
    if (auto apply = dyn_cast<affine::AffineApplyOp>(op)) {
      SmallVector<Attribute> operands;
      Builder b(op->getContext());
      for (Value operand : apply.getMapOperands()) {
        std::optional<int64_t> v = (*this)(operand);
        if (!v)
          return std::nullopt;
        operands.push_back(b.getIndexAttr(*v));
      }
      SmallVector<Attribute> results;
      if (failed(apply.getAffineMap().constantFold(operands, results)) ||
          results.size() != 1)
        return std::nullopt;
      return cast<IntegerAttr>(results[0]).getInt();
    }
    if (auto select = dyn_cast<arith::SelectOp>(op)) {
      std::optional<int64_t> c = (*this)(select.getCondition());
      if (!c)
        return std::nullopt;
      return (*this)(*c ? select.getTrueValue() : select.getFalseValue());
    }
    if (isa<arith::IndexCastOp, arith::IndexCastUIOp, arith::ExtSIOp,
            arith::ExtUIOp>(op))
      return (*this)(op->getOperand(0));
    if (auto cmp = dyn_cast<arith::CmpIOp>(op)) {
      std::optional<int64_t> l = (*this)(cmp.getLhs()),
                             r = (*this)(cmp.getRhs());
      if (!l || !r)
        return std::nullopt;
      uint64_t ul = *l, ur = *r;
      switch (cmp.getPredicate()) {
      case arith::CmpIPredicate::eq:
        return *l == *r;
      case arith::CmpIPredicate::ne:
        return *l != *r;
      case arith::CmpIPredicate::slt:
        return *l < *r;
      case arith::CmpIPredicate::sle:
        return *l <= *r;
      case arith::CmpIPredicate::sgt:
        return *l > *r;
      case arith::CmpIPredicate::sge:
        return *l >= *r;
      case arith::CmpIPredicate::ult:
        return ul < ur;
      case arith::CmpIPredicate::ule:
        return ul <= ur;
      case arith::CmpIPredicate::ugt:
        return ul > ur;
      case arith::CmpIPredicate::uge:
        return ul >= ur;
      }
      return std::nullopt;
    }
    if (op->getNumOperands() != 2 || op->getNumResults() != 1 ||
        !op->getResult(0).getType().isIntOrIndex())
      return std::nullopt;
    std::optional<int64_t> l = (*this)(op->getOperand(0)),
                           r = (*this)(op->getOperand(1));
    if (!l || !r)
      return std::nullopt;
    int64_t a = *l, b = *r;
    bool zero = b == 0;
    return llvm::TypeSwitch<Operation *, std::optional<int64_t>>(op)
        .Case([&](arith::AddIOp) { return a + b; })
        .Case([&](arith::SubIOp) { return a - b; })
        .Case([&](arith::MulIOp) { return a * b; })
        .Case([&](arith::DivUIOp) {
          return zero ? std::nullopt
                      : std::optional<int64_t>(uint64_t(a) / uint64_t(b));
        })
        .Case([&](arith::DivSIOp) {
          return zero ? std::nullopt : std::optional<int64_t>(a / b);
        })
        .Case([&](arith::RemUIOp) {
          return zero ? std::nullopt
                      : std::optional<int64_t>(uint64_t(a) % uint64_t(b));
        })
        .Case([&](arith::RemSIOp) {
          return zero ? std::nullopt : std::optional<int64_t>(a % b);
        })
        .Case([&](arith::CeilDivUIOp) {
          return zero ? std::nullopt
                      : std::optional<int64_t>((uint64_t(a) + uint64_t(b) - 1) /
                                               uint64_t(b));
        })
        .Case([&](arith::MinSIOp) { return std::min(a, b); })
        .Case([&](arith::MaxSIOp) { return std::max(a, b); })
        .Case([&](arith::MinUIOp) {
          return int64_t(std::min(uint64_t(a), uint64_t(b)));
        })
        .Case([&](arith::MaxUIOp) {
          return int64_t(std::max(uint64_t(a), uint64_t(b)));
        })
        .Case([&](arith::AndIOp) { return a & b; })
        .Case([&](arith::OrIOp) { return a | b; })
        .Case([&](arith::XOrIOp) { return a ^ b; })
        .Case([&](arith::ShLIOp) { return a << b; })
        .Case([&](arith::ShRUIOp) { return int64_t(uint64_t(a) >> b); })
        .Case([&](arith::ShRSIOp) { return a >> b; })
        .Default([](Operation *) { return std::nullopt; });
  }

  DenseMap<Value, int64_t> bound;
  DenseMap<Value, std::optional<int64_t>> memo;
};

//===----------------------------------------------------------------------===//
// Buffers and views
//===----------------------------------------------------------------------===//

/// Where a view's element 0 lies: the buffer it is a view of and the byte
/// offset in it (none when it depends on data or on an unknown value).
struct ViewBase {
  Value root;
  std::optional<int64_t> byteOffset;
};

ViewBase viewBase(Value memref, Evaluator &eval) {
  Operation *op = memref.getDefiningOp();
  if (!op)
    return {memref, 0};
  if (auto view = dyn_cast<memref::ViewOp>(op)) {
    ViewBase base = viewBase(view.getSource(), eval);
    std::optional<int64_t> shift = eval(view.getByteShift());
    if (!base.byteOffset || !shift)
      return {base.root, std::nullopt};
    return {base.root, *base.byteOffset + *shift};
  }
  if (auto subview = dyn_cast<memref::SubViewOp>(op)) {
    ViewBase base = viewBase(subview.getSource(), eval);
    MemRefType source = subview.getSourceType();
    SmallVector<int64_t> strides;
    int64_t offset;
    if (!base.byteOffset || failed(source.getStridesAndOffset(strides, offset)))
      return {base.root, std::nullopt};
    int64_t elements = 0;
    for (auto [k, mixed] : llvm::enumerate(subview.getMixedOffsets())) {
      std::optional<int64_t> v = getConstantIntValue(mixed);
      if (!v)
        if (auto value = dyn_cast<Value>(mixed))
          v = eval(value);
      if (!v || ShapedType::isDynamic(strides[k]))
        return {base.root, std::nullopt};
      elements += *v * strides[k];
    }
    return {base.root, *base.byteOffset +
                           elements * (source.getElementTypeBitWidth() / 8)};
  }
  if (auto cast = dyn_cast<memref::ReinterpretCastOp>(op)) {
    ViewBase base = viewBase(cast.getSource(), eval);
    std::optional<int64_t> offset =
        getConstantIntValue(cast.getMixedOffsets()[0]);
    if (!base.byteOffset || !offset)
      return {base.root, std::nullopt};
    return {base.root,
            *base.byteOffset +
                *offset * (cast.getType().getElementTypeBitWidth() / 8)};
  }
  if (isa<memref::ExpandShapeOp, memref::CollapseShapeOp, memref::CastOp>(op))
    return viewBase(op->getOperand(0), eval);
  return {memref, 0}; // a global, an allocation
}

/// The step argument names (train.abi or argument attributes).
std::string argumentName(func::FuncOp step, unsigned index) {
  if (auto abi = step->getAttrOfType<ArrayAttr>(train::StepAttrs::kABI))
    if (index < abi.size())
      if (auto dict = dyn_cast<DictionaryAttr>(abi[index]))
        if (auto name = dict.getAs<StringAttr>(train::StepAttrs::kName))
          return name.str();
  if (auto name =
          step.getArgAttrOfType<StringAttr>(index, train::StepAttrs::kName))
    return name.str();
  return "arg" + std::to_string(index);
}

/// What the kernels of cuda-form-kernels are tagged with (see
/// kernelName).
std::string kernelTag(Location loc) {
  if (auto fused = dyn_cast<FusedLoc>(loc))
    if (auto metadata = dyn_cast_or_null<StringAttr>(fused.getMetadata()))
      return metadata.str();
  return "kernel";
}

} // namespace

std::string cuda::nodeOf(Location loc) {
  std::string node;
  loc->walk([&](Location inner) {
    if (auto name = dyn_cast<NameLoc>(inner)) {
      node = name.getName().str();
      return WalkResult::interrupt();
    }
    return WalkResult::advance();
  });
  return node;
}

namespace {

/// How often the host code reaches `op` per micro-batch (inside the
/// micro-batch loop) and per step outside it.
std::pair<int64_t, int64_t> multiplicity(Operation *op, Evaluator &host) {
  int64_t count = 1;
  bool inMicroBatch = false;
  for (Operation *parent = op->getParentOp();
       parent && !isa<func::FuncOp>(parent); parent = parent->getParentOp()) {
    auto loop = dyn_cast<scf::ForOp>(parent);
    if (!loop)
      continue;
    if (loop->hasAttr(train::StepAttrs::kMicrobatchLoop)) {
      inMicroBatch = true;
      continue;
    }
    count *= host.tripCount(loop).value_or(1);
  }
  return inMicroBatch ? std::pair<int64_t, int64_t>{count, 0}
                      : std::pair<int64_t, int64_t>{0, count};
}

//===----------------------------------------------------------------------===//
// One kernel
//===----------------------------------------------------------------------===//

/// Whether thread `eval` reaches `op` inside `launch` (the scf.if guards
/// around it hold; unknown conditions count as taken).
bool reaches(Operation *op, gpu::LaunchOp launch, Evaluator &eval) {
  for (Operation *child = op, *parent = op->getParentOp();
       parent && parent != launch;
       child = parent, parent = parent->getParentOp()) {
    auto guard = dyn_cast<scf::IfOp>(parent);
    if (!guard)
      continue;
    std::optional<int64_t> taken = eval(guard.getCondition());
    if (!taken)
      continue;
    bool inThen = guard.getThenRegion().isAncestor(child->getParentRegion());
    if (bool(*taken) != inThen)
      return false;
  }
  return true;
}

/// The byte address of `access` for the thread of `eval` (relative to its
/// buffer), if it does not depend on data.
std::optional<int64_t> address(const GlobalAccess &access, Evaluator &eval) {
  auto type = cast<MemRefType>(access.memref.getType());
  SmallVector<int64_t> strides;
  int64_t offset;
  if (failed(type.getStridesAndOffset(strides, offset)))
    return std::nullopt;
  ViewBase base = viewBase(access.memref, eval);
  if (!base.byteOffset)
    return std::nullopt;
  int64_t elements = 0;
  for (auto [k, index] : llvm::enumerate(access.indices)) {
    std::optional<int64_t> v = eval(index);
    if (!v || ShapedType::isDynamic(strides[k]))
      return std::nullopt;
    elements += *v * strides[k];
  }
  return *base.byteOffset + elements * (type.getElementTypeBitWidth() / 8);
}

class KernelReader {
public:
  KernelReader(func::FuncOp step, gpu::LaunchOp launch, Evaluator &host,
               const ParameterAt &parameterAt)
      : step(step), launch(launch), host(host), parameterAt(parameterAt) {}

  KernelInfo read(unsigned index) {
    KernelInfo kernel;
    kernel.name = kernelName(launch.getLoc(), index);
    kernel.node = kernelNode(launch);
    std::tie(kernel.launchesPerMicroBatch, kernel.launchesPerStepOutside) =
        multiplicity(launch, host);
    gpu::KernelDim3 grid = launch.getGridSizeOperandValues(),
                    block = launch.getBlockSizeOperandValues();
    Value sizes[6] = {grid.x, grid.y, grid.z, block.x, block.y, block.z};
    for (int d = 0; d < 3; ++d) {
      kernel.grid[d] = host(sizes[d]).value_or(-1);
      kernel.block[d] = host(sizes[3 + d]).value_or(-1);
    }
    int64_t lanes =
        std::min<int64_t>(kWarp, std::max<int64_t>(kernel.block[0], 1));
    // Thread x of block 0 (every y and z at 0).
    std::vector<Evaluator> threads(lanes);
    for (int64_t lane = 0; lane < lanes; ++lane)
      bindThread(threads[lane], kernel, lane);
    launch.getBody().walk([&](Operation *op) {
      // Divisions by values from outside the kernel that are not
      // constants (the CUDA pipeline sinks those into the kernel before
      // outlining): kernel parameters, divided at run time.
      if (isa<arith::DivUIOp, arith::DivSIOp, arith::RemUIOp, arith::RemSIOp,
              arith::CeilDivUIOp, arith::CeilDivSIOp, arith::FloorDivSIOp>(
              op)) {
        Value divisor = op->getOperand(1);
        if (!launch->isAncestor(divisor.getParentBlock()->getParentOp()) &&
            !matchPattern(divisor, m_Constant()))
          ++kernel.parameterDivisions;
      }
    });
    SmallVector<GlobalAccess> accesses = globalAccesses(launch);
    std::vector<Evaluator> addressed = bindUniformLoads(accesses, threads);
    for (const GlobalAccess &access : accesses)
      kernel.accesses.push_back(describe(access, kernel, threads, addressed));
    for (const KernelAccess &access : kernel.accesses) {
      kernel.memoryOpsPerThread += access.executions;
      kernel.tripCount = std::max(kernel.tripCount, access.executions);
    }
    kernel.unknownTrip = unknownTrip;
    // Inside the micro-batch loop, reading nothing that changes between
    // micro-batches: the same result K times (a weight's transpose or cast).
    kernel.loopInvariant =
        kernel.launchesPerMicroBatch > 0 && !readsVariant &&
        llvm::any_of(kernel.accesses, [](auto &a) { return !a.store; });
    kernel.gridStride = gridStride;
    return kernel;
  }

private:
  void bindThread(Evaluator &eval, const KernelInfo &kernel, int64_t lane) {
    gpu::KernelDim3 blockIds = launch.getBlockIds(),
                    threadIds = launch.getThreadIds(),
                    gridArgs = launch.getGridSize(),
                    blockArgs = launch.getBlockSize();
    eval.bind(blockIds.x, 0);
    eval.bind(blockIds.y, 0);
    eval.bind(blockIds.z, 0);
    eval.bind(threadIds.x, lane);
    eval.bind(threadIds.y, 0);
    eval.bind(threadIds.z, 0);
    Value args[6] = {gridArgs.x,  gridArgs.y,  gridArgs.z,
                     blockArgs.x, blockArgs.y, blockArgs.z};
    for (int d = 0; d < 3; ++d) {
      if (kernel.grid[d] >= 0)
        eval.bind(args[d], kernel.grid[d]);
      if (kernel.block[d] >= 0)
        eval.bind(args[3 + d], kernel.block[d]);
    }
    // Host values it reads are the first micro-batch's: loops start at
    // their lower bounds.
  }

  /// The lanes' evaluators for addresses: where every lane of the warp
  /// loads an integer from one address (a token's id, a sorted key: what
  /// the lanes of one row share), the value is the same in each lane (no
  /// other thread of the launch writes what it reads: the counting
  /// emulator checks that) and is taken as 0, so that addresses computed
  /// from it keep their lanes' differences (a gathered row read along its
  /// features is coalesced, not indirect). Program order: a load's
  /// address only uses loads before it. Guards and trip counts keep the
  /// plain evaluators (a data-dependent guard counts as taken).
  std::vector<Evaluator>
  bindUniformLoads(ArrayRef<GlobalAccess> accesses,
                   const std::vector<Evaluator> &threads) {
    std::vector<Evaluator> addressed = threads;
    if (addressed.size() < 2)
      return addressed;
    for (const GlobalAccess &access : accesses) {
      if (access.store || access.width != 1 ||
          access.op->getNumResults() != 1 ||
          !access.op->getResult(0).getType().isIntOrIndex())
        continue;
      std::optional<int64_t> first = address(access, addressed[0]);
      bool uniform = first.has_value();
      for (size_t lane = 1; uniform && lane < addressed.size(); ++lane)
        uniform = address(access, addressed[lane]) == first;
      if (!uniform)
        continue;
      for (Evaluator &eval : addressed)
        eval.bind(access.op->getResult(0), 0);
    }
    return addressed;
  }

  KernelAccess describe(const GlobalAccess &access, const KernelInfo &kernel,
                        std::vector<Evaluator> &threads,
                        std::vector<Evaluator> &addressed) {
    KernelAccess out;
    auto type = cast<MemRefType>(access.memref.getType());
    out.store = access.store;
    out.elementBytes = std::max<int64_t>(type.getElementTypeBitWidth() / 8, 1);
    out.accessBytes = out.elementBytes * access.width;
    out.footprintBytes =
        type.hasStaticShape() ? type.getNumElements() * out.elementBytes : -1;
    ViewBase base = viewBase(access.memref, host);
    out.viewOffsetBytes = base.byteOffset;
    out.buffer = bufferName(base.root);
    if (!access.store && !isInvariant(base.root))
      readsVariant = true;
    if (base.byteOffset && parameterAt)
      if (auto arg = dyn_cast<BlockArgument>(base.root))
        if (std::optional<AccrueArgRole> role =
                train::getArgRole(step, arg.getArgNumber());
            role == ACCRUE_ROLE_PARAMS || role == ACCRUE_ROLE_ACCUMULATOR ||
            role == ACCRUE_ROLE_STATE)
          out.parameter = parameterAt(
              *base.byteOffset / out.elementBytes,
              type.hasStaticShape() ? type.getNumElements() : int64_t(1));
    // Executions: the trip counts of the loops around it, for thread 0.
    for (Operation *parent = access.op->getParentOp(); parent != launch;
         parent = parent->getParentOp())
      if (auto loop = dyn_cast<scf::ForOp>(parent)) {
        std::optional<int64_t> trip = threads[0].tripCount(loop);
        if (!trip)
          unknownTrip = true;
        out.executions *= trip.value_or(1);
        // A loop whose threads start at different points strides over
        // the grid.
        if (threads.size() > 1 && threads[0](loop.getLowerBound()) !=
                                      threads[1](loop.getLowerBound()))
          gridStride = true;
      }
    if (kernel.threads() == 1) {
      out.pattern = AccessPattern::SingleThread;
      out.activeLanes = 1;
      return out;
    }
    // The first warp's request.
    std::vector<std::optional<int64_t>> addresses;
    for (auto [eval, addressEval] : llvm::zip(threads, addressed))
      if (reaches(access.op, launch, eval))
        addresses.push_back(address(access, addressEval));
    out.activeLanes = addresses.size();
    if (llvm::any_of(addresses, [](auto a) { return !a; })) {
      out.pattern = AccessPattern::Indirect;
      return out;
    }
    std::set<int64_t> sectors;
    for (const std::optional<int64_t> &a : addresses)
      for (int64_t s = *a / kSector; s <= (*a + out.accessBytes - 1) / kSector;
           ++s)
        sectors.insert(s);
    out.sectorsPerRequest = sectors.size();
    if (addresses.size() >= 2) {
      int64_t stride = *addresses[1] - *addresses[0];
      out.threadStrideBytes = stride;
      out.pattern = stride == 0 ? AccessPattern::Broadcast
                    : std::abs(stride) == out.accessBytes
                        ? AccessPattern::Coalesced
                        : AccessPattern::Strided;
    }
    return out;
  }

  /// Whether `root` holds the same values in every micro-batch of a step:
  /// the parameters, the model's buffers, constants.
  bool isInvariant(Value root) {
    if (root.getDefiningOp<memref::GetGlobalOp>())
      return true;
    auto arg = dyn_cast<BlockArgument>(root);
    if (!arg || arg.getOwner() != &step.getBody().front())
      return false;
    std::optional<AccrueArgRole> role =
        train::getArgRole(step, arg.getArgNumber());
    return role == ACCRUE_ROLE_PARAMS || role == ACCRUE_ROLE_LR;
  }

  std::string bufferName(Value root) {
    if (auto arg = dyn_cast<BlockArgument>(root))
      if (arg.getOwner() == &step.getBody().front())
        return argumentName(step, arg.getArgNumber());
    if (Operation *def = root.getDefiningOp()) {
      if (auto global = dyn_cast<memref::GetGlobalOp>(def))
        return "constant " + global.getName().str();
    }
    return "local";
  }

  func::FuncOp step;
  gpu::LaunchOp launch;
  Evaluator &host;
  const ParameterAt &parameterAt;
  bool unknownTrip = false, gridStride = false, readsVariant = false;
};

} // namespace

//===----------------------------------------------------------------------===//
// The report
//===----------------------------------------------------------------------===//

StringRef cuda::accessPatternName(AccessPattern pattern) {
  switch (pattern) {
  case AccessPattern::Coalesced:
    return "coalesced";
  case AccessPattern::Strided:
    return "strided";
  case AccessPattern::Broadcast:
    return "broadcast";
  case AccessPattern::Indirect:
    return "indirect";
  case AccessPattern::SingleThread:
    return "single-thread";
  }
  return "?";
}

std::string cuda::kernelNode(gpu::LaunchOp launch) {
  std::string node = kernelTag(launch.getLoc());
  if (node == "kernel") // a loop moved into a kernel whole
    node = nodeOf(launch.getLoc());
  if (node.empty()) // the step's own code (clipping, scaling)
    node = "step";
  return node;
}

std::optional<GlobalAccess> cuda::asGlobalAccess(Operation *op) {
  if (auto load = dyn_cast<memref::LoadOp>(op))
    return GlobalAccess{op, load.getMemRef(), load.getIndices(), false, 1};
  if (auto store = dyn_cast<memref::StoreOp>(op))
    return GlobalAccess{op, store.getMemRef(), store.getIndices(), true, 1};
  if (auto load = dyn_cast<vector::LoadOp>(op))
    return GlobalAccess{op, load.getBase(), load.getIndices(), false,
                        load.getVectorType().getNumElements()};
  if (auto store = dyn_cast<vector::StoreOp>(op))
    return GlobalAccess{op, store.getBase(), store.getIndices(), true,
                        store.getVectorType().getNumElements()};
  return std::nullopt;
}

Value cuda::viewRoot(Value memref) {
  while (auto view = memref.getDefiningOp<ViewLikeOpInterface>())
    memref = view.getViewSource();
  return memref;
}

bool cuda::isKernelLocal(gpu::LaunchOp launch, Value memref) {
  Value root = viewRoot(memref);
  if (llvm::is_contained(launch.getWorkgroupAttributions(), root))
    return true;
  Operation *def = root.getDefiningOp();
  return def && isa<memref::AllocaOp>(def) && launch->isAncestor(def);
}

SmallVector<GlobalAccess> cuda::globalAccesses(gpu::LaunchOp launch) {
  SmallVector<GlobalAccess> accesses;
  launch.getBody().walk([&](Operation *op) {
    if (std::optional<GlobalAccess> access = asGlobalAccess(op))
      if (!isKernelLocal(launch, access->memref))
        accesses.push_back(*access);
  });
  return accesses;
}

std::string cuda::kernelName(Location loc, unsigned index) {
  std::string tag = kernelTag(loc);
  for (char &c : tag)
    if (!llvm::isAlnum(c))
      c = '_';
  return "k" + std::to_string(index) + "_" + tag.substr(0, 48);
}

std::optional<double> KernelAccess::sectorEfficiency() const {
  // A broadcast moves one sector for the whole warp: the least it can.
  if (!sectorsPerRequest || *sectorsPerRequest == 0 ||
      pattern == AccessPattern::Broadcast)
    return std::nullopt;
  return std::min(1.0, double(activeLanes * accessBytes) /
                           double(*sectorsPerRequest * kSector));
}

int64_t KernelInfo::threads() const {
  int64_t n = 1;
  for (int d = 0; d < 3; ++d) {
    if (grid[d] < 0 || block[d] < 0)
      return -1;
    n *= grid[d] * block[d];
  }
  return n;
}

int64_t KernelInfo::footprintBytes() const {
  std::set<std::tuple<std::string, int64_t, int64_t>> views;
  int64_t bytes = 0;
  for (const KernelAccess &access : accesses) {
    if (access.footprintBytes < 0)
      continue;
    if (views
            .insert({access.buffer, access.viewOffsetBytes.value_or(-1),
                     access.footprintBytes})
            .second)
      bytes += access.footprintBytes;
  }
  return bytes;
}

std::optional<double> KernelInfo::sectorEfficiency() const {
  std::optional<double> worst;
  for (const KernelAccess &access : accesses)
    if (std::optional<double> e = access.sectorEfficiency())
      worst = worst ? std::min(*worst, *e) : *e;
  return worst;
}

KernelReport cuda::buildKernelReport(func::FuncOp step,
                                     int64_t accumulationSteps,
                                     const ParameterAt &parameterAt) {
  KernelReport report;
  report.accumulationSteps = accumulationSteps;
  // The host code at the first micro-batch.
  Evaluator host;
  step.walk([&](scf::ForOp loop) {
    if (loop->hasAttr(train::StepAttrs::kMicrobatchLoop))
      host.bind(loop.getInductionVar(), 0);
  });
  unsigned index = 0;
  step.walk([&](Operation *op) {
    if (auto launch = dyn_cast<gpu::LaunchOp>(op)) {
      report.kernels.push_back(
          KernelReader(step, launch, host, parameterAt).read(index++));
      return WalkResult::skip();
    }
    auto call = dyn_cast<func::CallOp>(op);
    if (!call || call.getCallee() != ACCRUE_GEMM_FUNCTION ||
        call.getNumOperands() < 17)
      return WalkResult::advance();
    GemmCall gemm;
    gemm.node = nodeOf(call.getLoc());
    gemm.batch = host(call.getOperand(0)).value_or(-1);
    gemm.m = host(call.getOperand(1)).value_or(-1);
    gemm.n = host(call.getOperand(2)).value_or(-1);
    gemm.k = host(call.getOperand(3)).value_or(-1);
    std::optional<int64_t> types = host(call.getOperand(16));
    gemm.inputType =
        types ? accrueDTypeName(static_cast<AccrueDType>(*types & 0xff)) : "?";
    gemm.multiplyType =
        types && (*types >> 16 & 0xff)
            ? accrueDTypeName(static_cast<AccrueDType>(*types >> 16 & 0xff))
            : gemm.inputType;
    gemm.outputType =
        types ? accrueDTypeName(static_cast<AccrueDType>(*types >> 8 & 0xff))
              : "?";
    switch (types ? *types >> 24 & 0xff : -1) {
    case ACCRUE_GEMM_EPILOGUE_NONE:
      break;
    case ACCRUE_GEMM_EPILOGUE_BIAS_GRADIENT_A:
      gemm.epilogue = "bias_gradient_a";
      break;
    case ACCRUE_GEMM_EPILOGUE_BIAS_GRADIENT_B:
      gemm.epilogue = "bias_gradient_b";
      break;
    default:
      gemm.epilogue = "?";
    }
    std::tie(gemm.launchesPerMicroBatch, gemm.launchesPerStepOutside) =
        multiplicity(call, host);
    report.gemms.push_back(gemm);
    return WalkResult::advance();
  });
  return report;
}
