#pragma once

#include <exception>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <c10/core/Device.h>

#include "experiments/setup/resolved_experiment.h"
#include "experiments/sync/synchronizer.h"
#include "experiments/training/checkpoint.h"
#include "experiments/training/trainer.h"
#include "experiments/training/worker_role.h"
#include "hyperparams/config.h"
#include "outputs/metric_sink.h"
#include "outputs/run_record.h"
#include "outputs/timer.h"
#include "outputs/trace/recorder.h"
#include "reducers/comm/communicator.h"
#include "reducers/reducer.h"
#include "tasks/task.h"

namespace gcrun::experiments {

struct RunOptions {
  // A new run's directory; empty: a new folder under ./runs/ (see outputs::RunDirectory::create).
  // A resumed run continues in its own (the experiment's `resume`) from its latest complete
  // checkpoint (see CheckpointStore).
  std::string output_dir;
  // output_dir exists already: gcrun's launcher made it for its workers.
  bool launcher_made = false;
  // A resume's lock on output_dir, when this process takes it: rank 0 calls it once every rank's
  // checkpoint passed its checks, before anything of the run is written, so that a refused resume
  // leaves no lock file behind. Empty: the lock is held already (gcrun's launcher took it).
  std::function<void()> lock_resumed;
};

struct RunResult {
  std::string run_dir;
  TrainingResult training;
  // SIGINT or SIGTERM when one stopped the run (after a final checkpoint); 0 otherwise.
  int stop_signal = 0;
};

// The signal that asked this process to stop (SIGINT, SIGTERM), or 0 while none has.
using StopSignal = std::function<int()>;

// One worker's run over its group, from its task to its run record. Rank 0 creates the run
// directory and tells the others (a rank on another machine creates the same path there for its
// log and checkpoint files); every rank logs to its own file, unless its role says its process's
// log is another worker's; rank 0 writes config.yaml, run.json, timer_summary.json and the sinks'
// files.
class WorkerRun {
 public:
  // Builds the task on `device` and the reducer; bad input on any rank (a data file, the
  // architecture, a batch larger than a worker's data, a reducer's setting) is a UserError on
  // every rank before the run directory exists. Then the run directory, the log, the checkpoint
  // store and the trainer. `stop_signal` empty: nothing stops the run. `trace` is the process's
  // output.trace recorder, which learns the run directory here (its file is the caller's to write,
  // once all of the process's workers are done). The references outlive it.
  WorkerRun(const ResolvedExperiment& experiment, const RunOptions& options, comm::Communicator& comm,
            c10::Device device, WorkerRole& role, StopSignal stop_signal, trace::Recorder& trace);

  // With the experiment's `resume`, the checkpoint is read and checked before anything in the directory is
  // written. Then trains; run.json records "failed" and the error when training throws, and the
  // error is rethrown.
  RunResult run();

 private:
  // The task and the reducer, built and agreed on by every rank.
  struct Inputs {
    std::unique_ptr<tasks::Task> task;
    int64_t batches_per_epoch = 0;  // the task's for this worker's shard, checked (tasks::batchesPerEpochOf)
    std::unique_ptr<reducers::Reducer> reducer;
  };
  // The reducer talks through `reducer_comm` (comm itself, or comm traced).
  static Inputs buildInputs(const ResolvedExperiment& experiment, comm::Communicator& comm,
                            comm::Communicator& reducer_comm, c10::Device device, WorkerRole& role);
  void logStart(const outputs::RunInfo& info) const;
  // Trains into `outputs`, then closes its sinks; returns the failure, if any: training's, or a
  // sink's that could not write its last lines.
  std::exception_ptr train(RunResult& result, outputs::RunInfo& info, const TrainerOutputs& outputs);

  const ResolvedExperiment& experiment_;
  const ExperimentConfig& config_;
  const RunOptions& options_;
  comm::Communicator& comm_;
  WorkerRole& role_;
  StopSignal stop_signal_;
  const bool leader_;
  trace::WorkerTrace& trace_;
  // Under output.trace, comm_ as the reducer sees it (TracedCommunicator); null otherwise.
  std::unique_ptr<comm::Communicator> traced_comm_;
  Inputs inputs_;
  const std::string run_dir_;
  outputs::Timer timer_;
  CheckpointStore checkpoints_;
  Trainer trainer_;
  const outputs::RunRecord record_;
};

}  // namespace gcrun::experiments
