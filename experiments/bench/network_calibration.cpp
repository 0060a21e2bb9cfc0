// `gcrun bench network`'s measurements and their table, as epfml/powersgd's timings.py takes them.
#include "experiments/bench/network_calibration.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>

#include <torch/torch.h>
#ifdef GCRUN_WITH_CUDA
#include <torch/cuda.h>
#endif

#include "hyperparams/base/errors.h"
#include "hyperparams/base/text.h"
#include "hyperparams/base/units.h"
#include "outputs/statistics.h"

namespace gcrun::experiments {
namespace {

constexpr int64_t kMaxMessageBytes = int64_t{4} << 30;

// Runs the collective once on `tensor`, waiting for the device when the group computes on one.
void runOnce(comm::Communicator& comm, CollectiveKind collective, at::Tensor& tensor) {
  switch (collective) {
    case CollectiveKind::all_reduce:
      comm.allreduceSum(tensor);
      break;
    case CollectiveKind::all_gather:
      comm.allgather(tensor);
      break;
    case CollectiveKind::broadcast:
      comm.broadcast(tensor, 0);
      break;
    case CollectiveKind::barrier:
      comm.barrier();
      break;
  }
#ifdef GCRUN_WITH_CUDA
  if (tensor.is_cuda()) torch::cuda::synchronize();
#endif
}

// Each run's time on the slowest rank: a rank that leaves the barrier early waits in the collective.
std::vector<double> slowestRank(comm::Communicator& comm, const std::vector<double>& seconds) {
  const auto mine = torch::tensor(seconds, torch::kFloat64).to(comm.device());
  const auto all = torch::stack(comm.allgather(mine)).amax(0).cpu();
  return std::vector<double>(all.data_ptr<double>(), all.data_ptr<double>() + all.numel());
}

SizeTiming timeOne(comm::Communicator& comm, CollectiveKind collective, int64_t bytes, const CalibrationPlan& plan) {
  auto tensor = torch::ones({bytes / 4}, torch::TensorOptions().dtype(torch::kFloat32).device(comm.device()));
  for (int i = 0; i < plan.warmup; ++i) runOnce(comm, collective, tensor);
  std::vector<double> seconds;
  for (int i = 0; i < plan.repeats; ++i) {
    comm.barrier();
    const auto start = std::chrono::steady_clock::now();
    runOnce(comm, collective, tensor);
    seconds.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  }
  const auto runs = slowestRank(comm, seconds);
  const auto [fastest, slowest] = std::minmax_element(runs.begin(), runs.end());
  return {collective, bytes, outputs::median(runs), *fastest, *slowest};
}

const network::Fit& fitOf(const std::vector<network::Fit>& fits, CollectiveKind collective) {
  return *std::find_if(fits.begin(), fits.end(), [&](const auto& fit) { return fit.collective == collective; });
}

}  // namespace

int64_t parseMessageBytes(const std::string& text, const std::string& what) {
  const auto bytes = units::parseByteCount(text);
  if (!bytes || *bytes <= 0 || *bytes > kMaxMessageBytes || *bytes % 4 != 0) {
    throw UserError(
        what + ": '" + clipForMessage(text, 60) +
        "' is not a size; expected a size in bytes, a multiple of 4 from 4 to 4GiB, e.g. 4, 64KiB or 256MiB");
  }
  return *bytes;
}

std::vector<int64_t> messageSizes(int64_t min_bytes, int64_t max_bytes) {
  std::vector<int64_t> sizes;
  for (int64_t bytes = min_bytes; bytes < max_bytes; bytes *= 4) sizes.push_back(bytes);
  sizes.push_back(max_bytes);
  return sizes;
}

std::vector<SizeTiming> timeCollectives(comm::Communicator& comm, const CalibrationPlan& plan) {
  std::vector<SizeTiming> timings;
  for (const auto collective : plan.collectives) {
    for (const auto bytes : messageSizes(plan.min_bytes, plan.max_bytes)) {
      timings.push_back(timeOne(comm, collective, bytes, plan));
    }
  }
  return timings;
}

std::vector<network::Fit> fitTimings(const std::vector<SizeTiming>& timings, int world_size) {
  std::vector<network::Fit> fits;
  std::vector<CollectiveKind> order;
  for (const auto& timing : timings) {
    if (std::find(order.begin(), order.end(), timing.collective) == order.end()) order.push_back(timing.collective);
  }
  for (const auto collective : order) {
    std::vector<network::Sample> samples;
    for (const auto& timing : timings) {
      if (timing.collective == collective) samples.push_back({static_cast<double>(timing.bytes), timing.median_s});
    }
    fits.push_back(network::fitLatencyAndPerByte(collective, world_size, samples));
    fits.back().samples = samples;
  }
  return fits;
}

std::string formatCalibration(const std::vector<SizeTiming>& timings, const std::vector<network::Fit>& fits) {
  std::string out;
  char line[160];
  std::snprintf(line, sizeof(line), "%-11s %9s %11s %11s %11s %11s %11s\n", "collective", "bytes", "median ms",
                "min ms", "max ms", "fitted ms", "residual %");
  out += line;
  for (const auto& timing : timings) {
    const auto& fit = fitOf(fits, timing.collective);
    const double fitted = fit.latency_s + fit.seconds_per_byte * static_cast<double>(timing.bytes);
    std::snprintf(line, sizeof(line), "%-11s %9s %11.4f %11.4f %11.4f %11.4f %+11.1f\n",
                  collectiveName(timing.collective).c_str(), units::byteCountText(timing.bytes).c_str(),
                  timing.median_s * 1e3, timing.min_s * 1e3, timing.max_s * 1e3, fitted * 1e3,
                  (fitted - timing.median_s) / timing.median_s * 100);
    out += line;
  }
  for (const auto& fit : fits) {
    const std::string bandwidth =
        fit.seconds_per_byte > 0 ? units::roughBandwidthText(1 / fit.seconds_per_byte) : "unbounded";
    std::snprintf(line, sizeof(line), "%s at %d workers: latency %s, %.3g ns per byte (%s), max residual %.1f%%\n",
                  collectiveName(fit.collective).c_str(), fit.world_size,
                  units::roughDurationText(fit.latency_s).c_str(), fit.seconds_per_byte * 1e9, bandwidth.c_str(),
                  fit.max_relative_residual * 100);
    out += line;
  }
  return out;
}

}  // namespace gcrun::experiments
