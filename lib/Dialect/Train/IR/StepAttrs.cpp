//===- StepAttrs.cpp - the train.* attributes of a step ---------*- C++ -*-===//
//
// A step's signature carries its contract in discardable attributes on
// func ops (StepAttrs in Train.h): argument roles and names, tied results,
// metrics, the finalized ABI. The dialect checks each where it is attached,
// so a pass or a hand-written step that gets one wrong fails verification
// at that spot instead of producing a manifest a host misreads.
//
//===----------------------------------------------------------------------===//

#include "accrue/Dialect/Train/IR/Train.h"

#include "mlir/IR/DialectImplementation.h"
#include "mlir/Interfaces/FunctionInterfaces.h"

using namespace mlir;
using namespace accrue::train;

//===----------------------------------------------------------------------===//
// #train.role
//===----------------------------------------------------------------------===//

Attribute ArgRoleAttr::parse(AsmParser &parser, Type) {
  std::string spelling;
  SMLoc loc = parser.getCurrentLocation();
  if (parser.parseLess() || parser.parseKeywordOrString(&spelling) ||
      parser.parseGreater())
    return {};
  AccrueArgRole role;
  if (accrueParseArgRole(spelling.c_str(), &role) != 0) {
    parser.emitError(loc) << "unknown step argument role '" << spelling << "'";
    return {};
  }
  return ArgRoleAttr::get(parser.getContext(), role);
}

void ArgRoleAttr::print(AsmPrinter &printer) const {
  printer << '<' << accrueArgRoleName(getValue()) << '>';
}

//===----------------------------------------------------------------------===//
// Verifiers
//===----------------------------------------------------------------------===//

namespace {

/// An i64 (the integers the step's attributes hold, read with getInt).
bool isI64(Attribute value) {
  auto integer = dyn_cast_or_null<IntegerAttr>(value);
  return integer && integer.getType().isSignlessInteger(64);
}

/// Checks that `value`, named `name`, is an `AttrT`, saying `what` it must
/// be otherwise.
template <typename AttrT>
LogicalResult expect(Operation *op, StringRef name, Attribute value,
                     StringRef what) {
  if (isa<AttrT>(value))
    return success();
  return op->emitOpError("'")
         << name << "' must be " << what << ", not " << value;
}

/// The index checks of an integer batch input: {low, high, ignore?, what}.
LogicalResult verifyIndexChecks(Operation *op, Attribute value) {
  auto checks = dyn_cast<ArrayAttr>(value);
  if (!checks)
    return expect<ArrayAttr>(op, StepAttrs::kIndexChecks, value, "an array");
  for (Attribute check : checks) {
    auto dict = dyn_cast<DictionaryAttr>(check);
    if (!dict || !isI64(dict.get("low")) || !isI64(dict.get("high")) ||
        !dict.getAs<StringAttr>("what") ||
        (dict.get("ignore") && !isI64(dict.get("ignore"))))
      return op->emitOpError("'")
             << StepAttrs::kIndexChecks
             << "' entries must be {low, high, what} dictionaries (i64 "
                "bounds, a string) with an optional i64 ignore, not "
             << check;
  }
  return success();
}

/// One entry of a finalized step's train.abi.
LogicalResult verifyABIEntry(Operation *op, Attribute entry, unsigned index) {
  auto dict = dyn_cast<DictionaryAttr>(entry);
  if (!dict || !dict.getAs<ArgRoleAttr>(StepAttrs::kRole) ||
      !dict.getAs<StringAttr>(StepAttrs::kName))
    return op->emitOpError("'")
           << StepAttrs::kABI << "' entry #" << index
           << " must be a dictionary with a #train.role '" << StepAttrs::kRole
           << "' and a string '" << StepAttrs::kName << "', not " << entry;
  if (Attribute fields = dict.get(StepAttrs::kFields)) {
    auto names = dyn_cast<ArrayAttr>(fields);
    if (!names || !llvm::all_of(names, llvm::IsaPred<StringAttr>))
      return op->emitOpError("'")
             << StepAttrs::kABI << "' entry #" << index << ": '"
             << StepAttrs::kFields << "' must be an array of strings";
  }
  if (Attribute checks = dict.get(StepAttrs::kIndexChecks))
    return verifyIndexChecks(op, checks);
  return success();
}

} // namespace

