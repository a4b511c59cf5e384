//===- SettingTable.h - settings declared once, bound by all -*- C++ -*-===//
//
// A SettingTable lists the settings of an options struct: name, help, kind,
// and how to read a value into the struct. Each setting is declared once
// (the compiler's by the pipeline, each target and the compiler; the
// runtime's by SessionOptions) and every front end binds the same table:
// accrue-compile and accrue-train as flags (`--precision bf16`), accrue-opt
// as pipeline options (`--accrue-train-pipeline="precision=bf16"`), the C
// APIs and Python by name. Reading a value checks its syntax only; ranges
// and combinations are checked in one place per library (compileModel's
// validation, SessionOptions::validate).
//
// Header-only and free of LLVM, so the compiler and the runtime share it
// without linking each other.
//
//===----------------------------------------------------------------------===//

#ifndef ACCRUE_RUNTIME_SETTINGTABLE_H
#define ACCRUE_RUNTIME_SETTINGTABLE_H

#include "accrue-runtime/Settings.h"

#include <charconv>
#include <cmath>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

namespace accrue {

/// One setting of an options struct.
struct Setting {
  enum class Kind { Flag, Integer, Number, Choice, Text };

  /// snake_case; tools spell it `--name-with-dashes` or `name-with-dashes`.
  std::string name;
  std::string help;
  Kind kind = Kind::Text;
  /// Choice: the accepted spellings.
  std::vector<std::string> choices;
  /// Flag: the default is true, so tools also offer `--no-<name>`.
  bool defaultTrue = false;
  /// Choice: the value a command line's bare `--name` means (empty: a
  /// value is required).
  std::string implicitValue;
  /// Reads `value` into the options; returns an error message (naming the
  /// setting with settingRef) or nothing.
  std::function<std::optional<std::string>(std::string_view value)> read;
};

/// `name` with dashes: how accrue-opt and command lines spell a setting.
inline std::string dashedSettingName(std::string_view name) {
  std::string dashed(name);
  for (char &c : dashed)
    if (c == '_')
      c = '-';
  return dashed;
}

/// "<setting> expects <what>, got '<value>'", naming the setting with
/// settingRef.
inline std::string settingExpects(std::string_view name, std::string_view what,
                                  std::string_view value) {
  return settingRef(std::string(name)) + " expects " + std::string(what) +
         ", got '" + std::string(value) + "'";
}

namespace settings_detail {

/// `text` without leading and trailing whitespace.
inline std::string_view trim(std::string_view text) {
  const char *space = " \t\n\v\f\r";
  size_t first = text.find_first_not_of(space);
  if (first == std::string_view::npos)
    return {};
  return text.substr(first, text.find_last_not_of(space) - first + 1);
}

/// A decimal integer (an optional '-', digits), surrounded by whitespace
/// at most, that fits int64_t.
inline std::optional<int64_t> parseInteger(std::string_view text) {
  text = trim(text);
  int64_t v = 0;
  auto [end, error] =
      std::from_chars(text.data(), text.data() + text.size(), v);
  if (text.empty() || error != std::errc() || end != text.data() + text.size())
    return std::nullopt;
  return v;
}

/// A finite decimal number (1, -0.5, +2, 1e-3, .5), surrounded by
/// whitespace at most.
inline std::optional<double> parseNumber(std::string_view text) {
  text = trim(text);
  if (text.size() > 1 && text[0] == '+' && text[1] != '-')
    text.remove_prefix(1);
  double v = 0;
  auto [end, error] =
      std::from_chars(text.data(), text.data() + text.size(), v);
  if (text.empty() || error != std::errc() ||
      end != text.data() + text.size() || !std::isfinite(v))
    return std::nullopt;
  return v;
}

} // namespace settings_detail

/// The settings of one options struct, in declaration order.
class SettingTable {
public:
  const std::vector<Setting> &settings() const { return list; }

  /// The setting `name` (with dashes or underscores), or null.
  const Setting *lookup(std::string_view name) const {
    std::string underscored(name);
    for (char &c : underscored)
      if (c == '-')
        c = '_';
    for (const Setting &setting : list)
      if (setting.name == underscored)
        return &setting;
    return nullptr;
  }

  /// Reads `value` into setting `name`; returns an error, if any.
  std::optional<std::string> read(std::string_view name,
                                  std::string_view value) const {
    const Setting *setting = lookup(name);
    if (!setting)
      return "unknown setting '" + std::string(name) + "'";
    return setting->read(value);
  }

  /// Reads "name=value name=value flag ..." (accrue-opt's pipeline option
  /// syntax; names with dashes or underscores).
  std::optional<std::string> readAll(std::string_view text) const {
    size_t pos = 0;
    while (pos < text.size()) {
      size_t end = text.find(' ', pos);
      std::string_view item = text.substr(pos, end == std::string_view::npos
                                                   ? std::string_view::npos
                                                   : end - pos);
      pos = end == std::string_view::npos ? text.size() : end + 1;
      if (item.empty())
        continue;
      size_t equals = item.find('=');
      std::string_view name = item.substr(0, equals);
      std::string_view value = equals == std::string_view::npos
                                   ? std::string_view()
                                   : item.substr(equals + 1);
      const Setting *setting = lookup(name);
      if (!setting)
        return "unknown option '" + std::string(name) +
               "' (options: " + knownNames() + ")";
      // A flag given alone is set.
      if (equals == std::string_view::npos &&
          setting->kind == Setting::Kind::Flag)
        value = "true";
      if (std::optional<std::string> error = setting->read(value))
        return error;
    }
    return std::nullopt;
  }

