//===- Error.h - the runtime's errors ---------------------------*- C++ -*-===//
//
// Errors the runtime reports to its host: bad files, bad data, bad settings.
// A message may name a setting (settingRef("lr"), Settings.h): what() spells
// it by its name, which is also the Python keyword; a tool renders it as its
// flag (`--lr`) with Error::render.
//
//===----------------------------------------------------------------------===//

#ifndef ACCRUE_RUNTIME_ERROR_H
#define ACCRUE_RUNTIME_ERROR_H

#include "accrue-runtime/Settings.h"

#include <stdexcept>
#include <string>

namespace accrue::rt {

using accrue::renderSettings;
using accrue::settingRef;

/// A user-facing error with a one-line message.
class Error : public std::runtime_error {
public:
  explicit Error(const std::string &message)
      : std::runtime_error(renderSettings(message, settingName)),
        message(message) {}

  /// The message with settings spelled by `spell` (a tool's flags).
  std::string
  render(const std::function<std::string(const std::string &)> &spell) const {
    return renderSettings(message, spell);
  }

private:
  std::string message;
};

} // namespace accrue::rt

#endif // ACCRUE_RUNTIME_ERROR_H
