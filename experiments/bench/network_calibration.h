#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "outputs/network/network_profile.h"
#include "reducers/comm/communicator.h"

namespace gcrun::experiments {

// What `gcrun bench network` measures: each collective at message sizes from min_bytes to
// max_bytes (factors of 4), `warmup` untimed then `repeats` timed runs of each. Unless full_sweep,
// a series (a collective in a dtype) stops growing after the first size whose median run takes more
// than slow_message_s: a fit needs sizes whose time the bytes dominate, not minutes of them on a
// slow link (256 MiB take 21 s a run at 100 Mbit/s). The all-reduce is
// timed in each of `dtypes`: its cost per byte is the sum's arithmetic as much as the wire (Gloo
// sums float16 in software, several times slower than float32). All-gather and broadcast move bytes
// without arithmetic, so they are timed in float32 alone and cost every dtype alike.
struct CalibrationPlan {
  std::vector<CollectiveKind> collectives = {CollectiveKind::all_reduce, CollectiveKind::all_gather,
                                             CollectiveKind::broadcast};
  std::vector<DataType> dtypes = {DataType::float32, DataType::float16, DataType::bfloat16};
  int64_t min_bytes = 4;
  int64_t max_bytes = int64_t{256} << 20;
  int warmup = 1;
  int repeats = 5;
  bool full_sweep = false;
  double slow_message_s = 3;
};

// The series the plan times, as many as its table has at most: the all-reduce in each dtype, the
// other collectives in float32.
int seriesCount(const CalibrationPlan& plan);
// The longest the plan may take in seconds, or nothing for a full sweep, whose time only the link
// decides: each series at most up to the first size over slow_message_s, which takes at most 4
// times that (the sizes grow by 4), after sizes taking at most a third of it together.
std::optional<double> calibrationBoundS(const CalibrationPlan& plan);
// What rank 0 prints before it measures: the series, the sizes and how long it may take.
std::string calibrationPlanText(const CalibrationPlan& plan);

// "4", "64KiB", "256MiB", "1GB" -> bytes. A UserError naming `what` unless it is a whole number of
// float32 elements (a multiple of 4, at least 4) of at most 4 GiB.
int64_t parseMessageBytes(const std::string& text, const std::string& what);

// "float32", "float16" or "bfloat16", the types gcrun's reducers sum in; a UserError naming `what`,
// the value and those names for anything else.
DataType parseReductionType(const std::string& name, const std::string& what);

// min_bytes, 4 * min_bytes, ... below max_bytes, then max_bytes.
std::vector<int64_t> messageSizes(int64_t min_bytes, int64_t max_bytes);

// One collective at one size in one dtype: the time of each run is the slowest rank's (a barrier
// before each), and over the runs its median, minimum and maximum. For all-gather, bytes is each
// rank's message (bytes / element size elements).
struct SizeTiming {
  CollectiveKind collective = CollectiveKind::all_reduce;
  int64_t bytes = 0;
  double median_s = 0;
  double min_s = 0;
  double max_s = 0;
  DataType dtype = DataType::float32;
};

// Every rank of `comm` calls it with the same plan and gets the same timings (tensors on the
// group's device; broadcasts from rank 0), by collective, then dtype, then size. A dtype the backend
// cannot sum (LibTorch 1.13's Gloo and bfloat16, which the bf16 reducer all-gathers instead) has
// no all-reduce timings.
// `timed`, when given, is told each size's timing as soon as it is known (rank 0 prints it).
std::vector<SizeTiming> timeCollectives(comm::Communicator& comm, const CalibrationPlan& plan,
                                        const std::function<void(const SizeTiming&)>& timed = {});
// One line for one size's timing, as timeCollectives' caller prints it as it goes.
std::string sizeTimingLine(const SizeTiming& timing);

// One fit per (collective, dtype), of its medians (network::fitLatencyAndPerByte), in the
// timings' order.
std::vector<network::Fit> fitTimings(const std::vector<SizeTiming>& timings, int world_size);

// The table (collective, dtype, bytes, median, min and max ms, fitted ms, residual %), then one
// line per fit: latency, per-byte cost and the bandwidth that cost is.
std::string formatCalibration(const std::vector<SizeTiming>& timings, const std::vector<network::Fit>& fits);

}  // namespace gcrun::experiments
