#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "hyperparams/base/units.h"
#include "outputs/performance/predict_options.h"
#include "outputs/performance/report_projection.h"

namespace gcrun::experiments {

// A study: the configurations of a paper table (or any comparison), each run with several seeds.
// Written as YAML (a file, or a built-in from experiments/study/studies/):
//   description: SGD vs PowerSGD ranks on Fashion-MNIST
//   base: fashion-sgd                 # the preset every run starts from
//   set: {training.epochs: 3}         # overrides for every run
//   runs:                             # the configurations: a name, a preset (default: base), overrides
//     - {name: sgd}
//     - {name: rank1, preset: fashion-powersgd-rank1}
//   grid: {reducer.rank: [2, 4]}      # more configurations, see below
//   seeds: [1, 2, 3]
// The grid's combinations of values are added to every run that reads all the grid's keys (a
// reducer.* setting is read by the reducers that declare it, any other key by every run) as new
// configurations named <run>-<key><value>..., except where a combination changes nothing in that
// run (rank1 with reducer.rank: 1). Without runs the grid applies to the base.
struct StudySpec {
  struct Entry {
    std::string name;
    std::string preset;
    std::vector<std::string> assignments;  // key=value
  };
  std::string name;    // the built-in's name or the file's stem
  std::string source;  // "study NAME" or "file PATH", for messages
  std::string file;    // the file it came from, "" for a built-in
  std::string description;
  std::string base;
  std::vector<std::string> assignments;
  std::vector<Entry> runs;
  std::vector<std::pair<std::string, std::vector<std::string>>> grid;  // key, values as YAML text
  std::vector<int64_t> seeds = {1};
  int processes = 1;  // `processes:` workers per run, unless --nproc-per-node says otherwise
  // `predict:` the report's prediction over worker counts and links (gcrun predict), and the one
  // point (`headline`, as report --predict takes it) its table's projected columns show.
  // Each value parsed once, when the study file is read.
  struct Prediction {
    std::vector<int> workers;
    std::vector<double> bandwidths;  // bytes per second
    double latency_s = units::parseDuration(units::kDefaultLatency, "latency");
    std::vector<int64_t> sync_every;  // what-ifs over H for runs that sync models
    std::optional<double> target_cu;  // recommend the cheapest configuration reaching it
    std::optional<performance::ProjectionSpec> headline;
    performance::QualityTolerance quality;  // as gcrun predict --quality-tolerance takes it
  };
  std::optional<Prediction> predict;
};

// Far more than any table of a paper; a grid of a few keys multiplies quickly, and every run is
// resolved (and would be started) before anything is checked. study.json lists no more.
constexpr uint64_t kMaxStudyRuns = 100000;

// A built-in study by name, else a YAML file. Throws UserError naming the file and the key at fault.
StudySpec loadStudy(const std::string& name_or_file);

struct StudyInfo {
  std::string name;
  std::string description;
};
std::vector<StudyInfo> listStudies();

// One run of a study: a configuration with one seed, in DIR/runs/<dir_name>.
struct StudyRun {
  size_t index = 0;
  std::string config;  // the configuration's name
  int64_t seed = 0;
  std::string preset;
  std::vector<std::string> assignments;  // the study's, the configuration's, --set, then seed=<k>
  std::string dir_name;                  // <config>-seed<k>
  std::string config_yaml;               // the resolved configuration, as the run writes it
};

// Every (configuration x seed) in order, each resolved as `gcrun experiment` would: a bad preset,
// key or value in any of them is a UserError naming the run, before anything runs.
// `extra_assignments` (--set on `gcrun study`) apply to every run after the study's own.
std::vector<StudyRun> planStudy(const StudySpec& spec, const std::vector<std::string>& extra_assignments);

// Whether `written` (a run directory's config.yaml) is the configuration `run` asks for. It is
// read through this gcrun's key table, so that a key added since the run was written counts at its
// default, and a study made by an older gcrun resumes; a key this gcrun lacks means no.
bool asksFor(const StudyRun& run, const std::string& written);

}  // namespace gcrun::experiments