  /// The settings' names with dashes, comma-separated.
  std::string knownNames() const {
    std::string known;
    for (const Setting &s : list)
      known += (known.empty() ? "" : ", ") + dashedSettingName(s.name);
    return known;
  }

  void flag(std::string name, std::string help, bool &field) {
    bool defaultTrue = field;
    flag(
        std::move(name), std::move(help), [&field](bool on) { field = on; },
        defaultTrue);
  }
  /// A flag whose value `set` applies (to more than one field, say).
  void flag(std::string name, std::string help, std::function<void(bool)> set,
            bool defaultTrue = false) {
    Setting s{name, std::move(help), Setting::Kind::Flag, {}, defaultTrue, {},
              {}};
    s.read = [name, set = std::move(set)](
                 std::string_view value) -> std::optional<std::string> {
      if (value.empty() || value == "true" || value == "1")
        set(true);
      else if (value == "false" || value == "0")
        set(false);
      else
        return settingExpects(name, "true or false", value);
      return std::nullopt;
    };
    list.push_back(std::move(s));
  }

  void integer(std::string name, std::string help, int64_t &field) {
    addInteger(std::move(name), std::move(help),
               [&field](int64_t v) { field = v; });
  }
  void integer(std::string name, std::string help,
               std::optional<int64_t> &field) {
    addInteger(std::move(name), std::move(help),
               [&field](int64_t v) { field = v; });
  }
  void number(std::string name, std::string help, double &field) {
    addNumber(std::move(name), std::move(help),
              [&field](double v) { field = v; });
  }
  void number(std::string name, std::string help,
              std::optional<double> &field) {
    addNumber(std::move(name), std::move(help),
              [&field](double v) { field = v; });
  }

  void text(std::string name, std::string help, std::string &field) {
    Setting s{name, std::move(help), Setting::Kind::Text, {}, false, {}, {}};
    s.read = [&field](std::string_view value) -> std::optional<std::string> {
      field = std::string(value);
      return std::nullopt;
    };
    list.push_back(std::move(s));
  }

  /// An enumeration: `spell` gives each value's spelling (accrueXName) for
  /// values 0 .. count-1.
  template <typename Enum, typename Field>
  void choice(std::string name, std::string help, Field &field,
              const char *(*spell)(Enum), int count) {
    std::vector<std::string> spellings;
    for (int i = 0; i < count; ++i)
      spellings.push_back(spell(static_cast<Enum>(i)));
    addChoice(std::move(name), std::move(help), std::move(spellings),
              [&field](int index) { field = static_cast<Enum>(index); });
  }

  /// Anything else: `read` parses and stores the value.
  Setting &
  custom(std::string name, std::string help, Setting::Kind kind,
         std::function<std::optional<std::string>(std::string_view)> read) {
    list.push_back(Setting{std::move(name),
                           std::move(help),
                           kind,
                           {},
                           false,
                           {},
                           std::move(read)});
    return list.back();
  }

private:
  void addInteger(std::string name, std::string help,
                  std::function<void(int64_t)> store) {
    Setting s{name, std::move(help), Setting::Kind::Integer, {}, false, {}, {}};
    s.read = [name,
              store](std::string_view value) -> std::optional<std::string> {
      std::optional<int64_t> v = settings_detail::parseInteger(value);
      if (!v)
        return settingExpects(name, "an integer", value);
      store(*v);
      return std::nullopt;
    };
    list.push_back(std::move(s));
  }

  void addNumber(std::string name, std::string help,
                 std::function<void(double)> store) {
    Setting s{name, std::move(help), Setting::Kind::Number, {}, false, {}, {}};
    s.read = [name,
              store](std::string_view value) -> std::optional<std::string> {
      std::optional<double> v = settings_detail::parseNumber(value);
      if (!v)
        return settingExpects(name, "a number", value);
      store(*v);
      return std::nullopt;
    };
    list.push_back(std::move(s));
  }

  void addChoice(std::string name, std::string help,
                 std::vector<std::string> spellings,
                 std::function<void(int)> store) {
    Setting s{
        name, std::move(help), Setting::Kind::Choice, spellings, false, {}, {}};
    s.read = [name, spellings,
              store](std::string_view value) -> std::optional<std::string> {
      for (size_t i = 0; i < spellings.size(); ++i)
        if (value == spellings[i]) {
          store(static_cast<int>(i));
          return std::nullopt;
        }
      std::string alternatives;
      for (size_t i = 0; i < spellings.size(); ++i)
        alternatives += (i == 0                      ? ""
                         : i + 1 == spellings.size() ? " or "
                                                     : ", ") +
                        spellings[i];
      return settingRef(name) + " must be " + alternatives + ", not '" +
             std::string(value) + "'";
    };
    list.push_back(std::move(s));
  }

  std::vector<Setting> list;
};

} // namespace accrue

#endif // ACCRUE_RUNTIME_SETTINGTABLE_H
