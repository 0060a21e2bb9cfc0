#include "outputs/report/run_data.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <regex>

#include "hyperparams/base/errors.h"

namespace gcrun::outputs {
namespace {

namespace fs = std::filesystem;

std::optional<YAML::Node> loadFile(const fs::path& path) {
  try {
    if (!fs::is_regular_file(path)) return std::nullopt;
    return YAML::LoadFile(path.string());
  } catch (const YAML::Exception&) {
    return std::nullopt;
  }
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
    for (const auto& item : node) flatten(item.second, prefix + item.first.as<std::string>() + ".", out);
    return;
  }
  YAML::Emitter emitter;
  emitter << YAML::Flow << node;
  out[prefix.substr(0, prefix.size() - 1)] = emitter.c_str();
}

// The metric a report compares: the one the preset reproduces, else the first the run has of
// test accuracy, validation or test perplexity, else any test metric.
std::string chooseMetric(const std::string& paper_metric, const std::map<std::string, double>& finals) {
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
  std::ifstream in(path);
  const auto dot = run.metric.find('.');
  const std::string split = run.metric.substr(0, dot);
  const std::string name = dot == std::string::npos ? run.metric : run.metric.substr(dot + 1);
  std::map<int64_t, EpochPoint> by_step;  // the epoch-end events of one step
  std::map<int64_t, bool> has_metric;
  for (std::string line; std::getline(in, line);) {
    YAML::Node event;
    try {
      event = YAML::Load(line);
    } catch (const YAML::Exception&) {
      continue;  // a line cut short by a crash
    }
    if (!event.IsMap()) continue;
    const auto at = [&](const char* key) { return child(event, {key}); };
    const auto event_name = valueOr<std::string>(at("name"), "");
    const auto event_split = valueOr<std::string>(at("split"), "");
    const auto step = valueOr<int64_t>(at("step"), 0);
    const auto value = valueOr<double>(at("value"), 0);
    // The windowed events are the per-step training loss (named as its task names it) and rate.
    if (valueOr<int64_t>(at("window"), 0) > 0) {
      if (event_name != "learning_rate" && event_split == "train") run.losses.push_back({step, value});
      continue;
    }
    auto& point = by_step[step];
    point.epoch = valueOr<double>(at("epoch"), 0);
    point.mib = static_cast<double>(valueOr<uint64_t>(at("bits"), 0)) / 8.0 / (1 << 20);
    if (event_name == name && event_split == split) {
      point.metric = value;
      has_metric[step] = true;
    } else if (event_name == "elapsed_s") {
      point.elapsed_s = value;
    }
  }
  for (const auto& kv : by_step) {
    if (has_metric.count(kv.first)) run.epochs.push_back(kv.second);
  }
}

}  // namespace

std::vector<std::string> findRunDirectories(const std::vector<std::string>& paths) {
  std::vector<std::string> dirs;
  for (const auto& path : paths) {
    if (!fs::is_directory(path)) throw UserError("report: '" + path + "' is not a directory");
    if (fs::is_regular_file(fs::path(path) / "run.json")) dirs.push_back(fs::path(path).lexically_normal().string());
    for (auto it = fs::recursive_directory_iterator(path, fs::directory_options::skip_permission_denied);
         it != fs::recursive_directory_iterator(); ++it) {
      if (!it->is_directory()) continue;
      // A run's own folders (checkpoints) hold no runs.
      if (it->path().filename() == "checkpoints") {
        it.disable_recursion_pending();
      } else if (fs::is_regular_file(it->path() / "run.json")) {
        dirs.push_back(it->path().lexically_normal().string());
      }
    }
  }
  std::sort(dirs.begin(), dirs.end());
  dirs.erase(std::unique(dirs.begin(), dirs.end()), dirs.end());
  return dirs;
}

namespace {

// The name, configuration, seed and paper target of a run, from its directory and config.yaml.
void readConfig(const fs::path& root, const std::optional<YAML::Node>& config, RunData& run, std::string& paper_metric) {
  static const std::regex seed_suffix("(.*)-seed[0-9]+$");
  std::smatch match;
  const std::string base = root.filename().string();
  run.name = std::regex_match(base, match, seed_suffix) ? match[1].str() : base;
  if (config && config->IsMap()) {
    flatten(*config, "", run.settings);
    run.seed = valueOr<int64_t>(child(*config, {"seed"}), 0);
    run.synthetic = valueOr<bool>(child(*config, {"task", "synthetic"}), false);
    paper_metric = valueOr<std::string>(child(*config, {"paper", "metric"}), "");
    run.paper_source = valueOr<std::string>(child(*config, {"paper", "source"}), "");
    if (!paper_metric.empty()) run.paper_value = valueOr<double>(child(*config, {"paper", "value"}), 0);
    for (const auto& kv : run.settings) {
      if (kv.first != "seed") run.config_key += kv.first + "=" + kv.second + "\n";
    }
  }
}

}  // namespace

RunData runThatDidNotStart(const std::string& dir, const std::string& config_yaml, const std::string& status,
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

RunData loadRun(const std::string& dir) {
  RunData run;
  run.dir = dir;
  const fs::path root(dir);
  std::string paper_metric;
  readConfig(root, loadFile(root / "config.yaml"), run, paper_metric);
  const auto info = loadFile(root / "run.json");
  if (!info || !info->IsMap()) {
    run.status = "unreadable";
    return run;
  }
  const auto field = [&](const char* key) { return child(*info, {key}); };
  run.status = valueOr<std::string>(field("status"), "unknown");
  run.error = valueOr<std::string>(field("error"), "");
  run.experiment = valueOr<std::string>(field("experiment"), "");
  run.world_size = valueOr<int>(field("world_size"), 1);
  run.simulated_workers = valueOr<int>(field("simulated_workers"), 1);
  run.compute_per_batch_ms = valueOr<double>(field("compute_per_batch_ms"), 0);
  std::map<std::string, double> finals;
  if (field("final_metrics").IsMap()) {
    for (const auto& item : field("final_metrics")) finals[item.first.as<std::string>()] = valueOr<double>(item.second, 0);
  }
  run.metric = chooseMetric(paper_metric, finals);
  if (const auto found = finals.find(run.metric); found != finals.end()) run.final_value = found->second;
  const double bits = valueOr<double>(field("bits_sent"), 0);
  const double epochs = valueOr<double>(field("epochs_done"), 0);
  const double steps = valueOr<double>(field("steps"), 0);
  const double parameters = valueOr<double>(field("num_parameters"), 0);
  if (epochs > 0) run.mib_per_epoch = bits / 8.0 / (1 << 20) / epochs;
  if (bits > 0) run.compression = 32.0 * parameters * steps / bits;
  if (const auto timer = loadFile(root / "timer_summary.json"); timer && child(*timer, {"batch"})) {
    run.time_per_batch_ms = 1000.0 * valueOr<double>(child(*timer, {"batch", "median_duration"}), 0);
  }
  readMetrics(root / "metrics.jsonl", run);
  return run;
}

}  // namespace gcrun::outputs
