#include "experiments/worker/run_info.h"

#include <sys/resource.h>

#include <spdlog/spdlog.h>
#include <torch/torch.h>

#include "experiments/sync/synchronizer.h"
#include "outputs/statistics.h"
#include "reducers/reducer.h"

namespace gcrun::experiments {
namespace {

int64_t countParameters(tasks::Task& task) {
  int64_t count = 0;
  for (const auto& p : task.model().parameters()) count += p.numel();
  return count;
}

}  // namespace

std::vector<double> gatherPeakRss(comm::Communicator& comm) {
  struct rusage usage {};
  ::getrusage(RUSAGE_SELF, &usage);
  auto mine = torch::full({1}, static_cast<double>(usage.ru_maxrss) / 1024.0,
                          torch::TensorOptions().dtype(torch::kFloat64).device(comm.device()));
  std::vector<double> peaks;
  for (const auto& peak : comm.allgather(mine)) peaks.push_back(peak.cpu().item<double>());
  return peaks;
}

outputs::RunInfo startInfo(const ExperimentConfig& config, comm::Communicator& comm, tasks::Task& task) {
  outputs::RunInfo info;
  info.experiment = config.experiment;
  info.gcrun_version = GCRUN_VERSION;
  info.torch_version = TORCH_VERSION;
  info.world_size = comm.size();
  info.simulated_workers = static_cast<int>(config.distributed.simulated_workers);
  info.processes = comm.size() / info.simulated_workers;
  info.backend = comm.backend();
  info.device = nameOf(config.device);
  info.num_parameters = countParameters(task);
  info.synthetic_data = task.synthetic();
  info.status = outputs::RunStatus::running;
  info.start_time = outputs::isoTimeNow();
  info.sources = config.sources;
  info.baseline = reducers::reducerRegistry().at(config.reducer.name).factory.baseline;
  if (const auto& schedule = synchronizerRegistry().at(config.sync.strategy).factory.schedule)
    info.schedule = schedule(config);
  return info;
}

outputs::RunInfo refusedInfo(const std::string& experiment, const std::string& error) {
  outputs::RunInfo info;
  info.experiment = experiment;
  info.gcrun_version = GCRUN_VERSION;
  info.torch_version = TORCH_VERSION;
  info.status = outputs::RunStatus::refused;
  info.error = error;
  info.start_time = outputs::isoTimeNow();
  info.end_time = info.start_time;
  return info;
}

double computePerBatchMs(const outputs::Timer& timer) {
  double ms = 0;
  for (const char* label : {"batch.forward", "batch.backward"}) {
    const auto found = timer.stats().find(label);
    if (found != timer.stats().end()) ms += 1000.0 * outputs::median(found->second.samples);
  }
  return ms;
}

void logPaperComparison(const outputs::PaperComparison& paper) {
  if (paper.metric.empty()) return;
  const auto& n = paper.numbers;
  const auto run = n.find("run_value");
  spdlog::info("paper ({}): {} {:.4g}, this run {}", paper.source, paper.metric, n.at("value"),
               run == n.end() ? std::string("did not measure it")
                              : fmt::format("{:.4g} (difference {:+.4g})", run->second, n.at("difference")));
}

}  // namespace gcrun::experiments
