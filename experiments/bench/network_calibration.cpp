// `gcrun bench network`'s measurements and their table, as epfml/powersgd's timings.py takes them.
#include "experiments/bench/network_calibration.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <utility>

#include <spdlog/fmt/fmt.h>
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
constexpr DataType kReductionTypes[] = {DataType::float32, DataType::float16, DataType::bfloat16};

at::ScalarType scalarTypeOf(DataType dtype) {
  switch (dtype) {
    case DataType::float16:
      return at::kHalf;
    case DataType::bfloat16:
      return at::kBFloat16;
    default:
      return at::kFloat;  // parseReductionType admits no other
  }
}

// Whether the backend sums `dtype`: a one-element all-reduce, which a backend without the type
// refuses on every rank alike before sending anything (as the fp16/bf16 reducers probe it).
bool backendSums(comm::Communicator& comm, DataType dtype) {
  auto probe = torch::zeros({1}, torch::TensorOptions().dtype(scalarTypeOf(dtype)).device(comm.device()));
  try {
    comm.allreduceSum(probe);
    return true;
  } catch (const c10::Error&) {
    return false;
  }
}

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

SizeTiming timeOne(comm::Communicator& comm, CollectiveKind collective, DataType dtype, int64_t bytes,
                   const CalibrationPlan& plan) {
  const auto options = torch::TensorOptions().dtype(scalarTypeOf(dtype)).device(comm.device());
  auto tensor = torch::ones({bytes / static_cast<int64_t>(c10::elementSize(scalarTypeOf(dtype)))}, options);
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
  return {collective, bytes, outputs::median(runs), *fastest, *slowest, dtype};
}

