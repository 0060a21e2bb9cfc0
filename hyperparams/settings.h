#pragma once

#include <functional>
#include <map>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "hyperparams/config.h"
#include "hyperparams/rules.h"

namespace gcrun::hyperparams {

// A setting that an extension declares for itself, e.g. PowerSGD's `rank` under the section
// `reducer`: the key `reducer.rank` then works like a built-in one (--set, --config, aliases,
// `gcrun show`, `gcrun list keys`, validation), and the extension reads its value, or the default,
// into its own options struct. An extension lists its settings in its registry's spec, and the key
// table is computed from the registries when asked (experiments::configKeys()). Sections and where
// their values land:
//  - reducer: ReducerOptions::settings, from ReducerSpec::settings (reducers/reducer.h);
//  - task: TaskOptions::settings, from TaskSpec::settings (tasks/task.h);
//  - output: OutputOptions::settings, from SinkSpec::settings (outputs/metric_sink.h);
//  - sync: SyncOptions::settings, from SynchronizerSpec::settings (experiments/sync/synchronizer.h).
struct SettingSpec {
  std::string name;            // under the section: "rank"
  SettingValue default_value;  // its type is the setting's type
  std::string accepted;        // "an integer >= 1"
  std::string help;
  std::function<bool(const SettingValue&)> ok;  // null: any value of the type
  std::vector<std::string> aliases;             // the reference's flat names, e.g. optimizer_reducer_rank
  std::vector<std::string> choices = {};        // Rule::choices
};

// One extension (a reducer, a task, a sink) and the settings it reads.
struct SettingOwner {
  std::string name;
  std::vector<SettingSpec> settings;
};

// What the registered extensions add to the built-in keys. `<section>.<setting>` becomes a key that
// its owners read (section "reducer", owner a reducer's name). Several owners may declare one key if
// they agree on its type and what it accepts (powersgd and svd both read reducer.rank); a clash is
// a UserError naming both owners. The config stores the value given, if any; where none is, the
// default is that of the owner the config selects (reducer.name, task.name, the first of
// output.sinks that declares it, sync.strategy), or else of the first owner listed.
struct Extensions {
  std::vector<SettingOwner> reducers;
  std::vector<SettingOwner> tasks;
  std::vector<SettingOwner> sinks;
  std::vector<SettingOwner> strategies;
  // The reference's names for reducer.name's values, given through its alias optimizer_reducer:
  // its RankKReducer is gcrun's powersgd.
  std::map<std::string, std::string> reducer_reference_names;
};

// A setting's value as users write it: 4, 0.01, true, text.
std::string formatSetting(const SettingValue& value);

// How an extension binds its declared settings to the fields of a plain options struct whose
// member initialisers are the defaults:
//   struct TopKOptions { double compression = 0.01; };
//   const SettingsSchema<TopKOptions> schema = SettingsSchema<TopKOptions>()
//       .add(&TopKOptions::compression, "compression", positiveFraction(), "Share of elements sent.");
//   TopKOptions options = schema.read(context.options.settings);
template <class Options>
class SettingsSchema {
 public:
  template <class T>
  SettingsSchema add(T Options::*member, std::string name, const Rule<T>& rule, std::string help,
                     std::vector<std::string> aliases = {}) const {
    static_assert(std::is_same_v<T, int64_t> || std::is_same_v<T, double> || std::is_same_v<T, bool> ||
                      std::is_same_v<T, std::string>,
                  "a setting is an integer, a number, a boolean or a string");
    SettingsSchema next = *this;
    const auto check = rule.ok;
    next.specs_.push_back(SettingSpec{name, SettingValue(Options{}.*member), rule.accepted, std::move(help),
                                      [check](const SettingValue& v) {
                                        const T* value = std::get_if<T>(&v);
                                        return value != nullptr && (!check || check(*value));
                                      },
                                      std::move(aliases), rule.choices});
    next.readers_.push_back(
        [member, name](Options& options, const SettingValue& value) { options.*member = as<T>(value, name); });
    return next;
  }

  const std::vector<SettingSpec>& specs() const { return specs_; }

  // The options with every declared setting that `values` holds; the others keep their defaults.
  Options read(const SettingValues& values) const {
    Options options;
    for (size_t i = 0; i < specs_.size(); ++i) {
      const auto found = values.find(specs_[i].name);
      if (found != values.end()) readers_[i](options, found->second);
    }
    return options;
  }

 private:
  // Values come parsed to the declared type from the config; code that fills SettingValues by hand
  // may give an integer for a number.
  template <class T>
  static T as(const SettingValue& value, const std::string& name) {
    if (const T* exact = std::get_if<T>(&value)) return *exact;
    if constexpr (std::is_same_v<T, double>) {
      if (const int64_t* whole = std::get_if<int64_t>(&value)) return static_cast<double>(*whole);
    }
    throw std::invalid_argument("setting '" + name + "' has a value of the wrong type (" + formatSetting(value) + ")");
  }

  std::vector<SettingSpec> specs_;
  std::vector<std::function<void(Options&, const SettingValue&)>> readers_;
};

}  // namespace gcrun::hyperparams
