#include "experiments/setup/memory_estimate.h"

#include <fmt/format.h>

#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "hyperparams/base/errors.h"
#include "hyperparams/base/machine_memory.h"

namespace gcrun::experiments {
namespace {

// Parameters, their gradients and their error-feedback memories (GradientBuffers).
constexpr double kWorkerCopies = 3;

// `config` with the setting `key` back at its default, so that its share of the estimate shows.
struct Variant {
  std::string key;
  ExperimentConfig config;
};

bool isNumber(const SettingValue& value) {
  return std::holds_alternative<int64_t>(value) || std::holds_alternative<double>(value);
}

// Each number given in one section of declared settings (`values` of a config), as a variant
// without it.
template <class Values>
void addSettingVariants(const ExperimentConfig& config, const std::string& section, Values values,
                        std::vector<Variant>& variants) {
  for (const auto& [name, value] : values(config)) {
    if (!isNumber(value)) continue;
    Variant variant{section + "." + name, config};
    values(variant.config).erase(name);
    variants.push_back(std::move(variant));
  }
}

// The settings a size grows with: the numbers that the task, the reducer and the strategy declare,
// the batch and the workers per process, each as a variant at its default.
std::vector<Variant> variantsOf(const ExperimentConfig& config) {
  std::vector<Variant> variants;
  addSettingVariants(
      config, "task", [](auto& c) -> auto& { return c.task.settings; }, variants);
  addSettingVariants(
      config, "reducer", [](auto& c) -> auto& { return c.reducer.settings; }, variants);
  addSettingVariants(
      config, "sync", [](auto& c) -> auto& { return c.sync.settings; }, variants);
  const ExperimentConfig defaults;
  Variant batch{"training.batch_size", config};
  batch.config.training.batch_size = defaults.training.batch_size;
  variants.push_back(std::move(batch));
  Variant workers{"distributed.simulated_workers", config};
  workers.config.distributed.simulated_workers = 1;
  variants.push_back(std::move(workers));
  return variants;
}

double bytesFor(const ExperimentConfig& config, const ResolvedExperiment& specs) {
  if (!specs.task.size) return 0;
  const tasks::ModelSize model = specs.task.size(config.task, config.training.batch_size);
  double worker = parameterCopies(kWorkerCopies + specs.optimizer.state_copies, model) + model.other_bytes;
  if (specs.sync.memory) worker += specs.sync.memory(config, model);
  return worker * static_cast<double>(config.distributed.simulated_workers);
}

// The setting whose default shrinks the estimate most; the task's architecture when none does.
std::string mostResponsible(const ResolvedExperiment& experiment, double bytes) {
  std::string key = "task.architecture";
  for (const auto& variant : variantsOf(experiment.config)) {
    const double shrunk = bytesFor(variant.config, experiment);
    if (shrunk < bytes) {
      bytes = shrunk;
      key = variant.key;
    }
  }
  return key;
}

std::string gibText(double bytes) { return fmt::format("{:.3g} GiB", bytes / (1024.0 * 1024.0 * 1024.0)); }

}  // namespace

double estimatedBytes(const ResolvedExperiment& experiment) { return bytesFor(experiment.config, experiment); }

double machineMemoryBytes() { return static_cast<double>(physicalMemoryBytes()); }

void checkMemory(const ResolvedExperiment& experiment, double machine_bytes) {
  const double bytes = estimatedBytes(experiment);
  if (bytes <= machine_bytes) return;
  const std::string key = mostResponsible(experiment, bytes);
  const double parameters =
      experiment.task.size(experiment.config.task, experiment.config.training.batch_size).parameterCount();
  throw UserError(
      fmt::format("{}: this run needs about {} of memory per process for its model, a training step and its strategy "
                  "({:.3g} parameters), more than "
                  "this machine's {}; lower {} (or another setting that multiplies the model)",
                  key, gibText(bytes), parameters, gibText(machine_bytes), key));
}

}  // namespace gcrun::experiments
