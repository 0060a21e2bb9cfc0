#pragma once

#include <algorithm>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "hyperparams/base/errors.h"

namespace gcrun {

// A name -> factory table for one extension point (reducers, tasks, metric sinks). The names are
// the values users type in the config, so an unknown name is a UserError listing the known ones.
// add() replaces an existing entry: that is how user code overrides a built-in. Adding changes
// nothing else: what depends on the entries (the config keys their specs declare) is computed from
// them when asked.
template <class Factory>
class Registry {
 public:
  struct Entry {
    std::string name;
    std::string description;
    Factory factory;
  };

  explicit Registry(std::string kind) : kind_(std::move(kind)) {}

  void add(const std::string& name, std::string description, Factory factory) {
    if (!contains(name)) order_.push_back(name);
    entries_[name] = Entry{name, std::move(description), std::move(factory)};
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

  // In the order first added (the built-ins', then user code's): the order their settings are keys in.
  std::vector<const Entry*> inOrderAdded() const {
    std::vector<const Entry*> out;
    for (const auto& name : order_) out.push_back(&entries_.at(name));
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
  std::map<std::string, Entry> entries_;
  std::vector<std::string> order_;
};

}  // namespace gcrun
