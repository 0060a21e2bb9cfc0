#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "outputs/metric_sink.h"
#include "outputs/tensorboard/events.h"

namespace gcrun::outputs::tensorboard {

// The `tensorboard` sink: <run_dir>/tb/events.out.tfevents.<unix seconds>.<hostname>.gcrun, a
// TFRecord file of Events. First the file version, then the run's HParams session start, one
// scalar per metric event (scalarOf) plus comm/mib_sent once per step that logged anything, the
// per-layer scalars of every sampled step (layerScalarsOf, with output.layer_stats_every_steps), and at
// close the session end: success when the last epoch summary came at the run's last step, failure
// otherwise (an error or a stop). Records are buffered and written whole at every log step (a
// training-loss event), every epoch end and at close, so a crash leaves a readable prefix. With
// `tensorboard --logdir DIR/runs` a study's runs are TensorBoard's runs (each has its own tb/).
std::unique_ptr<MetricSink> makeTensorboardSink(const SinkContext& context);

struct Scalar {
  std::string tag;
  double value = 0;
};

// The tag scheme, one group per prefix (TensorBoard's sections):
//   train/<name>             per log step, averaged over its window: train/cross_entropy, train/learning_rate
//   train/epoch_<name>       per epoch, over the epoch: train/epoch_accuracy, train/epoch_learning_rate
//   test/<name>, validation/<name>   per evaluation
//   compression/<name>       sampled at log steps: grad_norm, memory_norm, rel_compression_error
//   time/batch_ms            the epoch's mean time per batch; time/elapsed_s, the run's time so far
//   comm/mib_sent            MiB one worker sent so far (MetricEvent::bits / 8 / 2^20)
//   other/<name>             a metric with no split
std::optional<Scalar> scalarOf(const MetricEvent& event);
// A layers.csv row as scalars at the row's step, one group for all layers:
//   layers/<parameter>/grad_norm, and layers/<parameter>/rel_compression_error and
//   layers/<parameter>/bits when the row knows them.
std::vector<Scalar> layerScalarsOf(const LayerStatsRow& row);
inline constexpr char kMibSentTag[] = "comm/mib_sent";

// The settings that tell a study's runs apart, as HParams: experiment, seed, task.name,
// task.architecture, training.batch_size, training.epochs, optimizer.learning_rate,
// optimizer.momentum, optimizer.weight_decay, optimizer.memory, reducer.name,
// reducer.granularity, distributed.simulated_workers and every reducer.<setting> the config holds.
std::map<std::string, HParamValue> runHParams(const ExperimentConfig& config);
// The HParams session group: every hparam but the seed, "name=value" joined by ",", so that the
// seeds of one configuration form one group of the dashboard.
std::string groupNameOf(const std::map<std::string, HParamValue>& hparams);

// "events.out.tfevents.<unix_seconds>.<hostname>.gcrun".
std::string eventFileName(int64_t unix_seconds, const std::string& hostname);

}  // namespace gcrun::outputs::tensorboard
