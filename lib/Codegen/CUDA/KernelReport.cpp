//===- KernelReport.cpp - what a CUDA step's kernels do ---------*- C++ -*-===//
//
// The kernels are read, not run: an Evaluator computes the integer values
// of a kernel's index arithmetic for one thread at the first iteration of
// every loop around it (the first micro-batch on the host), and the report
// is made from the addresses it gives the first warp's threads.
//
//===----------------------------------------------------------------------===//

#include "accrue/Codegen/CUDA/KernelReport.h"
#include "accrue/Codegen/CUDA/Passes.h"

#include "accrue-runtime/StepABI.h"
#include "accrue/Dialect/Train/IR/Train.h"

#include "mlir/Dialect/Affine/IR/AffineOps.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/TypeSwitch.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/raw_ostream.h"

#include <algorithm>
#include <map>
#include <set>

namespace accrue::cuda {
#define GEN_PASS_DEF_CUDAKERNELREPORT
#include "accrue/Codegen/CUDA/Passes.h.inc"
} // namespace accrue::cuda

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

/// The ONNX node a location names.
std::string nodeOf(Location loc) {
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

/// A global load or store of a kernel.
struct Access {
  Operation *op;
  Value memref;
  ValueRange indices;
  bool store;
  int64_t width; // elements
};

std::optional<Access> asAccess(Operation *op) {
  if (auto load = dyn_cast<memref::LoadOp>(op))
    return Access{op, load.getMemRef(), load.getIndices(), false, 1};
  if (auto store = dyn_cast<memref::StoreOp>(op))
    return Access{op, store.getMemRef(), store.getIndices(), true, 1};
  if (auto load = dyn_cast<vector::LoadOp>(op))
    return Access{op, load.getBase(), load.getIndices(), false,
                  load.getVectorType().getNumElements()};
  if (auto store = dyn_cast<vector::StoreOp>(op))
    return Access{op, store.getBase(), store.getIndices(), true,
                  store.getVectorType().getNumElements()};
  return std::nullopt;
}

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
std::optional<int64_t> address(const Access &access, Evaluator &eval) {
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
    kernel.node = kernelTag(launch.getLoc());
    if (kernel.node == "kernel") // a loop moved into a kernel whole
      kernel.node = nodeOf(launch.getLoc());
    if (kernel.node.empty()) // the step's own code (clipping, scaling)
      kernel.node = "step";
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
      // Divisions by values from outside the kernel, constants included:
      // kernel parameters once it is outlined, divided at run time.
      if (isa<arith::DivUIOp, arith::DivSIOp, arith::RemUIOp, arith::RemSIOp,
              arith::CeilDivUIOp, arith::CeilDivSIOp, arith::FloorDivSIOp>(
              op) &&
          !launch->isAncestor(
              op->getOperand(1).getParentBlock()->getParentOp()))
        ++kernel.parameterDivisions;
      std::optional<Access> access = asAccess(op);
      if (!access || isLocal(access->memref))
        return;
      kernel.accesses.push_back(describe(*access, kernel, threads));
    });
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

  /// Memory the kernel allocates for itself (registers, not global).
  bool isLocal(Value memref) {
    Operation *def = memref.getDefiningOp();
    return def && isa<memref::AllocaOp>(def) && launch->isAncestor(def);
  }

  KernelAccess describe(const Access &access, const KernelInfo &kernel,
                        std::vector<Evaluator> &threads) {
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
    for (Evaluator &eval : threads)
      if (reaches(access.op, launch, eval))
        addresses.push_back(address(access, eval));
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
    std::tie(gemm.launchesPerMicroBatch, gemm.launchesPerStepOutside) =
        multiplicity(call, host);
    report.gemms.push_back(gemm);
    return WalkResult::advance();
  });
  return report;
}

//===----------------------------------------------------------------------===//
// JSON and text
//===----------------------------------------------------------------------===//

namespace {

/// Ceilings worth a line in the text report.
constexpr int64_t kSerialOpsCeiling = 8192;
constexpr int64_t kLargeFootprint = 1 << 20;
constexpr double kEfficiencyFloor = 0.8;

llvm::json::Value optional(std::optional<int64_t> v) {
  return v ? llvm::json::Value(*v) : llvm::json::Value(nullptr);
}

llvm::json::Value optional(std::optional<double> v) {
  return v ? llvm::json::Value(std::round(*v * 1000) / 1000)
           : llvm::json::Value(nullptr);
}

} // namespace

