#include "experiments/study/study.h"
#include "experiments/study/study_text.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <filesystem>
#include <set>

#include "experiments/setup/embedded_yaml.h"
#include "hyperparams/base/errors.h"
#include "hyperparams/base/text.h"
#include "hyperparams/config_io.h"
#include "outputs/files/safe_files.h"
#include "outputs/network/network_profile.h"
#include "outputs/performance/report_projection.h"

// A study's YAML, read: loadStudy() and listStudies(). planStudy() is in study.cpp.
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

// predict: {workers: [2, 16], bandwidth: [1gbit, 10gbit], latency: 20us, sync_every: [8, 32],
//           target_cu: 0.9, headline: "workers=16,bandwidth=10gbit", quality_tolerance: 0.02}
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
          prediction.bandwidths.push_back(
              units::parseBandwidth(text(item, where + ".bandwidth"), where + ".bandwidth"));
          continue;
        }
        int workers = 0;
        if (!YAML::convert<int>::decode(item, workers) || workers < 1) {
          throw UserError(where + ".workers: '" + clipForMessage(flow(item)) + "' is not a whole number of at least 1");
        }
        prediction.workers.push_back(workers);
      }
    } else if (key == "sync_every") {
      if (!value.IsSequence() || value.size() == 0) throw UserError(where + ".sync_every must be a non-empty list");
      for (const auto& item : value) {
        prediction.sync_every.push_back(
            performance::parseSyncEvery(text(item, where + ".sync_every"), where + ".sync_every"));
      }
    } else if (key == "target_cu") {
      prediction.target_cu = performance::parseTargetCu(text(value, where + ".target_cu"), where + ".target_cu");
    } else if (key == "latency") {
      prediction.latency_s = units::parseDuration(text(value, where + ".latency"), where + ".latency");
    } else if (key == "headline") {
      prediction.headline = performance::parseProjection(text(value, where + ".headline"), where + ".headline");
    } else if (key == "quality_tolerance") {
      prediction.quality =
          performance::parseQualityTolerance(text(value, where + ".quality_tolerance"), where + ".quality_tolerance");
    } else {
      throw UserError(where + ": unknown key '" + clipForMessage(key) +
                      "'; it has workers, bandwidth, latency, sync_every, target_cu, headline, quality_tolerance");
    }
  }
  if (prediction.workers.empty() || prediction.bandwidths.empty()) {
    throw UserError(where + " needs workers and bandwidth lists");
  }
  return prediction;
}

YAML::Node loadRoot(const std::string& yaml, const std::string& source) {
  YAML::Node root;
  try {
    root = YAML::Load(yaml);
  } catch (const YAML::Exception& e) {
    throw UserError(source + ": invalid YAML at line " + std::to_string(e.mark.line + 1) + ": " + e.msg);
  }
  if (hyperparams::exceedsValueLimit(root)) {
    throw UserError(source + ": holds more than " + std::to_string(hyperparams::kMaxYamlValues) +
                    " values once its YAML aliases are expanded; a study needs far fewer");
  }
  if (!root.IsMap())
    throw UserError(source +
                    ": a study is a YAML mapping (description, base, set, runs, grid, seeds, processes, predict)");
  for (const auto& key : keysOf(root, source)) {
    if (std::find(kStudyKeys.begin(), kStudyKeys.end(), key) == kStudyKeys.end()) {
      throw UserError(source + ": unknown key '" + clipForMessage(key) +
                      "'; a study has description, base, set, runs, grid, seeds, processes and predict");
    }
  }
  return root;
}

// runs: [{name, preset, set}], each preset the base unless given.
std::vector<StudySpec::Entry> runsOf(const YAML::Node& runs, const StudySpec& spec) {
  if (!runs.IsSequence()) throw UserError(spec.source + ": `runs` must be a list of {name, preset, set}");
  std::vector<StudySpec::Entry> entries;
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
    entries.push_back(std::move(entry));
  }
  return entries;
}

// grid: {key: [values]}, the values kept as YAML text.
std::vector<std::pair<std::string, std::vector<std::string>>> gridOf(const YAML::Node& grid,
                                                                     const std::string& source) {
  if (!grid.IsMap()) throw UserError(source + ": `grid` must map keys to lists of values");
  std::vector<std::pair<std::string, std::vector<std::string>>> axes;
  for (const auto& key : keysOf(grid, source + ": grid")) {
    const auto list = grid[key];
    if (!list.IsSequence() || list.size() == 0) {
      throw UserError(source + ": grid key '" + clipForMessage(key) + "' must have a non-empty list of values");
    }
    std::vector<std::string> values;
    for (const auto& value : list) values.push_back(flow(value));
    axes.emplace_back(key, std::move(values));
  }
  return axes;
}

// seeds: a list of distinct integers >= 0, or one of them.
std::vector<int64_t> seedsOf(const YAML::Node& seeds, const std::string& source) {
  std::vector<int64_t> out;
  for (const auto& seed : seeds.IsSequence() ? seeds : YAML::Node(std::vector<YAML::Node>{seeds})) {
    int64_t value = -1;
    if (!YAML::convert<int64_t>::decode(seed, value) || value < 0) {
      throw UserError(source + ": seeds must be a list of integers >= 0, got '" + clipForMessage(flow(seed)) + "'");
    }
    // The same seed twice would be one run directory counted as two runs.
    if (std::find(out.begin(), out.end(), value) != out.end()) {
      throw UserError(source + ": seed " + std::to_string(value) + " is listed twice in seeds; keep one");
    }
    out.push_back(value);
  }
  if (out.empty()) throw UserError(source + ": seeds is empty");
  return out;
}

int processesOf(const YAML::Node& processes, const std::string& source) {
  int count = 0;
  if (!YAML::convert<int>::decode(processes, count) || count < 1 || count > 1024) {
    throw UserError(source + ": processes must be a whole number of workers per run from 1 to 1024, got '" +
                    clipForMessage(flow(processes)) + "'");
  }
  return count;
}

StudySpec parse(const std::string& yaml, StudySpec spec) {
  const auto root = loadRoot(yaml, spec.source);
  if (root["description"]) spec.description = text(root["description"], spec.source + ": description");
  if (!root["base"]) throw UserError(spec.source + ": `base` is missing; name the preset every run starts from");
  spec.base = text(root["base"], spec.source + ": base");
  if (root["set"]) assignmentsOf(root["set"], spec.source, spec.assignments);
  if (root["runs"]) spec.runs = runsOf(root["runs"], spec);
  if (root["grid"]) spec.grid = gridOf(root["grid"], spec.source);
  if (root["seeds"]) spec.seeds = seedsOf(root["seeds"], spec.source);
  if (root["processes"]) spec.processes = processesOf(root["processes"], spec.source);
  if (root["predict"]) spec.predict = predictionOf(root["predict"], spec.source);
  if (spec.runs.empty() && spec.grid.empty()) spec.runs.push_back({spec.base, spec.base, {}});
  return spec;
}

}  // namespace

StudySpec parseStudyText(const std::string& yaml, const std::string& source) {
  StudySpec spec;
  spec.name = source;
  spec.source = source;
  return parse(yaml, spec);
}

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

}  // namespace gcrun::experiments
