#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <ATen/core/Tensor.h>

#include "experiments/sync/synchronizer.h"
#include "experiments/training/step_instruments.h"
#include "hyperparams/config.h"
#include "outputs/metric_sink.h"

namespace gcrun::experiments {

// One "train" metric of the step just done, at the fractional epoch `position` its step started at.
using EmitMetric = std::function<void(const std::string& name, double value, double position)>;

// What rank 0 samples of its steps, with its own local tensors: the reference's compression
// metrics (powersgd.md 1.4: grad_norm, memory_norm, rel_compression_error) every
// output.log_every_steps steps instead of at random, over all parameters at once, and the same
// parameter by parameter every output.layer_stats_every_steps steps (LayerStatsRow).
class StepSampler {
 public:
  // `sinks`: where the per-parameter rows go (MetricSink::layerStats); empty on all ranks but 0,
  // which then samples nothing.
  StepSampler(const OutputOptions& output, const std::vector<std::unique_ptr<outputs::MetricSink>>& sinks,
              const std::vector<std::string>& names, const std::vector<at::Tensor>& params);

  // Before step `step` (1-based) runs: whether its synchronizer records norms for it.
  bool due(int64_t step);
  // After the step, outside the `batch` timer. A lossless reducer's memory is always zero, and
  // without error feedback no memory is kept: those are not emitted. The rows are timed as
  // layer_stats, their memories measured after the sync.
  void report(const Synchronizer& synchronizer, int64_t step, double position, const EmitMetric& emit,
              StepInstruments& instruments) const;

 private:
  std::vector<outputs::LayerStatsRow> layerRows(const Synchronizer& synchronizer, int64_t step) const;

  const OutputOptions& output_;
  const std::vector<std::unique_ptr<outputs::MetricSink>>& sinks_;
  const std::vector<std::string>& names_;
  const std::vector<at::Tensor>& params_;
  bool metrics_due_ = false, layers_due_ = false;  // for the step about to run
};

}  // namespace gcrun::experiments