llvm::json::Value KernelReport::toJson() const {
  int64_t k = accumulationSteps;
  llvm::json::Array kernelsJson, gemmsJson;
  int64_t kernelsPerMicroBatch = 0, kernelsPerStep = 0, gemmsPerMicroBatch = 0,
          gemmsPerStep = 0, thinGemms = 0, singleThread = 0,
          singleThreadLoops = 0, maxOps = 0, footprintPerMicroBatch = 0,
          footprintPerStep = 0, parameterDividing = 0,
          invariantPerMicroBatch = 0;
  std::optional<double> worstLarge;
  for (const KernelInfo &kernel : kernels) {
    kernelsPerMicroBatch += kernel.launchesPerMicroBatch;
    kernelsPerStep += kernel.launchesPerStep(k);
    int64_t footprint = kernel.footprintBytes();
    footprintPerMicroBatch += kernel.launchesPerMicroBatch * footprint;
    footprintPerStep += kernel.launchesPerStep(k) * footprint;
    maxOps = std::max(maxOps, kernel.memoryOpsPerThread);
    parameterDividing += kernel.parameterDivisions > 0;
    invariantPerMicroBatch +=
        kernel.loopInvariant ? kernel.launchesPerMicroBatch : 0;
    if (kernel.threads() == 1) {
      ++singleThread;
      singleThreadLoops += kernel.tripCount > 1;
    }
    std::optional<double> efficiency = kernel.sectorEfficiency();
    if (footprint > kLargeFootprint && efficiency)
      worstLarge =
          worstLarge ? std::min(*worstLarge, *efficiency) : *efficiency;
    llvm::json::Array accesses;
    for (const KernelAccess &access : kernel.accesses) {
      llvm::json::Object a{
          {"buffer", access.buffer},
          {"op", access.store ? "store" : "load"},
          {"element_bytes", access.elementBytes},
          {"access_bytes", access.accessBytes},
          {"pattern", accessPatternName(access.pattern)},
          {"thread_stride_bytes", optional(access.threadStrideBytes)},
          {"sectors_per_request", optional(access.sectorsPerRequest)},
          {"active_lanes", access.activeLanes},
          {"sector_efficiency", optional(access.sectorEfficiency())},
          {"executions_per_thread", access.executions},
          {"footprint_bytes", access.footprintBytes}};
      if (!access.parameter.empty())
        a["parameter"] = access.parameter;
      accesses.push_back(std::move(a));
    }
    kernelsJson.push_back(llvm::json::Object{
        {"name", kernel.name},
        {"node", kernel.node},
        {"launches_per_micro_batch", kernel.launchesPerMicroBatch},
        {"launches_per_step", kernel.launchesPerStep(k)},
        {"grid",
         llvm::json::Array{kernel.grid[0], kernel.grid[1], kernel.grid[2]}},
        {"block",
         llvm::json::Array{kernel.block[0], kernel.block[1], kernel.block[2]}},
        {"threads", kernel.threads()},
        {"trip_count", kernel.tripCount},
        {"unknown_trip_count", kernel.unknownTrip},
        {"grid_stride", kernel.gridStride},
        {"loop_invariant", kernel.loopInvariant},
        {"memory_ops_per_thread", kernel.memoryOpsPerThread},
        {"parameter_divisions", kernel.parameterDivisions},
        {"footprint_bytes", footprint},
        {"sector_efficiency", optional(efficiency)},
        {"accesses", std::move(accesses)}});
  }
  for (const GemmCall &gemm : gemms) {
    gemmsPerMicroBatch += gemm.launchesPerMicroBatch;
    gemmsPerStep += gemm.launchesPerStep(k);
    thinGemms += gemm.m == 1 || gemm.n == 1;
    gemmsJson.push_back(llvm::json::Object{
        {"node", gemm.node},
        {"m", gemm.m},
        {"n", gemm.n},
        {"k", gemm.k},
        {"batch", gemm.batch},
        {"input_type", gemm.inputType},
        {"launches_per_micro_batch", gemm.launchesPerMicroBatch},
        {"launches_per_step", gemm.launchesPerStep(k)}});
  }
  return llvm::json::Object{
      {"accumulation_steps", k},
      {"totals",
       llvm::json::Object{
           {"kernels", int64_t(kernels.size())},
           {"kernels_per_micro_batch", kernelsPerMicroBatch},
           {"kernels_per_step", kernelsPerStep},
           {"gemm_calls_per_micro_batch", gemmsPerMicroBatch},
           {"gemm_calls_per_step", gemmsPerStep},
           {"gemms_with_m_or_n_1", thinGemms},
           {"single_thread_kernels", singleThread},
           {"single_thread_kernels_with_loops", singleThreadLoops},
           {"max_memory_ops_per_thread", maxOps},
           {"kernels_dividing_by_parameters", parameterDividing},
           {"loop_invariant_kernels_per_micro_batch", invariantPerMicroBatch},
           {"footprint_bytes_per_micro_batch", footprintPerMicroBatch},
           {"footprint_bytes_per_step", footprintPerStep},
           {"worst_sector_efficiency_over_1mb", optional(worstLarge)}}},
      {"kernels", std::move(kernelsJson)},
      {"gemms", std::move(gemmsJson)}};
}

