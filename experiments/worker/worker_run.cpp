#include "experiments/worker/worker_run.h"

#include <cstring>
#include <exception>
#include <filesystem>

#include <spdlog/spdlog.h>
#include <torch/torch.h>
#include <yaml-cpp/yaml.h>

#include "experiments/setup/registered_keys.h"
#include "experiments/trace/traced_communicator.h"
#include "experiments/worker/run_info.h"
#include "hyperparams/base/errors.h"
#include "hyperparams/base/units.h"
#include "outputs/builtin_sinks.h"
#include "outputs/rank_logger.h"
#include "outputs/run_directory.h"
#include "outputs/run_record.h"
#include "reducers/comm/agreement.h"
#include "reducers/granularity.h"

namespace gcrun::experiments {
namespace {

// Rank 0 picks the run directory; the others learn its path through the group.
std::string shareRunDirectory(const ResolvedExperiment& experiment, const RunOptions& options,
                              comm::Communicator& comm) {
  std::string path;
  if (comm.rank() == 0 && experiment.resume) {
    path = experiment.resume->dir;
  } else if (comm.rank() == 0) {
    path = options.launcher_made
               ? options.output_dir
               : outputs::RunDirectory::create(options.output_dir, experiment.config.experiment).path();
  }
  auto length = torch::tensor({static_cast<int64_t>(path.size())}, torch::kInt64);
  comm.broadcast(length, 0);
  auto bytes = torch::zeros({length.item<int64_t>()}, torch::kUInt8);
  if (comm.rank() == 0) std::memcpy(bytes.data_ptr(), path.data(), path.size());
  if (bytes.numel() > 0) comm.broadcast(bytes, 0);
  path.assign(static_cast<const char*>(bytes.data_ptr()), bytes.numel());
  std::filesystem::create_directories(path);  // a no-op unless this rank is on another machine
  return path;
}

// The shared run directory, with this worker's log in it when its role writes the process's log.
std::string openRunDirectory(const ResolvedExperiment& experiment, const RunOptions& options, comm::Communicator& comm,
                             const WorkerRole& role) {
  auto run_dir = shareRunDirectory(experiment, options, comm);
  if (role.logs()) outputs::installRankLogger(run_dir, comm.rank());
  return run_dir;
}

// Every rank loads and checks its own checkpoint file, and all agree (one all-reduce) before any
// file of the run is touched: a bad file on one rank leaves the run's record as it was. Rank 0
// then takes the lock, if it is this process's to take; another gcrun holding it stops every rank.
// The rest of the resume (the directory, its settings, the world size, the run files) was
// resolved and checked before any worker started (ResumedRun).
void resumeEveryRank(Trainer& trainer, CheckpointStore& checkpoints, const ResumedRun& resume,
                     const RunOptions& options, comm::Communicator& comm, WorkerRole& role) {
  const std::string& run_dir = resume.dir;
  std::string problem;
  try {
    const auto checkpoint = checkpoints.loadLatest(trainer.checkpointBytes());
    if (!checkpoint) {
      throw UserError("--resume " + run_dir + ": it has no complete checkpoint (checkpoints/manifest.json)");
    }
    auto turn = role.turn();  // simulated workers restore their shared parameters one at a time
    trainer.resumeFrom(*checkpoint);
  } catch (const UserError& e) {
    problem = e.what();
  }
  agreeOnInput(comm, problem, "--resume " + run_dir + ": another rank's checkpoint failed its checks");
  // Each rank read its own file: a crafted one could hold another global model or position.
  comm::agreeOn(comm, trainer.sharedState(), "--resume " + run_dir + ": the ranks' checkpoints");
  try {
    if (comm.rank() == 0 && options.lock_resumed) options.lock_resumed();
  } catch (const UserError& e) {
    problem = e.what();
  }
  agreeOnInput(comm, problem, "--resume " + run_dir + ": rank 0 could not lock it");
}

// What every worker must hold alike before its first collective: each configuration key and its
// value, seed included. All but task.data_dir, a path on each worker's own machine (each worker's
// task checks the data it finds there). What is the worker's own is no key at all: its rank, the
// output or resumed directory, the plugins' paths, and `sources` (where each value came from).
comm::NamedValues settingsToAgreeOn(const ExperimentConfig& config) {
  comm::NamedValues values;
  const auto keys = configKeys();
  for (const auto& spec : keys.keys()) {
    if (spec.key == "task.data_dir") continue;
    YAML::Emitter value;
    value << YAML::Flow << spec.get(config);
    values.emplace_back(spec.key, value.c_str());
  }
  return values;
}

// Workers started apart (torchrun, mpirun, srun, or by hand) may have been given other settings:
// they would train apart, or die inside Gloo on collectives of different sizes. Every rank
// compares first, before any collective that depends on the settings.
void agreeOnSettings(const ExperimentConfig& config, comm::Communicator& comm) {
  const auto line = comm::disagreement(comm, settingsToAgreeOn(config), "the resolved configuration");
  if (!line.empty()) {
    throw UserError(line + "; start every worker with the same preset, --config and --set (or --resolved file)");
  }
}

std::unique_ptr<comm::Communicator> tracedIfOn(comm::Communicator& comm, trace::Recorder& recorder,
                                               trace::WorkerTrace& trace) {
  if (!recorder.enabled()) return nullptr;
  return std::make_unique<TracedCommunicator>(comm, trace);
}

// The resolved experiment's reducer (granularity applied) over a communicator, for any of the
// model's parameters.
ReducerOverMaker reducerMakerOver(const ResolvedExperiment& experiment) {
  return [&experiment](comm::Communicator& comm, std::vector<reducers::ParameterInfo> parameters) {
    const auto& config = experiment.config;
    return reducers::withGranularity(
        experiment.reducer.make(
            reducers::ReducerContext{comm, config.reducer, static_cast<uint64_t>(config.seed), std::move(parameters)}),
        config.reducer);
  };
}

// The same over `comm`.
ReducerMaker reducerMaker(const ResolvedExperiment& experiment, comm::Communicator& comm) {
  return [make = reducerMakerOver(experiment), &comm](std::vector<reducers::ParameterInfo> parameters) {
    return make(comm, std::move(parameters));
  };
}

std::function<bool()> stopRequestOf(const StopSignal& stop_signal) {
  if (!stop_signal) return {};
  return [stop_signal] { return stop_signal() != 0; };
}

}  // namespace

WorkerRun::Inputs WorkerRun::buildInputs(const ResolvedExperiment& experiment, comm::Communicator& comm,
                                         comm::Communicator& reducer_comm, c10::Device device, WorkerRole& role) {
  const auto& config = experiment.config;
  agreeOnSettings(config, comm);
  Inputs inputs;
  std::string problem;
  {
    auto turn = role.turn();  // simulated workers build their models in turn
    try {
      inputs.task = experiment.task.make(
          tasks::TaskContext{config.task, config.training.batch_size, static_cast<uint64_t>(config.seed), device});
      inputs.batches_per_epoch =
          tasks::batchesPerEpochOf(*inputs.task, {comm.rank(), comm.size()}, config.training.batch_size);
      inputs.reducer = reducerMaker(experiment, reducer_comm)(reducers::parametersOf(inputs.task->model()));
    } catch (const UserError& e) {
      problem = e.what();
    }
  }
  role.settleInput(comm, problem, inputs.task.get());
  return inputs;
}

WorkerRun::WorkerRun(const ResolvedExperiment& experiment, const RunOptions& options, comm::Communicator& comm,
                     c10::Device device, WorkerRole& role, StopSignal stop_signal, trace::Recorder& trace)
    : experiment_(experiment),
      config_(experiment.config),
      options_(options),
      comm_(comm),
      role_(role),
      stop_signal_(std::move(stop_signal)),
      leader_(comm.rank() == 0),
      trace_(trace.worker(comm.rank())),
      traced_comm_(tracedIfOn(comm, trace, trace_)),
      inputs_(buildInputs(experiment, comm, traced_comm_ ? *traced_comm_ : comm, device, role)),
      run_dir_(openRunDirectory(experiment, options, comm, role)),
      checkpoints_(run_dir_, comm, comm.device()),
      trainer_(TrainerDeps{config_, *inputs_.task, inputs_.batches_per_epoch, comm, *inputs_.reducer,
                           traced_comm_ ? *traced_comm_ : comm, experiment.reducer.lossless,
                           reducerMaker(experiment, traced_comm_ ? *traced_comm_ : comm), reducerMakerOver(experiment),
                           experiment.sync, experiment.optimizer, timer_, checkpoints_, role,
                           stopRequestOf(stop_signal_), trace_}),
      record_(run_dir_, leader_) {
  trace.setRunDirectory(run_dir_);
#ifdef GCRUN_WITH_CUDA
  // Kernels run asynchronously: without this the timer would charge them to whichever scope waits.
  if (config_.device == Device::cuda) timer_.setSynchronize([] { torch::cuda::synchronize(); });
#endif
}

void WorkerRun::logStart(const outputs::RunInfo& info) const {
  const std::string simulated = info.simulated_workers == 1
                                    ? ""
                                    : fmt::format(" ({} processes x {} simulated, their compute in turn)",
                                                  info.processes, info.simulated_workers);
  spdlog::info("{}: {} workers{} on {}, {} parameters, reducer {}, run directory {}", config_.experiment, comm_.size(),
               simulated, comm_.backend(), info.num_parameters, config_.reducer.name, run_dir_);
  if (const auto warning = errorFeedbackWarning(experiment_); !warning.empty()) spdlog::warn(warning);
  if (config_.task.synthetic) {
    spdlog::info(
        "synthetic data: random samples of the real shapes, evaluated on small synthetic held-out splits; its "
        "metrics say nothing about the task");
  }
}

std::exception_ptr WorkerRun::train(RunResult& result, outputs::RunInfo& info, const TrainerOutputs& outputs) {
  std::exception_ptr failure;
  try {
    result.training = trainer_.run(outputs);
    info.peak_rss_mib = gatherPeakRss(comm_);
    result.stop_signal = result.training.stopped && stop_signal_ ? stop_signal_() : 0;
    info.status = result.training.stopped ? outputs::RunStatus::interrupted : outputs::RunStatus::completed;
  } catch (const std::exception& e) {
    failure = std::current_exception();
    info.status = outputs::RunStatus::failed;
    info.error = e.what();
  }
  try {
    for (auto& sink : outputs.sinks) sink->close();
  } catch (const std::exception& e) {
    // A sink's last lines that did not fit on the disk fail the run; an earlier failure says more.
    if (!failure) {
      failure = std::current_exception();
      info.status = outputs::RunStatus::failed;
      info.error = e.what();
    }
  }
  return failure;
}

RunResult WorkerRun::run() {
  RunResult result;
  result.run_dir = run_dir_;
  if (experiment_.resume) {
    resumeEveryRank(trainer_, checkpoints_, *experiment_.resume, options_, comm_, role_);
    if (trainer_.finished()) {
      spdlog::info(
          "{}: its checkpoint of step {} is where the run ends (training.epochs, training.max_steps): "
          "nothing to do, nothing changed",
          run_dir_, checkpoints_.lastStep());
      return result;
    }
    spdlog::info("resuming {} from the checkpoint of step {}", run_dir_, checkpoints_.lastStep());
  }
  std::vector<std::unique_ptr<outputs::MetricSink>> sinks;
  if (leader_) {
    for (const auto& sink : experiment_.sinks)
      sinks.push_back(sink.make({run_dir_, config_, experiment_.resume.has_value(), comm_.size()}));
  }
  auto info = startInfo(config_, comm_, *inputs_.task);
  record_.start(experiment_.config_yaml, info);
  logStart(info);

  const std::exception_ptr failure = train(result, info, TrainerOutputs{sinks});
  info.end_time = outputs::isoTimeNow();
  info.steps = result.training.steps;
  info.epochs_done = result.training.epochs;
  info.bits_sent = result.training.bits;
  info.syncs = result.training.syncs;
  if (info.syncs > 0) info.bits_per_sync = static_cast<double>(result.training.sync_bits) / info.syncs;
  for (const auto& kv : result.training.last_train) info.final_metrics["train." + kv.first] = kv.second;
  for (const auto& kv : result.training.last_validation) {
    info.final_metrics["validation." + kv.first] = kv.second;
  }
  for (const auto& kv : result.training.last_test) info.final_metrics["test." + kv.first] = kv.second;
  info.compute_per_batch_ms = role_.computePerBatchMs(timer_);
  info.paper = record_.finish(config_.paper, info, timer_);
  if (failure) std::rethrow_exception(failure);
  if (result.training.stopped) {
    // A worker that got no signal itself stops with the one that did (the stop is agreed on).
    const std::string cause = result.stop_signal != 0 ? "by signal " + std::to_string(result.stop_signal)
                                                      : "with a worker that received a stop signal";
    spdlog::warn("stopped {} after step {}; checkpoint written, continue with --resume {}", cause, info.steps,
                 run_dir_);
    return result;
  }
  logPaperComparison(info.paper);
  const std::string sent =
      info.world_size == 1 ? outputs::sentText(info.bits_sent, 1)
                           : units::mibText(units::mibOfBits(static_cast<double>(info.bits_sent))) + " sent per worker";
  spdlog::info("done: {} steps, {}, results in {}", info.steps, sent, run_dir_);
  return result;
}

}  // namespace gcrun::experiments