const network::Fit& fitOf(const std::vector<network::Fit>& fits, const SizeTiming& timing) {
  return *std::find_if(fits.begin(), fits.end(), [&](const auto& fit) {
    return fit.collective == timing.collective && fit.dtype == timing.dtype;
  });
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

DataType parseReductionType(const std::string& name, const std::string& what) {
  for (const auto dtype : kReductionTypes) {
    if (name == dataTypeName(dtype)) return dtype;
  }
  throw UserError(what + ": '" + clipForMessage(name, 60) +
                  "' is not a data type gcrun sums in; expected float32, float16 or bfloat16");
}

std::vector<int64_t> messageSizes(int64_t min_bytes, int64_t max_bytes) {
  std::vector<int64_t> sizes;
  for (int64_t bytes = min_bytes; bytes < max_bytes; bytes *= 4) sizes.push_back(bytes);
  sizes.push_back(max_bytes);
  return sizes;
}

int seriesCount(const CalibrationPlan& plan) {
  int count = 0;
  for (const auto collective : plan.collectives) {
    count += collective == CollectiveKind::all_reduce ? static_cast<int>(plan.dtypes.size()) : 1;
  }
  return count;
}

std::optional<double> calibrationBoundS(const CalibrationPlan& plan) {
  if (plan.full_sweep) return std::nullopt;
  // The last size takes at most 4 x slow_message_s, those before it at most slow_message_s x (1 +
  // 1/4 + 1/16 + ...) = 4/3 of it.
  const double series_s = (plan.warmup + plan.repeats) * plan.slow_message_s * (4.0 + 4.0 / 3.0);
  return series_s * seriesCount(plan);
}

std::string calibrationPlanText(const CalibrationPlan& plan) {
  const auto sizes = messageSizes(plan.min_bytes, plan.max_bytes);
  std::string text = "timing " + std::to_string(seriesCount(plan)) + " series (collective and dtype) at up to " +
                     std::to_string(sizes.size()) + " sizes from " + units::byteCountText(plan.min_bytes) + " to " +
                     units::byteCountText(plan.max_bytes) + ", " + std::to_string(plan.warmup + plan.repeats) +
                     " runs each";
  if (const auto bound = calibrationBoundS(plan)) {
    return text + "; a series ends after its first size slower than " + fmt::format("{:g} s", plan.slow_message_s) +
           " a run, so this takes at most about " + units::elapsedText(*bound) + " (--full-sweep times every size)";
  }
  return text + "; every size is timed (--full-sweep), so the link's speed decides how long this takes";
}

std::vector<SizeTiming> timeCollectives(comm::Communicator& comm, const CalibrationPlan& plan,
                                        const std::function<void(const SizeTiming&)>& timed) {
  std::vector<SizeTiming> timings;
  for (const auto collective : plan.collectives) {
    const auto dtypes = collective == CollectiveKind::all_reduce ? plan.dtypes : std::vector{DataType::float32};
    for (const auto dtype : dtypes) {
      if (collective == CollectiveKind::all_reduce && !backendSums(comm, dtype)) continue;
      int timed_sizes = 0;
      for (const auto bytes : messageSizes(plan.min_bytes, plan.max_bytes)) {
        timings.push_back(timeOne(comm, collective, dtype, bytes, plan));
        if (timed) timed(timings.back());
        // Every rank has the same slowest-rank median, so all stop at the same size; a fit needs two.
        if (++timed_sizes >= 2 && !plan.full_sweep && timings.back().median_s > plan.slow_message_s) break;
      }
    }
  }
  return timings;
}

std::string sizeTimingLine(const SizeTiming& timing) {
  char line[120];
  std::snprintf(line, sizeof(line), "%-11s %-8s %9s %11.4f ms", collectiveName(timing.collective).c_str(),
                dataTypeName(timing.dtype).c_str(), units::byteCountText(timing.bytes).c_str(), timing.median_s * 1e3);
  return line;
}

std::vector<network::Fit> fitTimings(const std::vector<SizeTiming>& timings, int world_size) {
  std::vector<network::Fit> fits;
  std::vector<std::pair<CollectiveKind, DataType>> order;
  for (const auto& timing : timings) {
    const std::pair key(timing.collective, timing.dtype);
    if (std::find(order.begin(), order.end(), key) == order.end()) order.push_back(key);
  }
  for (const auto& [collective, dtype] : order) {
    std::vector<network::Sample> samples;
    for (const auto& timing : timings) {
      if (timing.collective == collective && timing.dtype == dtype) {
        samples.push_back({static_cast<double>(timing.bytes), timing.median_s});
      }
    }
    fits.push_back(network::fitLatencyAndPerByte(collective, world_size, samples));
    fits.back().samples = samples;
    fits.back().dtype = dtype;
  }
  return fits;
}

std::string formatCalibration(const std::vector<SizeTiming>& timings, const std::vector<network::Fit>& fits) {
  std::string out;
  char line[160];
  std::snprintf(line, sizeof(line), "%-11s %-8s %9s %11s %11s %11s %11s %11s\n", "collective", "dtype", "bytes",
                "median ms", "min ms", "max ms", "fitted ms", "residual %");
  out += line;
  for (const auto& timing : timings) {
    const auto& fit = fitOf(fits, timing);
    const double fitted = fit.latency_s + fit.seconds_per_byte * static_cast<double>(timing.bytes);
    std::snprintf(line, sizeof(line), "%-11s %-8s %9s %11.4f %11.4f %11.4f %11.4f %+11.1f\n",
                  collectiveName(timing.collective).c_str(), dataTypeName(timing.dtype).c_str(),
                  units::byteCountText(timing.bytes).c_str(), timing.median_s * 1e3, timing.min_s * 1e3,
                  timing.max_s * 1e3, fitted * 1e3, (fitted - timing.median_s) / timing.median_s * 100);
    out += line;
  }
  for (const auto& fit : fits) {
    const std::string bandwidth =
        fit.seconds_per_byte > 0 ? units::roughBandwidthText(1 / fit.seconds_per_byte) : "unbounded";
    std::snprintf(line, sizeof(line), "%s %s at %d workers: latency %s, %.3g ns per byte (%s), max residual %.1f%%\n",
                  dataTypeName(fit.dtype).c_str(), collectiveName(fit.collective).c_str(), fit.world_size,
                  units::roughDurationText(fit.latency_s).c_str(), fit.seconds_per_byte * 1e9, bandwidth.c_str(),
                  fit.max_relative_residual * 100);
    out += line;
  }
  return out;
}

}  // namespace gcrun::experiments
