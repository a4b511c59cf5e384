//===- Settings.h - the settings of the compile pipeline --------*- C++ -*-===//
//
// The compile pipeline's settings in a SettingTable (accrue/Support/
// Settings.h): the target, the train passes', and each target's own
// (Target::bindSettings). accrue-compile adds the compiler's
// (bindCompilerSettings).
//
//===----------------------------------------------------------------------===//

#ifndef ACCRUE_PIPELINES_SETTINGS_H
#define ACCRUE_PIPELINES_SETTINGS_H

#include "accrue-runtime/SettingTable.h"
#include "accrue/Pipelines/Options.h"

#include <optional>
#include <string>

namespace accrue {

/// The settings of the compile pipeline (accrue-opt --accrue-train-pipeline
/// and the pipeline part of accrue-compile), bound to `options`.
void bindPipelineSettings(SettingTable &table, CompileOptions &options);

/// Checks the values of the pipeline's settings; the message of a failure
/// names the setting (settingRef).
std::optional<std::string>
validatePipelineOptions(const CompileOptions &options);

} // namespace accrue

#endif // ACCRUE_PIPELINES_SETTINGS_H
