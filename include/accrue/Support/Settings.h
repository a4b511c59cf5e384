//===- Settings.h - options declared once, bound by every tool --*- C++ -*-===//
//
// A SettingTable lists the settings of an options struct: name, help, kind,
// and how to read a value into the struct. Each setting is declared once
// (by the pipeline, each target, the compiler) and every front end binds the
// same table: accrue-compile as flags (`--precision bf16`), accrue-opt as
// pipeline options (`--accrue-train-pipeline="precision=bf16"`), the C API
// and Python by name. Reading a value checks its syntax only; ranges and
// combinations are checked in one place (compileModel's validation).
//
//===----------------------------------------------------------------------===//

#ifndef ACCRUE_SUPPORT_SETTINGS_H
#define ACCRUE_SUPPORT_SETTINGS_H

#include "llvm/ADT/StringRef.h"

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
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
  std::function<std::optional<std::string>(llvm::StringRef value)> read;
};

/// The settings of one options struct, in declaration order.
class SettingTable {
public:
  const std::vector<Setting> &settings() const { return list; }
  const Setting *lookup(llvm::StringRef name) const;

  /// Reads `value` into setting `name`; returns an error, if any.
  std::optional<std::string> read(llvm::StringRef name,
                                  llvm::StringRef value) const;
  /// Reads "name=value name=value flag ..." (accrue-opt's pipeline option
  /// syntax; names with dashes or underscores).
  std::optional<std::string> readAll(llvm::StringRef text) const;

  void flag(std::string name, std::string help, bool &field);
  void integer(std::string name, std::string help, int64_t &field);
  void integer(std::string name, std::string help,
               std::optional<int64_t> &field);
  void number(std::string name, std::string help, double &field);
  void number(std::string name, std::string help, std::optional<double> &field);
  void text(std::string name, std::string help, std::string &field);
  /// An enumeration of the step contract: `spell` gives each value's
  /// spelling (accrueXName) for values 0 .. count-1.
  template <typename Enum>
  void choice(std::string name, std::string help, Enum &field,
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
         std::function<std::optional<std::string>(llvm::StringRef)> read);

private:
  void addChoice(std::string name, std::string help,
                 std::vector<std::string> spellings,
                 std::function<void(int)> store);
  std::vector<Setting> list;
};

/// `name` with dashes: how accrue-opt and command lines spell a setting.
std::string dashedSettingName(llvm::StringRef name);

/// "<setting> expects <what>, got '<value>'", naming the setting with
/// settingRef.
std::string settingExpects(llvm::StringRef name, llvm::StringRef what,
                           llvm::StringRef value);

} // namespace accrue

#endif // ACCRUE_SUPPORT_SETTINGS_H
