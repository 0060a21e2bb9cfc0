#pragma once

#include <string>
#include <vector>

namespace gcrun::experiments {

// The YAML files of experiments/presets/, embedded at build time (cmake/EmbedPresets.cmake).
struct EmbeddedPreset {
  const char* name;
  const char* yaml;
};
const std::vector<EmbeddedPreset>& embeddedPresets();

}  // namespace gcrun::experiments
