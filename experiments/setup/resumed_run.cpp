#include "experiments/setup/resumed_run.h"

#include <algorithm>
#include <filesystem>
#include <thread>

#include <yaml-cpp/yaml.h>

#include "experiments/training/checkpoint.h"
#include "hyperparams/base/errors.h"
#include "outputs/files/safe_files.h"
#include "outputs/run_directory.h"

namespace gcrun::experiments {
namespace {

// The settings a resumed run may change: how long it goes on, and how it evaluates, records and
// checkpoints. Anything else would not fit the state its checkpoint holds.
bool mayChangeOnResume(const std::string& key) {
  for (const char* prefix : {"training.epochs", "training.max_steps", "evaluation.", "checkpoint.", "output.",
                             "distributed.timeout_s", "description", "paper."}) {
    if (key.rfind(prefix, 0) == 0) return true;
  }
  return false;
}

std::string flowYaml(const YAML::Node& node) {
  YAML::Emitter out;
  out << YAML::Flow << node;
  return out.c_str();
}

}  // namespace

ResumedRun resumedRunOf(const ExperimentRequest& request) {
  ResumedRun resume{request.resume_dir, std::nullopt};
  const auto& dir = resume.dir;
  if (!request.config_file.empty()) {
    throw UserError("--resume: the settings come from " + resume.configFile() + "; drop --config");
  }
  if (!request.output_dir.empty()) throw UserError("--resume: the run continues in " + dir + "; drop --output-dir");
  if (!std::filesystem::is_directory(dir)) {
    throw UserError("--resume " + dir + ": no such directory; expected the --output-dir of an earlier run");
  }
  if (const auto why = files::notRegularFileReason(resume.configFile()); !why.empty()) {
    throw UserError("--resume " + dir + ": not a gcrun run directory (its config.yaml: " + why +
                    "); expected the --output-dir of an earlier run");
  }
  resume.saved_world_size = CheckpointStore::savedWorldSize(dir);
  return resume;
}

void checkResumedSettings(const ResumedRun& resume, const ExperimentConfig& saved, const ExperimentConfig& config,
                          const hyperparams::ConfigKeys& keys) {
  for (const auto& spec : keys.keys()) {
    if (mayChangeOnResume(spec.key)) continue;
    const auto now = flowYaml(spec.get(config));
    const auto before = flowYaml(spec.get(saved));
    if (now != before) {
      throw UserError("--resume " + resume.dir + ": " + spec.key + " is " + now + " here but " + before + " in " +
                      resume.configFile() +
                      ", whose checkpoint holds that run's state; a resumed "
                      "run may change only training.epochs, training.max_steps, evaluation.*, checkpoint.*, "
                      "output.* and distributed.timeout_s");
    }
  }
}

std::string ResumedRun::configFile() const { return outputs::RunDirectory(dir).pathOf(outputs::run_files::kConfig); }

launch::LaunchOptions ResumedRun::launchOf(launch::LaunchOptions given, int simulated) const {
  if (given.nnodes != 1 || given.nproc_per_node_given || !saved_world_size) return given;
  const int saved = *saved_world_size;
  const int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  if (saved % simulated == 0 && saved / simulated <= std::min(cores, launch::kMaxProcessesPerNode)) {
    given.nproc_per_node = saved / simulated;
  }
  return given;
}

void ResumedRun::checkStart(const ExperimentConfig& config, int world_size, bool checks_checkpoint) const {
  if (checks_checkpoint && !saved_world_size) {
    throw UserError("--resume " + dir + ": no complete checkpoint there (checkpoints/manifest.json is missing)");
  }
  if (checks_checkpoint && *saved_world_size != world_size) {
    const auto saved = std::to_string(*saved_world_size);
    throw UserError("--resume " + dir + ": its checkpoint was written by " + saved + " workers, this launch has " +
                    std::to_string(world_size) + "; use --nnodes and --nproc-per-node that multiply to " + saved);
  }
  outputs::RunDirectory(dir).checkResumable(config.output.sinks, config.output.layer_stats_every_steps > 0, world_size);
}

void ResumedRun::lock() const {
  try {
    outputs::RunDirectory(dir).lockForProcess();
  } catch (const UserError& e) {
    throw UserError("--resume " + dir + ": " + e.what());
  }
}

}  // namespace gcrun::experiments
