#pragma once

#include <string>
#include <vector>

namespace gcrun::experiments {

// A YAML file compiled into gcrun (cmake/EmbedYaml.cmake), so the binary runs anywhere.
struct EmbeddedYaml {
  const char* name;  // the file's stem
  const char* yaml;
};

// experiments/presets/*.yaml
const std::vector<EmbeddedYaml>& embeddedPresets();
// experiments/study/studies/*.yaml
const std::vector<EmbeddedYaml>& embeddedStudies();

}  // namespace gcrun::experiments
