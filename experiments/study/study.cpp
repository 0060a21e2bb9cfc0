#include "experiments/study/study.h"

#include <yaml-cpp/yaml.h>

#include <limits.h>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <filesystem>
#include <map>
#include <set>

#include "experiments/setup/embedded_yaml.h"
#include "experiments/setup/presets.h"
#include "experiments/setup/resolved_experiment.h"
#include "hyperparams/base/errors.h"
#include "hyperparams/base/text.h"
#include "hyperparams/config_io.h"
#include "outputs/files/safe_files.h"
#include "outputs/network/network_profile.h"
#include "outputs/performance/report_projection.h"

namespace gcrun::experiments {
namespace {

const std::vector<std::string> kStudyKeys = {"description", "base",  "set",       "runs",
                                             "grid",        "seeds", "processes", "predict"};

std::string flow(const YAML::Node& node) {
  YAML::Emitter out;
  out << YAML::Flow << node;
  return out.c_str();
}

std::string text(const YAML::Node& node, const std::string& what) {
  if (!node.IsScalar()) throw UserError(what + " must be a string, got '" + clipForMessage(flow(node)) + "'");
  return node.Scalar();
}

// A mapping's keys, in order. yaml-cpp keeps both entries of a key written twice but looks up only
// the first, so a repeated key is refused here rather than half ignored.
std::vector<std::string> keysOf(const YAML::Node& map, const std::string& where) {
  std::vector<std::string> keys;
  for (const auto& item : map) {
    auto key = text(item.first, where + ": a key");
    if (std::find(keys.begin(), keys.end(), key) != keys.end()) {
      throw UserError(where + ": key '" + clipForMessage(key) + "' is given twice; keep one");
    }
    keys.push_back(std::move(key));
  }
  return keys;
}

// A `set` mapping as key=value assignments; nested sections become dotted keys, and a key given
// twice (`training: {epochs: 1}` and `training.epochs: 2`) is refused.
void assignmentsOf(const YAML::Node& node, const std::string& prefix, const std::string& where,
                   std::vector<std::string>& out, std::set<std::string>& given) {
  if (!node.IsMap())
    throw UserError(where + ": `set` must be a mapping of keys to values, got '" + clipForMessage(flow(node)) + "'");
  for (const auto& item : node) {
    const std::string key = prefix + text(item.first, where + ": a key of `set`");
    if (item.second.IsMap()) {
      assignmentsOf(item.second, key + ".", where, out, given);
    } else if (!given.insert(key).second) {
      throw UserError(where + ": `set` gives '" + clipForMessage(key) + "' twice; keep one");
    } else {
      out.push_back(key + "=" + flow(item.second));
    }
  }
}

void assignmentsOf(const YAML::Node& node, const std::string& where, std::vector<std::string>& out) {
  std::set<std::string> given;
  assignmentsOf(node, "", where, out, given);
}

// predict: {workers: [2, 16], bandwidth: [1gbit, 10gbit], latency: 20us, headline: "workers=16,bandwidth=10gbit"}
StudySpec::Prediction predictionOf(const YAML::Node& node, const std::string& source) {
  const std::string where = source + ": predict";
  if (!node.IsMap()) throw UserError(where + " must be a mapping of workers, bandwidth, latency and headline");
  StudySpec::Prediction prediction;
  for (const auto& key : keysOf(node, where)) {
    const auto value = node[key];
    if (key == "workers" || key == "bandwidth") {
      if (!value.IsSequence() || value.size() == 0) throw UserError(where + "." + key + " must be a non-empty list");
      for (const auto& item : value) {
        if (key == "bandwidth") {
          const auto bandwidth = text(item, where + ".bandwidth");
          network::parseBandwidth(bandwidth, where + ".bandwidth");
          prediction.bandwidths.push_back(bandwidth);
          continue;
        }
        int workers = 0;
        if (!YAML::convert<int>::decode(item, workers) || workers < 1) {
          throw UserError(where + ".workers: '" + clipForMessage(flow(item)) + "' is not a whole number of at least 1");
        }
        prediction.workers.push_back(workers);
      }
    } else if (key == "latency") {
      prediction.latency = text(value, where + ".latency");
      network::parseDuration(prediction.latency, where + ".latency");
    } else if (key == "headline") {
      prediction.headline = text(value, where + ".headline");
      performance::parseProjection(prediction.headline, where + ".headline");
    } else {
      throw UserError(where + ": unknown key '" + clipForMessage(key) +
                      "'; it has workers, bandwidth, latency, headline");
    }
  }
  if (prediction.workers.empty() || prediction.bandwidths.empty()) {
    throw UserError(where + " needs workers and bandwidth lists");
  }
  return prediction;
}

StudySpec parse(const std::string& yaml, StudySpec spec) {
  YAML::Node root;
  try {
    root = YAML::Load(yaml);
  } catch (const YAML::Exception& e) {
    throw UserError(spec.source + ": invalid YAML at line " + std::to_string(e.mark.line + 1) + ": " + e.msg);
  }
  if (hyperparams::exceedsValueLimit(root)) {
    throw UserError(spec.source + ": holds more than " + std::to_string(hyperparams::kMaxYamlValues) +
                    " values once its YAML aliases are expanded; a study needs far fewer");
  }
  if (!root.IsMap())
    throw UserError(spec.source +
                    ": a study is a YAML mapping (description, base, set, runs, grid, seeds, processes, predict)");
  for (const auto& key : keysOf(root, spec.source)) {
    if (std::find(kStudyKeys.begin(), kStudyKeys.end(), key) == kStudyKeys.end()) {
      throw UserError(spec.source + ": unknown key '" + clipForMessage(key) +
                      "'; a study has description, base, set, runs, grid, seeds, processes and predict");
    }
  }
  if (root["description"]) spec.description = text(root["description"], spec.source + ": description");
  if (!root["base"]) throw UserError(spec.source + ": `base` is missing; name the preset every run starts from");
  spec.base = text(root["base"], spec.source + ": base");
  if (root["set"]) assignmentsOf(root["set"], spec.source, spec.assignments);
  if (const auto runs = root["runs"]) {
    if (!runs.IsSequence()) throw UserError(spec.source + ": `runs` must be a list of {name, preset, set}");
    for (const auto& run : runs) {
      if (!run.IsMap() || !run["name"]) throw UserError(spec.source + ": every entry of `runs` needs a name");
      StudySpec::Entry entry{text(run["name"], spec.source + ": a run's name"), spec.base, {}};
      const std::string where = spec.source + ": run '" + clipForMessage(entry.name) + "'";
      for (const auto& key : keysOf(run, where)) {
        if (key == "preset") {
          entry.preset = text(run[key], where + ": preset");
        } else if (key == "set") {
          assignmentsOf(run[key], where, entry.assignments);
        } else if (key != "name") {
          throw UserError(where + ": unknown key '" + clipForMessage(key) + "'; a run has name, preset and set");
        }
      }
      spec.runs.push_back(std::move(entry));
    }
  }
  if (const auto grid = root["grid"]) {
    if (!grid.IsMap()) throw UserError(spec.source + ": `grid` must map keys to lists of values");
    for (const auto& key : keysOf(grid, spec.source + ": grid")) {
      const auto list = grid[key];
      if (!list.IsSequence() || list.size() == 0) {
        throw UserError(spec.source + ": grid key '" + clipForMessage(key) + "' must have a non-empty list of values");
      }
      std::vector<std::string> values;
      for (const auto& value : list) values.push_back(flow(value));
      spec.grid.emplace_back(key, std::move(values));
    }
  }
  if (const auto seeds = root["seeds"]) {
    spec.seeds.clear();
    for (const auto& seed : seeds.IsSequence() ? seeds : YAML::Node(std::vector<YAML::Node>{seeds})) {
      int64_t value = -1;
      if (!YAML::convert<int64_t>::decode(seed, value) || value < 0) {
        throw UserError(spec.source + ": seeds must be a list of integers >= 0, got '" + clipForMessage(flow(seed)) +
                        "'");
      }
      // The same seed twice would be one run directory counted as two runs.
      if (std::find(spec.seeds.begin(), spec.seeds.end(), value) != spec.seeds.end()) {
        throw UserError(spec.source + ": seed " + std::to_string(value) + " is listed twice in seeds; keep one");
      }
      spec.seeds.push_back(value);
    }
    if (spec.seeds.empty()) throw UserError(spec.source + ": seeds is empty");
  }
  if (const auto processes = root["processes"]) {
    if (!YAML::convert<int>::decode(processes, spec.processes) || spec.processes < 1 || spec.processes > 1024) {
      throw UserError(spec.source + ": processes must be a whole number of workers per run from 1 to 1024, got '" +
                      clipForMessage(flow(processes)) + "'");
    }
  }
  if (root["predict"]) spec.predict = predictionOf(root["predict"], spec.source);
  if (spec.runs.empty() && spec.grid.empty()) spec.runs.push_back({spec.base, spec.base, {}});
  return spec;
}

// A file-name-safe spelling of a value: "0.01" stays, "[1, 2]" becomes "_1__2_".
std::string safe(const std::string& text) {
  std::string out;
  for (char c : text) out += (std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '-') ? c : '_';
  return out;
}

// Every combination of the grid's values, as assignments, with the configuration-name suffix.
std::vector<std::pair<std::string, std::vector<std::string>>> gridPoints(const StudySpec& spec) {
  std::vector<std::pair<std::string, std::vector<std::string>>> points = {{"", {}}};
  for (const auto& [key, values] : spec.grid) {
    std::vector<std::pair<std::string, std::vector<std::string>>> next;
    const std::string short_key = key.substr(key.rfind('.') + 1);
    for (const auto& point : points) {
      for (const auto& value : values) {
        auto assignments = point.second;
        assignments.push_back(key + "=" + value);
        next.emplace_back(point.first + (point.first.empty() ? "" : "-") + short_key + safe(value), assignments);
      }
    }
    points = std::move(next);
  }
  return points;
}

// A count of runs as messages show it: exact while a long double holds it exactly.
std::string countText(long double count) {
  if (count < 1e18L) return std::to_string(static_cast<uint64_t>(count));
  char text[32];
  std::snprintf(text, sizeof(text), "%.3Lg", count);
  return text;
}

// The runs the study asks for at most (a grid point that changes nothing in a run is dropped
// later), refused above kMaxStudyRuns before any of them is built. Counted in long double: a
// grid of a few thousand keys overflows any integer.
void checkRunCount(const StudySpec& spec) {
  long double points = 1;
  for (const auto& [key, values] : spec.grid) points *= values.size();
  const long double configurations =
      spec.runs.empty() ? points : spec.runs.size() * (spec.grid.empty() ? 1 : 1 + points);
  const long double runs = configurations * spec.seeds.size();
  if (runs <= kMaxStudyRuns) return;
  throw UserError(spec.source + ": the study asks for up to " + countText(runs) + " runs (" +
                  countText(configurations) + " configurations x " + std::to_string(spec.seeds.size()) +
                  " seeds), more than the " + std::to_string(kMaxStudyRuns) + " a study may have; split it");
}

// One configuration of a study, resolved once; its runs differ from it only in their seed.
struct Configuration {
  std::string name;
  std::string preset;
  std::vector<std::string> assignments;
  ResolvedExperiment experiment;
};

Configuration resolveConfiguration(const StudySpec& spec, const std::string& name, const std::string& preset,
                                   std::vector<std::string> assignments) {
  ExperimentRequest request;
  request.preset = preset;
  request.assignments = assignments;
  try {
    return {name, preset, std::move(assignments), resolveExperiment(request)};
  } catch (const UserError& e) {
    const std::string what = name.empty() ? "the base" : "run '" + name + "'";
    throw UserError(spec.source + ": " + what + ": " + e.what());
  }
}

// The study's configurations: the grid's points over the base, or each run and, with a grid, each
// point over it that changes what the run reads.
std::vector<Configuration> configurationsOf(const StudySpec& spec, const std::vector<std::string>& extra_assignments) {
  std::vector<Configuration> configurations;
  const auto with = [&](std::vector<std::string> assignments, const std::vector<std::string>& more) {
    assignments.insert(assignments.begin(), spec.assignments.begin(), spec.assignments.end());
    assignments.insert(assignments.end(), more.begin(), more.end());
    assignments.insert(assignments.end(), extra_assignments.begin(), extra_assignments.end());
    return assignments;
  };
  const auto points = gridPoints(spec);
  if (spec.runs.empty()) {
    for (const auto& [suffix, grid] : points) {
      configurations.push_back(resolveConfiguration(spec, suffix, spec.base, with(grid, {})));
    }
  }
  for (const auto& entry : spec.runs) {
    const auto own = resolveConfiguration(spec, entry.name, entry.preset, with(entry.assignments, {}));
    configurations.push_back(own);
    if (spec.grid.empty()) continue;
    for (const auto& [suffix, grid] : points) {
      const bool read =
          std::all_of(spec.grid.begin(), spec.grid.end(), [&](const auto& g) { return own.experiment.reads(g.first); });
      if (!read) continue;
      auto point = resolveConfiguration(spec, entry.name + "-" + suffix, entry.preset, with(entry.assignments, grid));
      if (point.experiment.config_yaml != own.experiment.config_yaml) configurations.push_back(std::move(point));
    }
  }
  return configurations;
}

// Two configurations that spell alike would share run directories.
void checkFolderNames(const StudySpec& spec, const std::vector<Configuration>& configurations) {
  std::map<std::string, std::string> folders;
  for (const auto& configuration : configurations) {
    const auto [other, added] = folders.emplace(safe(configuration.name), configuration.name);
    if (!added && other->second == configuration.name) {
      throw UserError(spec.source + ": two configurations are named '" + clipForMessage(configuration.name) +
                      "'; give runs distinct names");
    }
    if (!added) {
      throw UserError(spec.source + ": configurations '" + clipForMessage(other->second) + "' and '" +
                      clipForMessage(configuration.name) + "' would both run in runs/" + clipForMessage(other->first) +
                      "-seed<k>; rename one");
    }
  }
}

}  // namespace

StudySpec loadStudy(const std::string& name_or_file) {
  for (const auto& study : embeddedStudies()) {
    if (name_or_file != study.name) continue;
    StudySpec spec;
    spec.name = study.name;
    spec.source = "study " + name_or_file;
    return parse(study.yaml, spec);
  }
  namespace fs = std::filesystem;
  std::error_code error;
  if (!fs::exists(fs::symlink_status(name_or_file, error))) {
    std::string known;
    for (const auto& study : embeddedStudies()) known += (known.empty() ? "" : ", ") + std::string(study.name);
    throw UserError("study '" + clipForMessage(name_or_file) + "' is neither a built-in study (" + known +
                    ") nor a YAML file");
  }
  // A study file may come from anyone: a FIFO, a device or a huge file is refused, not read.
  const std::string yaml = files::readBoundedFile(name_or_file, files::kMaxConfigBytes);
  StudySpec spec;
  spec.name = fs::path(name_or_file).stem().string();
  spec.source = "file " + name_or_file;
  spec.file = fs::absolute(name_or_file).string();
  return parse(yaml, spec);
}

std::vector<StudyInfo> listStudies() {
  std::vector<StudyInfo> studies;
  for (const auto& study : embeddedStudies()) studies.push_back({study.name, loadStudy(study.name).description});
  return studies;
}

std::vector<StudyRun> planStudy(const StudySpec& spec, const std::vector<std::string>& extra_assignments) {
  checkRunCount(spec);
  const auto configurations = configurationsOf(spec, extra_assignments);
  checkFolderNames(spec, configurations);
  const auto keys = configKeys();
  std::vector<StudyRun> runs;
  for (const auto& configuration : configurations) {
    for (const int64_t seed : spec.seeds) {
      StudyRun run;
      run.index = runs.size();
      run.config = configuration.name;
      run.seed = seed;
      run.preset = configuration.preset;
      run.assignments = configuration.assignments;
      run.assignments.push_back("seed=" + std::to_string(seed));
      run.dir_name = safe(configuration.name) + "-seed" + std::to_string(seed);
      // logs/<dir_name>.log is the longest name the study writes.
      if (run.dir_name.size() + 4 > NAME_MAX) {
        throw UserError(spec.source + ": run '" + clipForMessage(run.dir_name) + "' has a name of " +
                        std::to_string(run.dir_name.size()) + " bytes; with .log added it must fit a file name (" +
                        std::to_string(NAME_MAX) + " bytes): shorten the configuration's name");
      }
      // The seed (an integer >= 0, as parse() checked) is the one setting a run adds.
      auto config = configuration.experiment.config;
      config.seed = seed;
      run.config_yaml = hyperparams::toYaml(config, keys);
      runs.push_back(std::move(run));
    }
  }
  return runs;
}

bool asksFor(const StudyRun& run, const std::string& written) {
  if (written == run.config_yaml) return true;
  ExperimentConfig config;
  config.experiment = hyperparams::experimentNamedIn(written);
  const auto keys = configKeys();
  try {
    hyperparams::applyYaml(config, written, run.dir_name + "/config.yaml", keys);
  } catch (const UserError&) {
    return false;
  } catch (const YAML::Exception&) {
    return false;
  }
  return hyperparams::toYaml(config, keys) == run.config_yaml;
}

}  // namespace gcrun::experiments
