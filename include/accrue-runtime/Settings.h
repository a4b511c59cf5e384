//===- Settings.h - naming settings in messages -----------------*- C++ -*-===//
//
// Library errors name the settings a user got wrong, and each host spells a
// setting its own way: the libraries by its name (`micro_batch`, also the
// Python keyword), command-line tools by their flag (`--micro-batch`),
// accrue-opt by its pipeline option (`micro-batch`). A message holds a
// reference made by settingRef(); the host renders it with renderSettings().
// Header-only, so the compiler and the runtime share it without linking.
//
//===----------------------------------------------------------------------===//

#ifndef ACCRUE_RUNTIME_SETTINGS_H
#define ACCRUE_RUNTIME_SETTINGS_H

#include <functional>
#include <string>

namespace accrue {

namespace settings_detail {
// Control characters that no message holds otherwise.
constexpr char kOpen = '\x01', kClose = '\x02';
} // namespace settings_detail

/// A reference to the setting `name` (snake_case) inside a message.
inline std::string settingRef(const std::string &name) {
  return settings_detail::kOpen + name + settings_detail::kClose;
}

/// Replaces every settingRef in `message` by `spell(name)`.
inline std::string
renderSettings(const std::string &message,
               const std::function<std::string(const std::string &)> &spell) {
  using namespace settings_detail;
  std::string out;
  size_t pos = 0;
  while (pos < message.size()) {
    size_t open = message.find(kOpen, pos);
    size_t close =
        open == std::string::npos ? open : message.find(kClose, open + 1);
    if (close == std::string::npos) {
      out.append(message, pos, std::string::npos);
      break;
    }
    out.append(message, pos, open - pos);
    out += spell(message.substr(open + 1, close - open - 1));
    pos = close + 1;
  }
  return out;
}

/// `micro_batch` as a command-line flag: `--micro-batch`.
inline std::string settingFlag(const std::string &name) {
  std::string flag = "--" + name;
  for (char &c : flag)
    if (c == '_')
      c = '-';
  return flag;
}

/// `micro_batch` as it is: the libraries' and Python's spelling.
inline std::string settingName(const std::string &name) { return name; }

} // namespace accrue

#endif // ACCRUE_RUNTIME_SETTINGS_H
