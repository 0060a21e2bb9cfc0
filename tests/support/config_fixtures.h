#pragma once

// What the config tests share: the reducers' reducer.* settings, declared before any test runs,
// and a config read from one YAML layer.

#include <string>

#include <gtest/gtest.h>

#include "hyperparams/config_io.h"
#include "reducers/reducer.h"

namespace gcrun::hyperparams {

// The reducers declare their reducer.* settings when their registry is first used.
class DeclareReducerSettings : public ::testing::Environment {
 public:
  void SetUp() override { reducers::reducerRegistry(); }
};
inline const auto* const declare_reducer_settings = ::testing::AddGlobalTestEnvironment(new DeclareReducerSettings);

inline ExperimentConfig fromYaml(const std::string& yaml) {
  ExperimentConfig config;
  applyYaml(config, yaml, "preset test");
  return config;
}

}  // namespace gcrun::hyperparams