LogicalResult TrainDialect::verifyOperationAttribute(Operation *op,
                                                     NamedAttribute attr) {
  StringRef name = attr.getName().getValue();
  Attribute value = attr.getValue();
  bool onFunction = isa<FunctionOpInterface>(op);
  auto onFunctionOnly = [&]() -> LogicalResult {
    if (onFunction)
      return success();
    return op->emitOpError("'") << name << "' belongs on a function";
  };
  if (name == StepAttrs::kStep || name == StepAttrs::kPartialWindows)
    return failure(failed(onFunctionOnly()) ||
                   failed(expect<UnitAttr>(op, name, value, "a unit")));
  if (name == StepAttrs::kMicroBatch) {
    if (failed(onFunctionOnly()))
      return failure();
    if (!isI64(value) || cast<IntegerAttr>(value).getInt() < 1)
      return op->emitOpError("'")
             << name << "' must be a positive i64, not " << value;
    return success();
  }
  if (name == StepAttrs::kLossDivisor)
    return failure(failed(onFunctionOnly()) ||
                   failed(expect<LossDivisorAttr>(op, name, value,
                                                  "a #train.loss_divisor")));
  if (name == StepAttrs::kABI) {
    if (failed(onFunctionOnly()))
      return failure();
    auto entries = dyn_cast<ArrayAttr>(value);
    if (!entries)
      return expect<ArrayAttr>(op, name, value, "an array");
    for (auto [i, entry] : llvm::enumerate(entries))
      if (failed(verifyABIEntry(op, entry, i)))
        return failure();
    return success();
  }
  if (name == StepAttrs::kMicrobatchLoop)
    return expect<UnitAttr>(op, name, value, "a unit");
  return op->emitOpError("unknown train attribute '") << name << "'";
}

LogicalResult TrainDialect::verifyRegionArgAttribute(Operation *op, unsigned,
                                                     unsigned argIndex,
                                                     NamedAttribute attr) {
  StringRef name = attr.getName().getValue();
  Attribute value = attr.getValue();
  if (name == StepAttrs::kRole)
    return expect<ArgRoleAttr>(op, name, value, "a #train.role");
  if (name == StepAttrs::kName)
    return expect<StringAttr>(op, name, value, "a string");
  if (name == StepAttrs::kIndexChecks)
    return verifyIndexChecks(op, value);
  return op->emitOpError("argument #")
         << argIndex << ": unknown train attribute '" << name << "'";
}

LogicalResult TrainDialect::verifyRegionResultAttribute(Operation *op, unsigned,
                                                        unsigned resultIndex,
                                                        NamedAttribute attr) {
  StringRef name = attr.getName().getValue();
  Attribute value = attr.getValue();
  if (name == StepAttrs::kName)
    return expect<StringAttr>(op, name, value, "a string");
  if (name == StepAttrs::kTied) {
    auto function = dyn_cast<FunctionOpInterface>(op);
    int64_t index = isI64(value) ? cast<IntegerAttr>(value).getInt() : -1;
    if (index < 0 ||
        (function && index >= static_cast<int64_t>(function.getNumArguments())))
      return op->emitOpError("result #")
             << resultIndex << ": '" << name
             << "' must be the index of an argument, not " << value;
    return success();
  }
  if (name == StepAttrs::kMetric) {
    auto metric = dyn_cast<StringAttr>(value);
    AccrueMetric known;
    if (!metric || accrueParseMetric(metric.str().c_str(), &known) != 0)
      return op->emitOpError("result #")
             << resultIndex << ": '" << name
             << "' must name a metric of the step contract, not " << value;
    return success();
  }
  return op->emitOpError("result #")
         << resultIndex << ": unknown train attribute '" << name << "'";
}
