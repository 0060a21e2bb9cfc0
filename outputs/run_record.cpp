#include "outputs/run_record.h"

#include <exception>

#include "hyperparams/base/units.h"
#include "outputs/run_info.h"

namespace gcrun::outputs {

void RunRecord::start(const std::string& config_yaml, const RunInfo& info) const {
  if (!writes_) return;
  dir_.write(run_files::kConfig, config_yaml);
  dir_.writeInfo(info);
}

PaperComparison RunRecord::finish(const PaperResult& paper, RunInfo info, const Timer& timer) const {
  info.paper = comparePaper(paper, info, timer);
  if (!writes_) return info.paper;
  try {
    dir_.write(run_files::kTimerSummary, timer.summaryJson());
  } catch (const std::exception& e) {
    // A full disk: the failed write gave its space back, which run.json's few bytes can take.
    info.status = RunStatus::failed;
    info.error = e.what();
    dir_.writeInfo(info);
    throw;
  }
  dir_.writeInfo(info);
  return info.paper;
}

PaperComparison comparePaper(const PaperResult& paper, const RunInfo& info, const Timer& timer) {
  PaperComparison comparison{paper.metric, paper.source, {}};
  if (paper.metric.empty()) return comparison;
  auto& numbers = comparison.numbers;
  numbers["value"] = paper.value;
  if (auto it = info.final_metrics.find(paper.metric); it != info.final_metrics.end()) {
    numbers["run_value"] = it->second;
    numbers["difference"] = it->second - paper.value;
  }
  if (paper.data_per_epoch_mb > 0) numbers["data_per_epoch_mb"] = paper.data_per_epoch_mb;
  if (info.epochs_done > 0) {
    numbers["run_data_per_epoch_mb"] = units::mibOfBits(static_cast<double>(info.bits_sent)) / info.epochs_done;
  }
  if (paper.time_per_batch_ms > 0) numbers["time_per_batch_ms"] = paper.time_per_batch_ms;
  const auto batch = timer.stats().find("batch");
  if (batch != timer.stats().end() && batch->second.events > 0) {
    numbers["run_time_per_batch_ms"] = 1000.0 * batch->second.total_s / batch->second.events;
  }
  return comparison;
}

}  // namespace gcrun::outputs
