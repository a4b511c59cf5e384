//===- Settings.h - options declared once, bound by every tool --*- C++ -*-===//
//
// The compiler's settings use the table the runtime's do
// (accrue-runtime/SettingTable.h, free of LLVM): one declaration per
// setting, bound by every front end.
//
//===----------------------------------------------------------------------===//

#ifndef ACCRUE_SUPPORT_SETTINGS_H
#define ACCRUE_SUPPORT_SETTINGS_H

#include "accrue-runtime/SettingTable.h"

#endif // ACCRUE_SUPPORT_SETTINGS_H
