#include "experiments/training/step_sampler.h"

namespace gcrun::experiments {

StepSampler::StepSampler(const OutputOptions& output, const std::vector<std::unique_ptr<outputs::MetricSink>>& sinks,
                         const std::vector<std::string>& names, const std::vector<at::Tensor>& params)
    : output_(output), sinks_(sinks), names_(names), params_(params) {}

bool StepSampler::due(int64_t step) {
  const int64_t metrics_every = output_.log_every_steps, layers_every = output_.layer_stats_every_steps;
  metrics_due_ = !sinks_.empty() && metrics_every > 0 && step % metrics_every == 0;
  layers_due_ = !sinks_.empty() && layers_every > 0 && step % layers_every == 0;
  return metrics_due_ || layers_due_;
}

void StepSampler::report(const Synchronizer& synchronizer, int64_t step, double position, const EmitMetric& emit,
                         StepInstruments& instruments) const {
  const auto sample = metrics_due_ ? synchronizer.sample() : std::nullopt;
  if (sample) {
    emit("grad_norm", sample->gradient, position);
    if (sample->lost) {
      if (sample->error_feedback) emit("memory_norm", *sample->lost, position);
      if (sample->send > 0) emit("rel_compression_error", *sample->lost / sample->send, position);
    }
  }
  if (!layers_due_) return;
  auto scope = instruments.phase(Phase::layer_stats);
  const auto rows = layerRows(synchronizer, step);
  for (const auto& sink : sinks_) sink->layerStats(rows);
}

std::vector<outputs::LayerStatsRow> StepSampler::layerRows(const Synchronizer& synchronizer, int64_t step) const {
  const auto sample = synchronizer.layerSample();
  const bool costs_known = sample.costs.size() == params_.size();
  std::vector<outputs::LayerStatsRow> rows;
  for (size_t i = 0; i < params_.size(); ++i) {
    outputs::LayerStatsRow row;
    row.step = step;
    row.parameter = names_[i];
    row.shape = params_[i].sizes().vec();
    row.elements = params_[i].numel();
    row.grad_norm = sample.gradient[i];
    if (sample.send[i] > 0) row.rel_compression_error = sample.lost[i] / sample.send[i];
    if (costs_known) {
      row.bits = sample.costs[i].bits;
      if (sample.costs[i].rank > 0) row.rank = sample.costs[i].rank;
    }
    rows.push_back(std::move(row));
  }
  return rows;
}

}  // namespace gcrun::experiments
