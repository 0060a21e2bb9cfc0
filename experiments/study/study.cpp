#include "experiments/study/study.h"

#include <yaml-cpp/yaml.h>

#include <limits.h>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <map>

#include "experiments/setup/presets.h"
#include "experiments/setup/resolved_experiment.h"
#include "hyperparams/base/errors.h"
#include "hyperparams/base/text.h"
#include "hyperparams/config_io.h"

// A study's plan: planStudy() and asksFor(). Its YAML is read in study_spec.cpp.
namespace gcrun::experiments {
namespace {

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
