#pragma once

#include <algorithm>
#include <functional>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "hyperparams/base/errors.h"

namespace gcrun {

// A name -> factory table for one extension point (reducers, tasks, metric sinks). The names are
// the values users type in the config, so an unknown name is a UserError listing the known ones.
// add() replaces an existing entry: that is how user code overrides a built-in. `on_add`, when
// given, sees every entry as it is added (the reducer registry declares the reducer's settings).
template <class Factory>
class Registry {
 public:
  struct Entry {
    std::string name;
    std::string description;
    Factory factory;
  };

  explicit Registry(std::string kind, std::function<void(const Entry&)> on_add = nullptr)
      : kind_(std::move(kind)), on_add_(std::move(on_add)) {}

  void add(const std::string& name, std::string description, Factory factory) {
    Entry entry{name, std::move(description), std::move(factory)};
    if (on_add_) on_add_(entry);
    entries_[name] = std::move(entry);
  }

  bool contains(const std::string& name) const { return entries_.count(name) > 0; }

  const Entry& at(const std::string& name) const {
    auto it = entries_.find(name);
    if (it == entries_.end()) {
      throw UserError("unknown " + kind_ + " '" + name + "'; known: " + knownNames());
    }
    return it->second;
  }

  // Sorted by name, for listings and help texts.
  std::vector<const Entry*> entries() const {
    std::vector<const Entry*> out;
    for (const auto& kv : entries_) out.push_back(&kv.second);
    return out;
  }

  std::string knownNames() const {
    std::string out;
    for (const auto& kv : entries_) out += (out.empty() ? "" : ", ") + kv.first;
    return out;
  }

  const std::string& kind() const { return kind_; }

 private:
  std::string kind_;
  std::function<void(const Entry&)> on_add_;
  std::map<std::string, Entry> entries_;
};

}  // namespace gcrun
