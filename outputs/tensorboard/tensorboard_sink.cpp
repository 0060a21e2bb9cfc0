#include "outputs/tensorboard/tensorboard_sink.h"

#include <unistd.h>

#include <cmath>

#include "hyperparams/base/units.h"
#include "hyperparams/rules.h"
#include "outputs/files/safe_files.h"
#include "outputs/run_directory.h"
#include "outputs/tensorboard/tfrecord.h"

namespace gcrun::outputs::tensorboard {
namespace {

std::string hostName() {
  char name[256] = {};
  if (::gethostname(name, sizeof(name) - 1) != 0 || name[0] == '\0') return "localhost";
  return name;
}

HParamValue hparamOf(const SettingValue& setting) {
  if (const auto* integer = std::get_if<int64_t>(&setting)) return static_cast<double>(*integer);
  if (const auto* number = std::get_if<double>(&setting)) return *number;
  if (const auto* flag = std::get_if<bool>(&setting)) return *flag;
  return std::get<std::string>(setting);
}

std::string textOf(const HParamValue& hparam) {
  if (const auto* number = std::get_if<double>(&hparam)) return hyperparams::formatNumber(*number);
  if (const auto* flag = std::get_if<bool>(&hparam)) return *flag ? "true" : "false";
  return std::get<std::string>(hparam);
}

class TensorboardSink : public MetricSink {
 public:
  explicit TensorboardSink(const SinkContext& context)
      : file_(files::Directory::open(context.run_dir, false)
                  .sub(run_files::kTensorboard, true)
                  .openForAppend(eventFileName(static_cast<int64_t>(start_time_), hostName()), !context.resume)),
        path_(context.run_dir + "/" + run_files::kTensorboard) {
    append(fileVersionEvent(start_time_));
    const auto hparams = runHParams(context.config);
    append(sessionStartEvent(start_time_, hparams, groupNameOf(hparams), start_time_));
    flush();
  }

  void metric(const MetricEvent& event) override {
    const double now = units::unixSeconds();
    if (const auto scalar = scalarOf(event)) {
      append(scalarEvent(now, event.step, scalar->tag, static_cast<float>(scalar->value)));
    }
    if (event.step != last_mib_step_) {
      last_mib_step_ = event.step;
      append(scalarEvent(now, event.step, kMibSentTag,
                         static_cast<float>(units::mibOfBits(static_cast<double>(event.bits)))));
    }
    if (event.window > 0) flush();
  }

  void progress(const Progress& progress) override { total_steps_ = progress.total_steps; }

  // Buffered until the next flush, as compression samples are.
  void layerStats(const std::vector<LayerStatsRow>& rows) override {
    const double now = units::unixSeconds();
    for (const auto& row : rows) {
      for (const auto& scalar : layerScalarsOf(row)) {
        append(scalarEvent(now, row.step, scalar.tag, static_cast<float>(scalar.value)));
      }
    }
  }

  void epochEnd(const EpochSummary& summary) override {
    finished_ = total_steps_ > 0 && summary.step >= total_steps_;
    flush();
  }

  void close() override {
    const double now = units::unixSeconds();
    append(sessionEndEvent(now, finished_ ? SessionStatus::success : SessionStatus::failure, now));
    flush();
  }

 private:
  void append(const std::string& event) { buffer_ += tfRecord(event); }

  // The buffer holds whole records only, so what reaches the file between crashes is whole too.
  void flush() {
    files::writeAll(file_.get(), buffer_, path_);
    buffer_.clear();
  }

  const double start_time_ = units::unixSeconds();
  files::UniqueFd file_;
  std::string path_;
  std::string buffer_;
  int64_t last_mib_step_ = -1;
  int64_t total_steps_ = 0;
  bool finished_ = false;
};

}  // namespace

std::optional<Scalar> scalarOf(const MetricEvent& event) {
  const std::string& name = event.name;
  if (name == "grad_norm" || name == "memory_norm" || name == "rel_compression_error") {
    return Scalar{"compression/" + name, event.value};
  }
  if (name == "time_per_batch") return Scalar{"time/batch_ms", event.value * 1000.0};
  if (name == "elapsed_s") return Scalar{"time/elapsed_s", event.value};
  if (event.split.empty()) return Scalar{"other/" + name, event.value};
  if (event.split == "train" && event.window == 0) return Scalar{"train/epoch_" + name, event.value};
  return Scalar{event.split + "/" + name, event.value};
}

std::vector<Scalar> layerScalarsOf(const LayerStatsRow& row) {
  const std::string prefix = "layers/" + row.parameter + "/";
  std::vector<Scalar> scalars{{prefix + "grad_norm", row.grad_norm}};
  if (row.rel_compression_error) scalars.push_back({prefix + "rel_compression_error", *row.rel_compression_error});
  if (row.bits) scalars.push_back({prefix + "bits", static_cast<double>(*row.bits)});
  return scalars;
}

std::map<std::string, HParamValue> runHParams(const ExperimentConfig& config) {
  std::map<std::string, HParamValue> hparams{
      {"experiment", config.experiment},
      {"seed", static_cast<double>(config.seed)},
      {"task.name", config.task.name},
      {"task.architecture", config.task.architecture},
      {"training.batch_size", static_cast<double>(config.training.batch_size)},
      {"training.epochs", static_cast<double>(config.training.epochs)},
      {"optimizer.learning_rate", config.optimizer.learning_rate},
      {"optimizer.momentum", config.optimizer.momentum},
      {"optimizer.weight_decay", config.optimizer.weight_decay},
      {"optimizer.memory", config.optimizer.memory},
      {"reducer.name", config.reducer.name},
      {"reducer.granularity", nameOf(config.reducer.granularity)},
      {"distributed.simulated_workers", static_cast<double>(config.distributed.simulated_workers)},
  };
  for (const auto& [name, setting] : config.reducer.settings) hparams["reducer." + name] = hparamOf(setting);
  return hparams;
}

std::string groupNameOf(const std::map<std::string, HParamValue>& hparams) {
  std::string group;
  for (const auto& [name, hparam] : hparams) {
    if (name == "seed") continue;
    group += (group.empty() ? "" : ",") + name + "=" + textOf(hparam);
  }
  return group;
}

std::string eventFileName(int64_t unix_seconds, const std::string& hostname) {
  return "events.out.tfevents." + std::to_string(unix_seconds) + "." + hostname + ".gcrun";
}

std::unique_ptr<MetricSink> makeTensorboardSink(const SinkContext& context) {
  return std::make_unique<TensorboardSink>(context);
}

}  // namespace gcrun::outputs::tensorboard
