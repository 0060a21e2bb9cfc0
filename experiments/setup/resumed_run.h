#pragma once

#include <optional>
#include <string>

#include "experiments/launch/launcher.h"
#include "experiments/setup/request.h"
#include "hyperparams/config.h"
#include "hyperparams/config_keys.h"

namespace gcrun::experiments {

// What `--resume DIR` resolves to, once (resolveExperiment): the run directory and what its
// checkpoint says, with every refusal of a resume in this one place. The launcher, the run
// directory and the workers take it from the resolved experiment instead of checking again; only
// the ranks' agreement on their checkpoint files is left to the workers (worker_run.cpp).
struct ResumedRun {
  std::string dir;
  // The workers its checkpoint was written by (checkpoints/manifest.json); nothing: DIR holds no
  // complete checkpoint on this machine, which only the node that checks it refuses (checkStart).
  std::optional<int> saved_world_size;

  // Its settings: the run's config.yaml.
  std::string configFile() const;

  // This machine's launch: on one machine without --nproc-per-node, as many worker processes as
  // the checkpoint was written by (over `simulated` workers each), up to one per core: the count
  // comes from the run's manifest, and a crafted one must not start hundreds of processes. Beyond
  // that checkStart refuses, asking for the flag.
  launch::LaunchOptions launchOf(launch::LaunchOptions given, int simulated) const;

  // Every refusal of resuming `config` with `world_size` workers, before the lock is taken or a
  // log written, so that a refused resume leaves the directory as it was: no checkpoint, or one of
  // another world size (where `checks_checkpoint`), and a run file the resumed run would append to
  // that is not its own (RunDirectory::checkResumable).
  void checkStart(const ExperimentConfig& config, int world_size, bool checks_checkpoint) const;

  // Holds the run directory's lock for the rest of this process's life, and so for its workers
  // (RunDirectory::lockForProcess); a planted symlink at the lock file is refused.
  void lock() const;
};

// The resume that `request` asks for, before its settings are read: no --config or --output-dir
// beside it, DIR a run directory with a config.yaml, and its checkpoint's manifest read (a
// UserError when it is unreadable).
ResumedRun resumedRunOf(const ExperimentRequest& request);

// Refuses a --set over the run's own settings (`saved`) that changes what its checkpoint holds:
// a resumed run may change only how long it goes on and how it evaluates, records and checkpoints.
void checkResumedSettings(const ResumedRun& resume, const ExperimentConfig& saved, const ExperimentConfig& config,
                          const hyperparams::ConfigKeys& keys);

}  // namespace gcrun::experiments
