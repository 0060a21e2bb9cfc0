#include "experiments/runner.h"

#include <malloc.h>
#include <signal.h>
#include <sys/resource.h>

#include <algorithm>
#include <csignal>
#include <cstring>
#include <exception>
#include <filesystem>
#include <thread>

#include <spdlog/spdlog.h>
#include <torch/torch.h>

#ifdef GCRUN_WITH_CUDA
#include <c10/cuda/CUDAFunctions.h>
#endif

#include "experiments/launch/launch_environment.h"
#include "experiments/run_info.h"
#include "experiments/simulated_workers.h"
#include "hyperparams/base/errors.h"
#include "hyperparams/base/text.h"
#include "hyperparams/base/thread_team.h"
#include "outputs/rank_logger.h"
#include "outputs/run_record.h"
#include "outputs/statistics.h"
#include "reducers/comm/process_group.h"
#include "reducers/granularity.h"

namespace gcrun::experiments {
namespace {

c10::Device workerDevice(const ExperimentConfig& config, int local_rank) {
  // More workers than GPUs share them round-robin (Gloo allows it; NCCL needs one GPU per rank).
  if (config.device == Device::cuda) {
    const int gpus = std::max<int>(1, static_cast<int>(torch::cuda::device_count()));
    return c10::Device(c10::kCUDA, static_cast<c10::DeviceIndex>(local_rank % gpus));
  }
  return c10::Device(c10::kCPU);
}

// Rank 0 picks the run directory; the others learn its path through the group.
std::string shareRunDirectory(const ExperimentConfig& config, const RunOptions& options,
                              comm::Communicator& comm) {
  std::string path;
  if (comm.rank() == 0) {
    // gcrun's launcher has made the directory already (and put workers.json in it).
    const char* launched = std::getenv(launch::kLauncherRunDirVariable);
    const bool made = options.resume || (launched != nullptr && options.output_dir == launched);
    path = made ? options.output_dir : outputs::createRunDirectory(options.output_dir, config.experiment);
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

// Set by SIGINT and SIGTERM while a worker trains; the trainer polls it between steps.
volatile std::sig_atomic_t stop_signal = 0;

void requestStop(int signal) { stop_signal = signal; }

// Turns the signals into a stop request for as long as it lives.
class StopOnSignals {
 public:
  StopOnSignals() {
    struct sigaction action {};
    action.sa_handler = requestStop;
    ::sigaction(SIGINT, &action, &previous_int_);
    ::sigaction(SIGTERM, &action, &previous_term_);
  }
  ~StopOnSignals() {
    ::sigaction(SIGINT, &previous_int_, nullptr);
    ::sigaction(SIGTERM, &previous_term_, nullptr);
  }
  StopOnSignals(const StopOnSignals&) = delete;
  StopOnSignals& operator=(const StopOnSignals&) = delete;

 private:
  struct sigaction previous_int_ {};
  struct sigaction previous_term_ {};
};

// What runWorker(config, options) adds to a worker over its own group.
struct WorkerHooks {
  bool stop_on_signals = false;
  SharedParameters* shared = nullptr;  // simulated workers: the process's shared parameters
  int logical = 0;                     // this simulated worker's index within its process
};

// Workers on one machine share its cores rather than each taking all of them; simulated workers
// count as workers, so a simulated run computes with the threads a real one would.
void limitThreads(const comm::WorldSpec& world, int simulated) {
  const int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  torch::set_num_threads(std::max(1, launch::threadsPerWorker(world, launch::processEnvironment(), cores) / simulated));
}

// Every rank says whether its input (`problem`: empty, or its own error) passed its checks, in one
// all-reduce, so that all stop together, each rank with its own error or `others`.
void agreeOnInput(comm::Communicator& comm, const std::string& problem, const std::string& others) {
  auto failed = torch::full({1}, problem.empty() ? 0.0f : 1.0f, torch::TensorOptions().device(comm.device()));
  comm.allreduceSum(failed);
  if (!problem.empty()) throw UserError(problem);
  if (failed.item<float>() > 0) throw UserError(others);
}

// Every rank loads and checks its own checkpoint file, and all agree (one all-reduce) before any
// file of the run is touched: a bad file on one rank leaves the run's record as it was.
void resumeEveryRank(Trainer& trainer, CheckpointStore& checkpoints, const std::string& run_dir,
                     comm::Communicator& comm, std::unique_lock<std::mutex>* turn) {
  std::string problem;
  try {
    const auto state = checkpoints.loadLatest();
    if (!state) throw UserError("--resume " + run_dir + ": it has no complete checkpoint (checkpoints/manifest.json)");
    if (turn) turn->lock();  // simulated workers restore their shared parameters one at a time
    trainer.resumeFrom(*state, run_dir + "/checkpoints");
    if (turn) turn->unlock();
  } catch (const UserError& e) {
    if (turn && turn->owns_lock()) turn->unlock();
    problem = e.what();
  }
  agreeOnInput(comm, problem, "--resume " + run_dir + ": another rank's checkpoint failed its checks (its message says why)");
}

RunResult runCheckedWorker(const ResolvedExperiment& experiment, const RunOptions& options, comm::Communicator& comm,
                           int local_rank, const WorkerHooks& hooks);

// The process's logical workers as threads over their own ranks; returns logical worker 0's
// result. A failure ends the others (their waits throw, their collectives lose a peer) and the
// failing worker's own error is what is rethrown.
RunResult runSimulated(const ResolvedExperiment& experiment, const RunOptions& options, const comm::WorldSpec& world,
                       std::vector<std::unique_ptr<comm::Communicator>>& comms) {
  const int workers = static_cast<int>(comms.size());
  SharedParameters shared;
  std::vector<RunResult> results(workers);
  std::vector<std::exception_ptr> failures(workers);
  runThreadTeam(
      workers,
      [&](int w) {
        try {
          results[w] = runCheckedWorker(experiment, options, *comms[w], world.local_rank, WorkerHooks{true, &shared, w});
        } catch (const std::exception&) {
          failures[w] = std::current_exception();
          shared.fail();
          comms[w].reset();  // its peers' collectives fail now rather than at the timeout
        }
      },
      "distributed.simulated_workers=" + std::to_string(workers));
  std::exception_ptr first;
  for (const auto& failure : failures) {
    if (!failure) continue;
    try {
      std::rethrow_exception(failure);
    } catch (const AnotherWorkerFailed&) {
      if (!first) first = failure;
    } catch (...) {
      std::rethrow_exception(failure);
    }
  }
  if (first) std::rethrow_exception(first);
  return results.front();
}

}  // namespace

RunResult runWorker(const ResolvedExperiment& experiment, const RunOptions& options, const comm::WorldSpec& world) {
  const auto& config = experiment.config;
  const bool simulated = config.distributed.simulated_workers > 1;
  limitThreads(world, static_cast<int>(config.distributed.simulated_workers));
#ifdef GCRUN_WITH_CUDA
  // NCCL and the trainer's small collectives use the current device: make it this worker's GPU.
  if (config.device == Device::cuda) c10::cuda::set_device(workerDevice(config, world.local_rank).index());
#endif
  const auto timeout = std::chrono::milliseconds(static_cast<int64_t>(config.distributed.timeout_s * 1000));
#ifdef __GLIBC__
  // glibc gives each thread its own heap, which keeps what one logical worker's passes freed from
  // the next one's: 16 simulated workers doubled the process's memory. One heap is shared instead.
  if (simulated) ::mallopt(M_ARENA_MAX, 1);
#endif
  // The group first: rank 0 hosts the store that the peer monitor then connects to.
  std::unique_ptr<comm::Communicator> comm;
  std::vector<std::unique_ptr<comm::Communicator>> simulated_comms;
  if (simulated) {
    simulated_comms = comm::connectSimulated(world, static_cast<int>(config.distributed.simulated_workers), timeout);
  } else {
    comm = comm::connect(world, nameOf(experiment.backend), timeout);
  }
  if (world.rank == 0 && world.world_size > 1 && world.store_file.empty() && !world.agent_store &&
      world.run_token.empty()) {
    spdlog::warn("the store at {}:{} accepts any client that reaches the port: set GCRUN_RUN_TOKEN to the same "
                 "secret on every node to keep other clients out of the group",
                 world.master_addr, world.master_port);
  }
  auto monitor = comm::monitorPeers(world, timeout);
  // Until this worker returns, the signals only ask it to stop: the launcher's SIGTERM after a
  // peer died must not cut short the report of which peer it was.
  stop_signal = 0;
  StopOnSignals stop_on_signals;
  try {
    if (simulated) return runSimulated(experiment, options, world, simulated_comms);
    return runCheckedWorker(experiment, options, *comm, world.local_rank, WorkerHooks{true});
  } catch (const UserError&) {
    throw;
  } catch (const TrainingDiverged&) {
    throw;
  } catch (const std::exception& e) {
    // Most likely a collective that failed because a peer died: name the peer.
    if (!monitor) throw;
    const std::string failed_peers = monitor->diagnose();
    if (failed_peers.empty()) throw;
    throw std::runtime_error(failed_peers + "; this worker stops (" + firstLine(e.what()) + ")");
  }
}

RunResult runWorker(const ResolvedExperiment& experiment, const RunOptions& options, comm::Communicator& comm,
                    int local_rank) {
  return runCheckedWorker(experiment, options, comm, local_rank, WorkerHooks{});
}

namespace {

RunResult runCheckedWorker(const ResolvedExperiment& experiment, const RunOptions& options,
                           comm::Communicator& comm, int local_rank, const WorkerHooks& hooks) {
  const auto& config = experiment.config;
  RunResult result;
  const bool leader = comm.rank() == 0;
  // The task and the reducer come first: bad input (a data file, the architecture, a batch larger
  // than a worker's data, a reducer's setting) stops every rank before the run directory exists.
  // Simulated workers build their models in turn, then all but the first give up their parameters
  // for the first one's.
  auto turn = hooks.shared ? std::unique_lock<std::mutex>(hooks.shared->compute()) : std::unique_lock<std::mutex>();
  std::unique_ptr<tasks::Task> task;
  std::unique_ptr<reducers::Reducer> reducer;
  std::string problem;
  try {
    task = experiment.task.make(
        tasks::TaskContext{config.task, config.training.batch_size, static_cast<uint64_t>(config.seed),
                           workerDevice(config, local_rank)});
    batchesPerEpochOf(*task, {comm.rank(), comm.size()}, config.training);
    reducer = reducers::withGranularity(
        experiment.reducer.make(
            reducers::ReducerContext{comm, config.reducer, static_cast<uint64_t>(config.seed),
                                     reducers::parametersOf(task->model())}),
        config.reducer);
  } catch (const UserError& e) {
    if (hooks.shared) {
      hooks.shared->fail();  // the process's other logical workers stop too
      throw;
    }
    problem = e.what();
  }
  if (hooks.shared) {
    turn.unlock();
    hooks.logical == 0 ? hooks.shared->publish(task->model()) : hooks.shared->adopt(task->model());
  } else {
    agreeOnInput(comm, problem, "another rank's input failed its checks (its message says why)");
  }
  result.run_dir = shareRunDirectory(config, options, comm);
  // Simulated workers share the process's logger (spdlog's default): logical worker 0's.
  if (!hooks.shared || hooks.logical == 0) outputs::installRankLogger(result.run_dir, comm.rank());
  std::vector<std::unique_ptr<outputs::MetricSink>> sinks;
  outputs::Timer timer;
#ifdef GCRUN_WITH_CUDA
  // Kernels run asynchronously: without this the timer would charge them to whichever scope waits.
  if (config.device == Device::cuda) timer.setSynchronize([] { torch::cuda::synchronize(); });
#endif
  Trainer trainer(config, *task, comm, *reducer, timer, sinks);
  if (hooks.shared) trainer.shareParameters(hooks.shared, hooks.logical == 0);
  CheckpointStore checkpoints(result.run_dir, comm, comm.device());
  trainer.setCheckpoints(&checkpoints);
  if (options.resume) {
    resumeEveryRank(trainer, checkpoints, result.run_dir, comm, hooks.shared ? &turn : nullptr);
    if (trainer.finished()) {
      spdlog::info("{}: its checkpoint of step {} is where the run ends (training.epochs, training.max_steps): "
                   "nothing to do, nothing changed", result.run_dir, checkpoints.lastStep());
      return result;
    }
    spdlog::info("resuming {} from the checkpoint of step {}", result.run_dir, checkpoints.lastStep());
  }
  if (leader) {
    for (const auto& sink : experiment.sinks) sinks.push_back(sink.make({result.run_dir, config, options.resume}));
  }

  auto info = startInfo(config, comm, *task);
  const outputs::RunRecord record(result.run_dir, leader);
  record.start(experiment.config_yaml, info);
  const std::string simulated = info.simulated_workers == 1 ? "" : fmt::format(
      " ({} processes x {} simulated, their compute in turn)", info.processes, info.simulated_workers);
  spdlog::info("{}: {} workers{} on {}, {} parameters, reducer {}, run directory {}", config.experiment, comm.size(),
               simulated, comm.backend(), info.num_parameters, config.reducer.name, result.run_dir);
  if (config.task.synthetic) {
    spdlog::info("synthetic data: random samples of the real shapes, evaluated on a small synthetic test split "
                 "(1,000 samples, or a fifth of task.synthetic_samples; for language models 50,000 tokens)");
  }

  std::exception_ptr failure;
  try {
    if (hooks.stop_on_signals) trainer.setStopRequest([] { return stop_signal != 0; });
    result.training = trainer.run();
    info.peak_rss_mib = gatherPeakRss(comm);
    result.stop_signal = result.training.stopped ? static_cast<int>(stop_signal) : 0;
    info.status = result.training.stopped ? "interrupted" : "completed";
  } catch (const std::exception& e) {
    failure = std::current_exception();
    info.status = "failed";
    info.error = e.what();
  }
  info.end_time = outputs::isoTimeNow();
  info.steps = result.training.steps;
  info.epochs_done = result.training.epochs;
  info.bits_sent = result.training.bits;
  for (const auto& kv : result.training.last_train) info.final_metrics["train." + kv.first] = kv.second;
  for (const auto& kv : result.training.last_validation) {
    info.final_metrics["validation." + kv.first] = kv.second;
  }
  for (const auto& kv : result.training.last_test) info.final_metrics["test." + kv.first] = kv.second;
  for (auto& sink : sinks) sink->close();
  if (hooks.shared) info.compute_per_batch_ms = computePerBatchMs(timer);
  info.paper = record.finish(config.paper, info, timer);
  if (failure) std::rethrow_exception(failure);
  if (result.training.stopped) {
    // A worker that got no signal itself stops with the one that did (the stop is agreed on).
    const std::string cause = result.stop_signal != 0 ? "by signal " + std::to_string(result.stop_signal)
                                                      : "with a worker that received a stop signal";
    spdlog::warn("stopped {} after step {}; checkpoint written, continue with --resume {}", cause, info.steps,
                 result.run_dir);
    return result;
  }
  logPaperComparison(info.paper);
  spdlog::info("done: {} steps, {:.1f} MB sent per worker, results in {}", info.steps,
               info.bits_sent / 8.0 / (1 << 20), result.run_dir);
  return result;
}

}  // namespace
}  // namespace gcrun::experiments