std::string cuda::renderKernelReport(const llvm::json::Value &value) {
  std::string text;
  llvm::raw_string_ostream os(text);
  const llvm::json::Object &report = *value.getAsObject();
  const llvm::json::Object &totals = *report.getObject("totals");
  auto integer = [](const llvm::json::Object &o, StringRef key) {
    return o.getInteger(key).value_or(0);
  };
  auto megabytes = [](int64_t bytes) {
    return std::string(llvm::formatv("{0:F1} MB", bytes / 1e6));
  };
  os << llvm::formatv(
      "kernel report ({0} micro-batches per step): {1} kernels; per "
      "micro-batch {2} launches and {3} GEMM calls, per step {4} and {5}\n",
      integer(report, "accumulation_steps"), integer(totals, "kernels"),
      integer(totals, "kernels_per_micro_batch"),
      integer(totals, "gemm_calls_per_micro_batch"),
      integer(totals, "kernels_per_step"),
      integer(totals, "gemm_calls_per_step"));
  os << llvm::formatv(
      "  kernel footprint {0} per micro-batch, {1} per step; at most {2} "
      "memory operations in one thread; {3} kernels divide by parameters\n",
      megabytes(integer(totals, "footprint_bytes_per_micro_batch")),
      megabytes(integer(totals, "footprint_bytes_per_step")),
      integer(totals, "max_memory_ops_per_thread"),
      integer(totals, "kernels_dividing_by_parameters"));
  if (const llvm::json::Object *ptx = report.getObject("ptx_totals")) {
    os << llvm::formatv(
        "  PTX ({0}): {1} kernels divide by parameters, {2} "
        "one-thread kernels loop, {3} streaming kernels "
        "lack 16-byte accesses",
        ptx->getString("arch").value_or("?"),
        integer(*ptx, "kernels_dividing_by_parameters"),
        integer(*ptx, "single_thread_kernels_with_loops"),
        integer(*ptx, "streaming_kernels_without_16_byte_accesses"));
    if (std::optional<StringRef> ptxas = ptx->getString("ptxas"))
      os << "; no ptxas figures (" << *ptxas << ")\n";
    else
      os << llvm::formatv("; ptxas: at most {0} registers, {1} kernels "
                          "spill, lowest theoretical occupancy {2:P0}\n",
                          integer(*ptx, "max_registers"),
                          integer(*ptx, "kernels_spilling"),
                          ptx->getNumber("lowest_occupancy").value_or(0));
  }

  // The kernels that move the most bytes per step.
  std::vector<const llvm::json::Object *> kernels;
  for (const llvm::json::Value &entry : *report.getArray("kernels"))
    kernels.push_back(entry.getAsObject());
  auto bytesPerStep = [&](const llvm::json::Object *kernel) {
    return integer(*kernel, "footprint_bytes") *
           integer(*kernel, "launches_per_step");
  };
  std::vector<const llvm::json::Object *> heaviest = kernels;
  std::stable_sort(heaviest.begin(), heaviest.end(), [&](auto *l, auto *r) {
    return bytesPerStep(l) > bytesPerStep(r);
  });
  constexpr size_t kRows = 25;
  os << llvm::formatv("{0,-44} {1,8} {2,12} {3,10} {4,12} {5,7}\n", "kernel",
                      "per step", "grid x block", "ops/thread", "bytes/step",
                      "sectors");
  for (const llvm::json::Object *kernel :
       ArrayRef(heaviest).take_front(kRows)) {
    const llvm::json::Array &grid = *kernel->getArray("grid"),
                            &block = *kernel->getArray("block");
    std::string shape = llvm::formatv("{0}x{1}", *grid[0].getAsInteger(),
                                      *block[0].getAsInteger());
    std::optional<double> efficiency = kernel->getNumber("sector_efficiency");
    os << llvm::formatv(
        "{0,-44} {1,8} {2,12} {3,10} {4,12} {5,7}\n",
        StringRef(*kernel->getString("name")).take_front(44),
        integer(*kernel, "launches_per_step"), shape,
        integer(*kernel, "memory_ops_per_thread"), bytesPerStep(kernel),
        efficiency ? std::string(llvm::formatv("{0:P0}", *efficiency)) : "-");
  }
  if (heaviest.size() > kRows)
    os << llvm::formatv("... {0} more (--kernel-report=json lists every "
                        "kernel and access)\n",
                        heaviest.size() - kRows);

  // What looks slow, in kernel order.
  for (const llvm::json::Object *kernel : kernels) {
    StringRef name = *kernel->getString("name");
    int64_t ops = integer(*kernel, "memory_ops_per_thread");
    int64_t threads = integer(*kernel, "threads");
    const llvm::json::Array &grid = *kernel->getArray("grid");
    if (threads == 1 && integer(*kernel, "trip_count") > 1)
      os << llvm::formatv("warning: {0} runs a loop of {1} memory operations "
                          "in one thread\n",
                          name, ops);
    else if (ops > kSerialOpsCeiling)
      os << llvm::formatv("warning: {0} runs {1} memory operations in one "
                          "thread (more than {2})\n",
                          name, ops, kSerialOpsCeiling);
    else if (threads > 1 && *grid[0].getAsInteger() == 1 &&
             kernel->getBoolean("grid_stride").value_or(false) &&
             integer(*kernel, "trip_count") > 1)
      os << llvm::formatv("warning: {0} strides over a grid of one block "
                          "({1} threads, {2} iterations each)\n",
                          name, threads, integer(*kernel, "trip_count"));
    if (kernel->getBoolean("loop_invariant").value_or(false))
      os << llvm::formatv("warning: {0} recomputes the same values in every "
                          "micro-batch (it reads only parameters and "
                          "constants)\n",
                          name);
    if (const llvm::json::Object *ptx = kernel->getObject("ptx")) {
      if (integer(*ptx, "spill_bytes") > 0)
        os << llvm::formatv("warning: {0} spills {1} bytes of registers\n",
                            name, integer(*ptx, "spill_bytes"));
      if (kernel->getBoolean("grid_stride").value_or(false) &&
          integer(*ptx, "widest_global_access") < 16)
        os << llvm::formatv("warning: {0} streams with {1}-byte accesses "
                            "(not 16)\n",
                            name, integer(*ptx, "widest_global_access"));
    }
    std::optional<double> efficiency = kernel->getNumber("sector_efficiency");
    if (integer(*kernel, "footprint_bytes") > kLargeFootprint && efficiency &&
        *efficiency < kEfficiencyFloor)
      os << llvm::formatv("warning: {0} uses {1:P0} of the sectors it moves "
                          "({2})\n",
                          name, *efficiency,
                          megabytes(integer(*kernel, "footprint_bytes")));
  }
  for (const llvm::json::Value &entry : *report.getArray("gemms")) {
    const llvm::json::Object &gemm = *entry.getAsObject();
    if (integer(gemm, "m") == 1 || integer(gemm, "n") == 1)
      os << llvm::formatv("warning: GEMM of {0} is {1}x{2}x{3} (batch {4}): a "
                          "reduction, not a matrix product\n",
                          gemm.getString("node").value_or(""),
                          integer(gemm, "m"), integer(gemm, "n"),
                          integer(gemm, "k"), integer(gemm, "batch"));
  }
  return text;
}

namespace {

struct CudaKernelReportPass
    : public accrue::cuda::impl::CudaKernelReportBase<CudaKernelReportPass> {
  using Base::Base;

  void runOnOperation() override {
    markAllAnalysesPreserved();
    if (getOperation().isExternal())
      return;
    llvm::json::Value report =
        buildKernelReport(getOperation(), accumulationSteps).toJson();
    if (json)
      llvm::outs() << llvm::formatv("{0:2}", report) << "\n";
    else
      llvm::outs() << renderKernelReport(report);
  }
};

} // namespace
