#pragma once

#include <string>
#include <vector>

namespace gcrun::experiments {

struct PresetInfo {
  std::string name;
  std::string description;
};

// The presets compiled into gcrun (experiments/presets/*.yaml), sorted by name.
std::vector<PresetInfo> listPresets();

}  // namespace gcrun::experiments
