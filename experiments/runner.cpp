#include "experiments/runner.h"

#include <algorithm>
#include <cstring>
#include <exception>
#include <thread>

#include <spdlog/spdlog.h>
#include <torch/torch.h>

#include "hyperparams/config_io.h"
#include "hyperparams/errors.h"
#include "outputs/rank_logger.h"
#include "outputs/run_files.h"
#include "reducers/process_group.h"

namespace gcrun::experiments {
namespace {

std::string resolveBackend(const ExperimentConfig& config) {
  if (config.distributed.backend != "auto") return config.distributed.backend;
  return config.device == "cuda" && reducers::ncclAvailable() ? "nccl" : "gloo";
}

c10::Device workerDevice(const ExperimentConfig& config, int local_rank) {
  if (config.device == "cuda") return c10::Device(c10::kCUDA, static_cast<c10::DeviceIndex>(local_rank));
  return c10::Device(c10::kCPU);
}

// Rank 0 picks the run directory; the others learn its path through the group.
std::string shareRunDirectory(const ExperimentConfig& config, const RunOptions& options,
                              reducers::Communicator& comm) {
  std::string path;
  if (comm.rank() == 0) path = outputs::createRunDirectory(options.output_dir, config.experiment);
  auto length = torch::tensor({static_cast<int64_t>(path.size())}, torch::kInt64);
  comm.broadcast(length, 0);
  auto bytes = torch::zeros({length.item<int64_t>()}, torch::kUInt8);
  if (comm.rank() == 0) std::memcpy(bytes.data_ptr(), path.data(), path.size());
  if (bytes.numel() > 0) comm.broadcast(bytes, 0);
  return std::string(static_cast<const char*>(bytes.data_ptr()), bytes.numel());
}

// Workers on one machine share its cores rather than each taking all of them.
void limitThreads() {
  const char* local_world = std::getenv("LOCAL_WORLD_SIZE");
  const int workers = local_world ? std::max(1, std::atoi(local_world)) : 1;
  const int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  torch::set_num_threads(std::max(1, cores / workers));
}

int64_t countParameters(tasks::Task& task) {
  int64_t count = 0;
  for (const auto& p : task.model().parameters()) count += p.numel();
  return count;
}

outputs::RunInfo startInfo(const ExperimentConfig& config, reducers::Communicator& comm, tasks::Task& task) {
  outputs::RunInfo info;
  info.experiment = config.experiment;
  info.gcrun_version = GCRUN_VERSION;
  info.torch_version = TORCH_VERSION;
  info.world_size = comm.size();
  info.backend = comm.backend();
  info.device = config.device;
  info.num_parameters = countParameters(task);
  info.synthetic_data = task.synthetic();
  info.status = "running";
  info.start_time = outputs::isoTimeNow();
  return info;
}

RunResult runCheckedWorker(const ExperimentConfig& config, const RunOptions& options,
                           reducers::Communicator& comm);

void checkReducer(const ExperimentConfig& config) {
  const auto& entry = reducers::reducerRegistry().at(config.reducer.name);
  if (config.optimizer.memory && !entry.factory.supports_memory) {
    throw UserError("optimizer.memory: reducer '" + entry.name +
                    "' is only meaningful without error feedback; set optimizer.memory=false");
  }
  const auto& allowed = entry.factory.granularities;
  if (std::find(allowed.begin(), allowed.end(), config.reducer.granularity) == allowed.end()) {
    std::string accepted;
    for (const auto& g : allowed) accepted += (accepted.empty() ? "" : ", ") + g;
    throw UserError("reducer.granularity: '" + config.reducer.granularity + "' is not supported by reducer '" +
                    entry.name + "'; it accepts: " + accepted);
  }
}

}  // namespace

void checkConfig(const ExperimentConfig& config) {
  tasks::taskRegistry().at(config.task.name);
  checkReducer(config);
  for (const auto& sink : config.output.sinks) outputs::sinkRegistry().at(sink);
  if (config.device == "cuda" && !torch::cuda::is_available()) {
    throw UserError("device: 'cuda' requested but no CUDA device is available to this LibTorch; use device=cpu");
  }
  if (resolveBackend(config) == "nccl" && !reducers::ncclAvailable()) {
    throw UserError("distributed.backend: 'nccl' is not available in this build (LibTorch without NCCL); use gloo");
  }
}

RunResult runWorker(const ExperimentConfig& config, const RunOptions& options) {
  checkConfig(config);  // before waiting for the other workers
  limitThreads();
  const auto world = reducers::worldFromEnvironment();
  const auto timeout = std::chrono::milliseconds(static_cast<int64_t>(config.distributed.timeout_s * 1000));
  auto comm = reducers::connect(world, resolveBackend(config), timeout);
  return runCheckedWorker(config, options, *comm);
}

RunResult runWorker(const ExperimentConfig& config, const RunOptions& options,
                    reducers::Communicator& comm) {
  checkConfig(config);
  return runCheckedWorker(config, options, comm);
}

namespace {

RunResult runCheckedWorker(const ExperimentConfig& config, const RunOptions& options,
                           reducers::Communicator& comm) {
  RunResult result;
  result.run_dir = shareRunDirectory(config, options, comm);
  const bool leader = comm.rank() == 0;
  outputs::installRankLogger(result.run_dir, comm.rank());

  const auto local_rank = reducers::worldFromEnvironment().local_rank;
  auto task = tasks::taskRegistry().at(config.task.name).factory(
      tasks::TaskContext{config.task, config.training.batch_size, static_cast<uint64_t>(config.seed),
                         workerDevice(config, local_rank)});
  auto reducer = reducers::reducerRegistry().at(config.reducer.name).factory.make(
      reducers::ReducerContext{comm, config.reducer, static_cast<uint64_t>(config.seed)});
  std::vector<std::unique_ptr<outputs::MetricSink>> sinks;
  if (leader) {
    for (const auto& name : config.output.sinks) {
      sinks.push_back(outputs::sinkRegistry().at(name).factory({result.run_dir, config}));
    }
  }

  auto info = startInfo(config, comm, *task);
  const auto path = [&](const char* file) { return result.run_dir + "/" + file; };
  if (leader) {
    outputs::writeFileAtomically(path("config.yaml"), hyperparams::toYaml(config));
    outputs::writeFileAtomically(path("run.json"), outputs::runInfoJson(info));
  }
  spdlog::info("{}: {} workers on {}, {} parameters, reducer {}, run directory {}", config.experiment,
               comm.size(), comm.backend(), info.num_parameters, config.reducer.name, result.run_dir);

  outputs::Timer timer;
  Trainer trainer(config, *task, comm, *reducer, timer, sinks);
  std::exception_ptr failure;
  try {
    result.training = trainer.run();
    info.status = "completed";
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
  for (const auto& kv : result.training.last_test) info.final_metrics["test." + kv.first] = kv.second;
  for (auto& sink : sinks) sink->close();
  if (leader) {
    outputs::writeFileAtomically(path("timer_summary.json"), timer.summaryJson());
    outputs::writeFileAtomically(path("run.json"), outputs::runInfoJson(info));
  }
  if (failure) std::rethrow_exception(failure);
  spdlog::info("done: {} steps, {:.1f} MB sent per worker, results in {}", info.steps,
               info.bits_sent / 8.0 / (1 << 20), result.run_dir);
  return result;
}

}  // namespace
}  // namespace gcrun::experiments
