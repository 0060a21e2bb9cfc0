#include "outputs/report/run_data.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <regex>

#include "hyperparams/base/errors.h"
#include "hyperparams/base/units.h"
#include "hyperparams/config_io.h"
#include "outputs/files/safe_files.h"
#include "outputs/json_document.h"
#include "outputs/run_directory.h"

namespace gcrun::outputs {
namespace {

namespace fs = std::filesystem;

bool isPresent(const fs::path& path) {
  std::error_code error;
  return fs::exists(fs::symlink_status(path, error));  // a dangling or looping symlink exists too
}

// The YAML document at `path` (config.yaml); nothing when it is missing or not YAML. A file
// that is not a regular one within `limit` bytes, or whose aliases expand past the limit on YAML
// values (what gcrun writes holds a few hundred), is a UserError: the run is not read at all.
std::optional<YAML::Node> loadFile(const fs::path& path, size_t limit) {
  if (!isPresent(path)) return std::nullopt;
  const auto text = files::readBoundedFile(path.string(), limit);
  YAML::Node node;
  try {
    node = YAML::Load(text);
  } catch (const YAML::Exception&) {
    return std::nullopt;
  }
  if (hyperparams::exceedsValueLimit(node)) {
    throw UserError(path.string() + " holds more than " + std::to_string(hyperparams::kMaxYamlValues) +
                    " values once its YAML aliases are expanded; gcrun writes far fewer");
  }
  return node;
}

// node[keys[0]][keys[1]]..., or a null node where a key is missing (yaml-cpp throws instead).
YAML::Node child(const YAML::Node& root, std::initializer_list<const char*> keys) {
  YAML::Node node = root;
  for (const char* key : keys) {
    if (!node || !node.IsMap() || !node[key]) return YAML::Node();
    node.reset(node[key]);  // rebinds; `node = ...` would overwrite the node it refers to
  }
  return node;
}

// A finite number, or nothing: NaN, infinities and numbers past a double's range are missing data.
std::optional<double> numberOf(const YAML::Node& node) {
  try {
    if (node && node.IsScalar()) {
      const double value = node.as<double>();
      if (std::isfinite(value)) return value;
    }
  } catch (const YAML::Exception&) {
  }
  return std::nullopt;
}

template <class T>
T valueOr(const YAML::Node& node, const T& fallback) {
  try {
    return node && node.IsScalar() ? node.as<T>() : fallback;
  } catch (const YAML::Exception&) {
    return fallback;
  }
}

// "reducer.rank" -> "2" for every leaf of the configuration.
void flatten(const YAML::Node& node, const std::string& prefix, std::map<std::string, std::string>& out) {
  if (node.IsMap()) {
    for (const auto& item : node) flatten(item.second, prefix + valueOr<std::string>(item.first, "?") + ".", out);
    return;
  }
  YAML::Emitter emitter;
  emitter << YAML::Flow << node;
  out[prefix.substr(0, prefix.size() - 1)] = emitter.c_str();
}

// The metric a report compares: the one the preset reproduces, else the first the run has of
// test accuracy, validation or test perplexity, else any test metric.
std::string chooseMetric(const std::string& paper_metric, const std::map<std::string, std::optional<double>>& finals) {
  if (!paper_metric.empty()) return paper_metric;
  for (const char* preferred : {"test.accuracy", "validation.perplexity", "test.perplexity"}) {
    if (finals.count(preferred)) return preferred;
  }
  for (const auto& kv : finals) {
    if (kv.first.rfind("test.", 0) == 0) return kv.first;
  }
  return finals.empty() ? "test.accuracy" : finals.begin()->first;
}

void readMetrics(const fs::path& path, RunData& run) {
  const auto dot = run.metric.find('.');
  const std::string split = run.metric.substr(0, dot);
  const std::string name = dot == std::string::npos ? run.metric : run.metric.substr(dot + 1);
  std::map<int64_t, EpochPoint> by_step;  // the epoch-end events of one step
  std::map<int64_t, bool> has_metric;
  if (!isPresent(path)) return;
  // A metrics event is one short line; a longer one is not gcrun's and is skipped.
  files::forEachLine(path.string(), files::kMaxMetricsBytes, 64 << 10, [&](const std::string& line) {
    const auto event = parseJson(line);
    if (!event || !event->is_object()) return;  // a line cut short by a crash
    const auto event_name = stringOr(*event, "name", "");
    const auto event_split = stringOr(*event, "split", "");
    const auto step = integerOr(*event, "step", 0);
    const auto value = numberAt(*event, "value");
    // The windowed events are the per-step training loss (named as its task names it) and rate.
    if (integerOr(*event, "window", 0) > 0) {
      if (event_name != "learning_rate" && event_split == "train" && value) run.losses.push_back({step, *value});
      return;
    }
    auto& point = by_step[step];
    point.step = step;
    point.epoch = numberAt(*event, "epoch").value_or(0);
    point.mib = units::mibOfBits(std::max(0.0, numberAt(*event, "bits").value_or(0)));
    if (event_name == name && event_split == split && value) {
      point.metric = *value;
      has_metric[step] = true;
    } else if (event_name == "elapsed_s") {
      point.elapsed_s = value.value_or(0);
    }
  });
  for (const auto& kv : by_step) {
    if (has_metric.count(kv.first)) run.epochs.push_back(kv.second);
  }
}

}  // namespace

std::vector<std::string> findRunDirectories(const std::vector<std::string>& paths, std::vector<std::string>& skipped) {
  std::vector<std::string> dirs;
  for (const auto& path : paths) {
    std::error_code error;
    if (!fs::is_directory(path, error)) throw UserError("'" + path + "' is not a directory (a run or study directory)");
    if (isPresent(fs::path(path) / run_files::kInfo)) dirs.push_back(fs::path(path).lexically_normal().string());
    fs::recursive_directory_iterator it(path, fs::directory_options::skip_permission_denied, error);
    for (; !error && it != fs::recursive_directory_iterator(); it.increment(error)) {
      std::error_code type_error;
      // Follows a symlink (a run linked into a folder counts); the walk itself never does.
      const bool directory = it->is_directory(type_error);
      if (type_error && type_error != std::errc::no_such_file_or_directory &&
          type_error != std::errc::not_a_directory) {
        skipped.push_back(it->path().string() + ": " + type_error.message());  // a symlink loop, say
      }
      if (!directory) continue;
      // A run's own folders (checkpoints) hold no runs.
      if (it->path().filename() == run_files::kCheckpoints) {
        it.disable_recursion_pending();
      } else if (isPresent(it->path() / run_files::kInfo)) {
        dirs.push_back(it->path().lexically_normal().string());
      }
    }
    if (error) skipped.push_back(path + ": not searched further: " + error.message());
  }
  std::sort(dirs.begin(), dirs.end());
  dirs.erase(std::unique(dirs.begin(), dirs.end()), dirs.end());
  return dirs;
}

namespace {

// A run.json from before runs recorded their reducer's baseline (format 1 without "baseline"):
// the built-in baselines, which were the only ones then.
Baseline baselineOfAnOldRun(const std::map<std::string, std::string>& settings) {
  const auto reducer = settings.find("reducer.name");
  if (reducer == settings.end()) return Baseline::none;
  if (reducer->second == "exact") return Baseline::full_precision;
  return reducer->second == "fp16" ? Baseline::half_precision : Baseline::none;
}

// The name, configuration, seed and paper target of a run, from its directory and config.yaml.
void readConfig(const fs::path& root, const std::optional<YAML::Node>& config, RunData& run,
                std::string& paper_metric) {
  static const std::regex seed_suffix("(.*)-seed[0-9]+$");
  std::smatch match;
  const std::string base = root.filename().string();
  run.name = std::regex_match(base, match, seed_suffix) ? match[1].str() : base;
  if (config && config->IsMap()) {
    flatten(*config, "", run.settings);
    run.baseline = baselineOfAnOldRun(run.settings);
    run.seed = valueOr<int64_t>(child(*config, {"seed"}), 0);
    run.synthetic = valueOr<bool>(child(*config, {"task", "synthetic"}), false);
    paper_metric = valueOr<std::string>(child(*config, {"paper", "metric"}), "");
    run.paper_source = valueOr<std::string>(child(*config, {"paper", "source"}), "");
    if (!paper_metric.empty()) run.paper_value = numberOf(child(*config, {"paper", "value"}));
    const auto paper_time = numberOf(child(*config, {"paper", "time_per_batch_ms"}));
    if (paper_time && *paper_time > 0) run.paper_time_per_batch_ms = paper_time;
    for (const auto& kv : run.settings) {
      if (kv.first != "seed") run.config_key += kv.first + "=" + kv.second + "\n";
    }
  }
}

}  // namespace

std::string statusLabel(const RunData& run) {
  if (run.unreadable) return "unreadable";
  return run.status ? runStatusText(*run.status) : "unknown";
}

RunData runThatDidNotStart(const std::string& dir, const std::string& config_yaml, RunStatus status,
                           const std::string& error) {
  RunData run;
  run.dir = dir;
  std::string paper_metric;
  std::optional<YAML::Node> config;
  try {
    config = YAML::Load(config_yaml);
  } catch (const YAML::Exception&) {
  }
  readConfig(dir, config, run, paper_metric);
  run.status = status;
  run.error = error;
  run.metric = chooseMetric(paper_metric, {});
  return run;
}

RunData loadRun(const std::string& dir, const std::string& metric) {
  RunData run;
  run.dir = dir;
  const fs::path root(dir);
  std::string paper_metric;
  readConfig(root, loadFile(root / run_files::kConfig, files::kMaxConfigBytes), run, paper_metric);
  const auto info = RunDirectory(dir).readInfo();
  if (!info) {
    run.unreadable = true;
    return run;
  }
  run.status = info->status;
  run.error = info->error;
  run.experiment = info->experiment;
  run.world_size = info->world_size;
  run.simulated_workers = info->simulated_workers;
  run.compute_per_batch_ms = info->compute_per_batch_ms;
  if (info->baseline) run.baseline = *info->baseline;
  run.schedule = info->schedule;
  run.schedule_problem = info->schedule_problem;
  std::map<std::string, std::optional<double>> finals;
  for (const auto& [name, value] : info->final_metrics) {
    finals[name] = std::isfinite(value) ? std::optional<double>(value) : std::nullopt;
  }
  run.metric = metric.empty() ? chooseMetric(paper_metric, finals) : metric;
  if (const auto found = finals.find(run.metric); found != finals.end()) run.final_value = found->second;
  const double bits = static_cast<double>(info->bits_sent);
  const double epochs = info->epochs_done;
  const auto finiteOr0 = [](double value) { return std::isfinite(value) ? value : 0.0; };
  if (epochs > 0) run.mib_per_epoch = finiteOr0(units::mibOfBits(bits) / epochs);
  const double sent_as_floats = 32.0 * static_cast<double>(info->num_parameters) * static_cast<double>(info->steps);
  if (bits > 0) run.compression = finiteOr0(sent_as_floats / bits);
  const fs::path timer_file = root / run_files::kTimerSummary;
  if (isPresent(timer_file)) {
    if (const auto timer = parseJson(files::readBoundedFile(timer_file.string(), files::kMaxRecordBytes))) {
      static const Json kNone;
      const Json* batch = memberOf(*timer, "batch");
      const auto median = numberAt(batch ? *batch : kNone, "median_duration");
      if (median) run.time_per_batch_ms = 1000.0 * *median;
      const auto mean = numberAt(batch ? *batch : kNone, "average_duration");
      if (mean) run.mean_time_per_batch_ms = 1000.0 * *mean;
    }
  }
  readMetrics(root / run_files::kMetrics, run);
  if (isPresent(root / run_files::kLayers)) run.layers = readLayerSummaries((root / run_files::kLayers).string());
  return run;
}

std::optional<RunData> loadRunOrSkip(const std::string& dir, std::vector<std::string>& skipped,
                                     const std::string& metric) {
  try {
    return loadRun(dir, metric);
  } catch (const UserError& e) {
    skipped.push_back(dir + ": " + e.what());
  } catch (const YAML::Exception& e) {
    skipped.push_back(dir + ": " + e.what());
  }
  return std::nullopt;
}

LoadedRuns loadRuns(const std::vector<std::string>& paths, const std::string& metric) {
  LoadedRuns loaded;
  const auto dirs = findRunDirectories(paths, loaded.skipped);
  loaded.found = dirs.size();
  for (const auto& dir : dirs) {
    if (auto run = loadRunOrSkip(dir, loaded.skipped, metric)) loaded.runs.push_back(std::move(*run));
  }
  return loaded;
}

}  // namespace gcrun::outputs
