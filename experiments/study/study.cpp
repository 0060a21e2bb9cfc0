#include "experiments/study/study.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include "experiments/presets.h"
#include "experiments/runner.h"
#include "experiments/embedded_yaml.h"
#include "hyperparams/base/errors.h"
#include "hyperparams/base/text.h"
#include "hyperparams/config_io.h"
#include "reducers/reducer.h"

namespace gcrun::experiments {
namespace {

const std::vector<std::string> kStudyKeys = {"description", "base", "set", "runs", "grid", "seeds"};

std::string flow(const YAML::Node& node) {
  YAML::Emitter out;
  out << YAML::Flow << node;
  return out.c_str();
}

// A `set` mapping as key=value assignments; nested sections become dotted keys.
void assignmentsOf(const YAML::Node& node, const std::string& prefix, const std::string& where,
                   std::vector<std::string>& out) {
  if (!node.IsMap()) throw UserError(where + ": `set` must be a mapping of keys to values, got '" + clipForMessage(flow(node)) + "'");
  for (const auto& item : node) {
    const std::string key = prefix + item.first.as<std::string>();
    if (item.second.IsMap()) {
      assignmentsOf(item.second, key + ".", where, out);
    } else {
      out.push_back(key + "=" + flow(item.second));
    }
  }
}

std::string text(const YAML::Node& node, const std::string& what) {
  if (!node.IsScalar()) throw UserError(what + " must be a string, got '" + clipForMessage(flow(node)) + "'");
  return node.Scalar();
}

StudySpec parse(const std::string& yaml, StudySpec spec) {
  YAML::Node root;
  try {
    root = YAML::Load(yaml);
  } catch (const YAML::Exception& e) {
    throw UserError(spec.source + ": invalid YAML at line " + std::to_string(e.mark.line + 1) + ": " + e.msg);
  }
  if (!root.IsMap()) throw UserError(spec.source + ": a study is a YAML mapping (description, base, set, runs, grid, seeds)");
  for (const auto& item : root) {
    const auto key = item.first.as<std::string>();
    if (std::find(kStudyKeys.begin(), kStudyKeys.end(), key) == kStudyKeys.end()) {
      throw UserError(spec.source + ": unknown key '" + clipForMessage(key) +
                      "'; a study has description, base, set, runs, grid and seeds");
    }
  }
  if (root["description"]) spec.description = text(root["description"], spec.source + ": description");
  if (!root["base"]) throw UserError(spec.source + ": `base` is missing; name the preset every run starts from");
  spec.base = text(root["base"], spec.source + ": base");
  if (root["set"]) assignmentsOf(root["set"], "", spec.source, spec.assignments);
  if (const auto runs = root["runs"]) {
    if (!runs.IsSequence()) throw UserError(spec.source + ": `runs` must be a list of {name, preset, set}");
    for (const auto& run : runs) {
      if (!run.IsMap() || !run["name"]) throw UserError(spec.source + ": every entry of `runs` needs a name");
      StudySpec::Entry entry{text(run["name"], spec.source + ": a run's name"), spec.base, {}};
      for (const auto& item : run) {
        const auto key = item.first.as<std::string>();
        if (key == "preset") {
          entry.preset = text(item.second, spec.source + ": run '" + entry.name + "': preset");
        } else if (key == "set") {
          assignmentsOf(item.second, "", spec.source + ": run '" + entry.name + "'", entry.assignments);
        } else if (key != "name") {
          throw UserError(spec.source + ": run '" + entry.name + "': unknown key '" + clipForMessage(key) +
                          "'; a run has name, preset and set");
        }
      }
      spec.runs.push_back(std::move(entry));
    }
  }
  if (const auto grid = root["grid"]) {
    if (!grid.IsMap()) throw UserError(spec.source + ": `grid` must map keys to lists of values");
    for (const auto& item : grid) {
      const auto key = item.first.as<std::string>();
      if (!item.second.IsSequence() || item.second.size() == 0) {
        throw UserError(spec.source + ": grid key '" + key + "' must have a non-empty list of values");
      }
      std::vector<std::string> values;
      for (const auto& value : item.second) values.push_back(flow(value));
      spec.grid.emplace_back(key, std::move(values));
    }
  }
  if (const auto seeds = root["seeds"]) {
    spec.seeds.clear();
    for (const auto& seed : seeds.IsSequence() ? seeds : YAML::Node(std::vector<YAML::Node>{seeds})) {
      int64_t value = -1;
      if (!YAML::convert<int64_t>::decode(seed, value) || value < 0) {
        throw UserError(spec.source + ": seeds must be a list of integers >= 0, got '" + clipForMessage(flow(seed)) + "'");
      }
      spec.seeds.push_back(value);
    }
    if (spec.seeds.empty()) throw UserError(spec.source + ": seeds is empty");
  }
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

struct Configuration {
  std::string name;
  std::string preset;
  std::vector<std::string> assignments;
};

ExperimentConfig resolve(const StudySpec& spec, const std::string& what, const std::string& preset,
                         const std::vector<std::string>& assignments) {
  try {
    auto config = resolveExperiment(preset, "", assignments);
    checkConfig(config);
    return config;
  } catch (const UserError& e) {
    throw UserError(spec.source + ": " + what + ": " + e.what());
  }
}

}  // namespace

bool reducerReads(const std::string& reducer, const std::string& key) {
  if (key.rfind("reducer.", 0) != 0 || key == "reducer.name" || key == "reducer.granularity" || key == "reducer.bucket_mb") {
    return true;
  }
  if (!reducers::reducerRegistry().contains(reducer)) return true;
  const auto& settings = reducers::reducerRegistry().at(reducer).factory.settings;
  const std::string name = key.substr(8);
  return std::any_of(settings.begin(), settings.end(), [&](const auto& s) { return s.name == name; });
}

StudySpec loadStudy(const std::string& name_or_file) {
  for (const auto& study : embeddedStudies()) {
    if (name_or_file == study.name) return parse(study.yaml, StudySpec{study.name, "study " + name_or_file, "", "", "", {}, {}, {}});
  }
  namespace fs = std::filesystem;
  if (!fs::is_regular_file(name_or_file)) {
    std::string known;
    for (const auto& study : embeddedStudies()) known += (known.empty() ? "" : ", ") + std::string(study.name);
    throw UserError("study '" + name_or_file + "' is neither a built-in study (" + known + ") nor a YAML file");
  }
  std::ifstream in(name_or_file);
  std::stringstream yaml;
  yaml << in.rdbuf();
  if (!in) throw UserError("study file '" + name_or_file + "' cannot be read");
  StudySpec spec;
  spec.name = fs::path(name_or_file).stem().string();
  spec.source = "file " + name_or_file;
  spec.file = fs::absolute(name_or_file).string();
  return parse(yaml.str(), spec);
}

std::vector<StudyInfo> listStudies() {
  std::vector<StudyInfo> studies;
  for (const auto& study : embeddedStudies()) studies.push_back({study.name, loadStudy(study.name).description});
  return studies;
}

std::vector<StudyRun> planStudy(const StudySpec& spec, const std::vector<std::string>& extra_assignments) {
  std::vector<Configuration> configurations;
  const auto with = [&](std::vector<std::string> assignments, const std::vector<std::string>& more) {
    assignments.insert(assignments.begin(), spec.assignments.begin(), spec.assignments.end());
    assignments.insert(assignments.end(), more.begin(), more.end());
    assignments.insert(assignments.end(), extra_assignments.begin(), extra_assignments.end());
    return assignments;
  };
  const auto points = gridPoints(spec);
  if (spec.runs.empty()) {
    for (const auto& [suffix, grid] : points) configurations.push_back({suffix, spec.base, with(grid, {})});
  }
  for (const auto& entry : spec.runs) {
    const auto own = with(entry.assignments, {});
    configurations.push_back({entry.name, entry.preset, own});
    if (spec.grid.empty()) continue;
    const auto config = resolve(spec, "run '" + entry.name + "'", entry.preset, own);
    const auto yaml = hyperparams::toYaml(config);
    for (const auto& [suffix, grid] : points) {
      const bool read = std::all_of(spec.grid.begin(), spec.grid.end(),
                                    [&](const auto& g) { return reducerReads(config.reducer.name, g.first); });
      if (!read) continue;
      auto assignments = with(entry.assignments, grid);
      const std::string name = entry.name + "-" + suffix;
      if (hyperparams::toYaml(resolve(spec, "run '" + name + "'", entry.preset, assignments)) == yaml) continue;
      configurations.push_back({name, entry.preset, std::move(assignments)});
    }
  }
  std::set<std::string> names;
  std::vector<StudyRun> runs;
  for (const auto& configuration : configurations) {
    if (!names.insert(configuration.name).second) {
      throw UserError(spec.source + ": two configurations are named '" + configuration.name + "'; give runs distinct names");
    }
    for (const int64_t seed : spec.seeds) {
      StudyRun run;
      run.index = runs.size();
      run.config = configuration.name;
      run.seed = seed;
      run.preset = configuration.preset;
      run.assignments = configuration.assignments;
      run.assignments.push_back("seed=" + std::to_string(seed));
      run.dir_name = safe(configuration.name) + "-seed" + std::to_string(seed);
      run.config_yaml = hyperparams::toYaml(resolve(spec, "run '" + run.dir_name + "'", run.preset, run.assignments));
      runs.push_back(std::move(run));
    }
  }
  return runs;
}

}  // namespace gcrun::experiments
