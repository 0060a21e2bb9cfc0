#pragma once

#include <string>

#include "hyperparams/config.h"
#include "outputs/run_directory.h"
#include "outputs/timer.h"

namespace gcrun::outputs {

// The files that describe a run to people and tools, in its directory: config.yaml (the resolved
// settings), run.json (RunInfo: status, counters, final metrics, the paper comparison) and
// timer_summary.json. Only rank 0's record writes; the others' calls do nothing, so every rank
// runs the same code.
class RunRecord {
 public:
  RunRecord(std::string run_dir, bool writes) : dir_(std::move(run_dir)), writes_(writes) {}

  // config.yaml (`config_yaml`: experiments::ResolvedExperiment::config_yaml) and a run.json with
  // status "running".
  void start(const std::string& config_yaml, const RunInfo& info) const;
  // The final run.json, with the paper comparison worked out from `info` and `timer`, and
  // timer_summary.json. Returns the comparison. When timer_summary.json cannot be written, run.json
  // says `failed` with that error, and the error is thrown.
  PaperComparison finish(const PaperResult& paper, RunInfo info, const Timer& timer) const;

 private:
  RunDirectory dir_;
  bool writes_;
};

// The preset's published numbers next to this run's: its final value of the paper's metric, MiB
// sent per worker per full epoch, and mean time per batch (at this run's world size).
PaperComparison comparePaper(const PaperResult& paper, const RunInfo& info, const Timer& timer);

}  // namespace gcrun::outputs
