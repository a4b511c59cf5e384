//===- Settings.cpp - options declared once, bound by every tool -*- C++
//-*-===//

#include "accrue/Support/Settings.h"

#include "accrue-runtime/Settings.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/SmallVector.h"

#include <cmath>

using namespace llvm;
using namespace accrue;

std::string accrue::dashedSettingName(StringRef name) {
  std::string dashed = name.str();
  llvm::replace(dashed, '_', '-');
  return dashed;
}

const Setting *SettingTable::lookup(StringRef name) const {
  std::string underscored = name.str();
  llvm::replace(underscored, '-', '_');
  for (const Setting &setting : list)
    if (setting.name == underscored)
      return &setting;
  return nullptr;
}

std::optional<std::string> SettingTable::read(StringRef name,
                                              StringRef value) const {
  const Setting *setting = lookup(name);
  if (!setting)
    return "unknown setting '" + name.str() + "'";
  return setting->read(value);
}

std::optional<std::string> SettingTable::readAll(StringRef text) const {
  SmallVector<StringRef> items;
  text.split(items, ' ', -1, /*KeepEmpty=*/false);
  for (StringRef item : items) {
    auto [name, value] = item.split('=');
    const Setting *setting = lookup(name);
    if (!setting) {
      std::string known;
      for (const Setting &s : list)
        known += (known.empty() ? "" : ", ") + dashedSettingName(s.name);
      return "unknown option '" + name.str() + "' (options: " + known + ")";
    }
    // A flag given alone is set.
    if (!item.contains('=') && setting->kind == Setting::Kind::Flag)
      value = "true";
    if (std::optional<std::string> error = setting->read(value))
      return error;
  }
  return std::nullopt;
}

std::string accrue::settingExpects(StringRef name, StringRef what,
                                   StringRef value) {
  return settingRef(name.str()) + " expects " + what.str() + ", got '" +
         value.str() + "'";
}

void SettingTable::flag(std::string name, std::string help, bool &field) {
  Setting s{name, std::move(help), Setting::Kind::Flag, {}, field, {}};
  s.read = [name, &field](StringRef value) -> std::optional<std::string> {
    if (value.empty() || value == "true" || value == "1") {
      field = true;
    } else if (value == "false" || value == "0") {
      field = false;
    } else {
      return settingExpects(name, "true or false", value);
    }
    return std::nullopt;
  };
  list.push_back(std::move(s));
}

void SettingTable::integer(std::string name, std::string help, int64_t &field) {
  Setting s{name, std::move(help), Setting::Kind::Integer, {}, false, {}};
  s.read = [name, &field](StringRef value) -> std::optional<std::string> {
    if (value.trim().getAsInteger(10, field))
      return settingExpects(name, "an integer", value);
    return std::nullopt;
  };
  list.push_back(std::move(s));
}

void SettingTable::integer(std::string name, std::string help,
                           std::optional<int64_t> &field) {
  Setting s{name, std::move(help), Setting::Kind::Integer, {}, false, {}};
  s.read = [name, &field](StringRef value) -> std::optional<std::string> {
    int64_t v;
    if (value.trim().getAsInteger(10, v))
      return settingExpects(name, "an integer", value);
    field = v;
    return std::nullopt;
  };
  list.push_back(std::move(s));
}

/// A finite number.
static std::optional<double> parseNumber(StringRef value) {
  double v;
  if (value.trim().getAsDouble(v) || !std::isfinite(v))
    return std::nullopt;
  return v;
}

void SettingTable::number(std::string name, std::string help, double &field) {
  Setting s{name, std::move(help), Setting::Kind::Number, {}, false, {}};
  s.read = [name, &field](StringRef value) -> std::optional<std::string> {
    std::optional<double> v = parseNumber(value);
    if (!v)
      return settingExpects(name, "a number", value);
    field = *v;
    return std::nullopt;
  };
  list.push_back(std::move(s));
}

void SettingTable::number(std::string name, std::string help,
                          std::optional<double> &field) {
  Setting s{name, std::move(help), Setting::Kind::Number, {}, false, {}};
  s.read = [name, &field](StringRef value) -> std::optional<std::string> {
    std::optional<double> v = parseNumber(value);
    if (!v)
      return settingExpects(name, "a number", value);
    field = v;
    return std::nullopt;
  };
  list.push_back(std::move(s));
}

void SettingTable::text(std::string name, std::string help,
                        std::string &field) {
  Setting s{name, std::move(help), Setting::Kind::Text, {}, false, {}};
  s.read = [&field](StringRef value) -> std::optional<std::string> {
    field = value.str();
    return std::nullopt;
  };
  list.push_back(std::move(s));
}

void SettingTable::addChoice(std::string name, std::string help,
                             std::vector<std::string> spellings,
                             std::function<void(int)> store) {
  Setting s{name, std::move(help), Setting::Kind::Choice, spellings, false, {}};
  s.read = [name, spellings,
            store](StringRef value) -> std::optional<std::string> {
    for (auto [i, spelling] : llvm::enumerate(spellings))
      if (value == spelling) {
        store(static_cast<int>(i));
        return std::nullopt;
      }
    std::string list;
    for (auto [i, spelling] : llvm::enumerate(spellings))
      list += (i == 0                      ? ""
               : i + 1 == spellings.size() ? " or "
                                           : ", ") +
              spelling;
    return settingRef(name) + " must be " + list + ", not '" + value.str() +
           "'";
  };
  list.push_back(std::move(s));
}

Setting &SettingTable::custom(
    std::string name, std::string help, Setting::Kind kind,
    std::function<std::optional<std::string>(StringRef)> read) {
  list.push_back(
      Setting{std::move(name), std::move(help), kind, {}, false, {}, read});
  return list.back();
}
