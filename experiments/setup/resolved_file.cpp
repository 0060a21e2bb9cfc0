#include "experiments/setup/resolved_file.h"

#include <map>

#include <yaml-cpp/yaml.h>

#include "hyperparams/base/errors.h"
#include "hyperparams/base/text.h"
#include "hyperparams/config_io.h"
#include "outputs/files/safe_files.h"

namespace gcrun::experiments {
namespace {

// What each value's source may say: the kinds layeredConfig records (hyperparams::ValueSources).
bool isSourceKind(const std::string& source) {
  if (source == "default") return true;
  for (const char* kind : {"preset ", "--config ", "--set "}) {
    if (source.rfind(kind, 0) == 0) return true;
  }
  return false;
}

// run.json copies the sources as they are: only a key of the table (each once, so at most the
// table's size) with a source of a known kind passes; the file's own bound bounds their bytes.
void checkSources(const std::string& path, const hyperparams::ValueSources& sources,
                  const hyperparams::ConfigKeys& keys) {
  for (const auto& [key, source] : sources) {
    const std::string entry = "--resolved " + path + ": its sources entry '" + clipForMessage(key) + "'";
    if (!keys.find(key)) throw UserError(entry + " is no configuration key; not a file gcrun's launcher wrote");
    if (!isSourceKind(source)) {
      throw UserError(entry + " says '" + clipForMessage(source) +
                      "', which is none of: default, preset NAME, --config FILE:LINE, --set KEY=VALUE; not a file "
                      "gcrun's launcher wrote");
    }
  }
}

// What a worker of gcrun's launcher starts from: the file resolvedFileText wrote.
ExperimentConfig launcherResolved(const std::string& path, const hyperparams::ConfigKeys& keys) {
  const auto text = files::readBoundedFile(path, 4 * files::kMaxConfigBytes);
  ExperimentConfig config;
  try {
    const auto root = YAML::Load(text);
    const auto config_yaml = root["config"].as<std::string>();
    hyperparams::applyYaml(config, config_yaml, "file " + path, keys);
    config.experiment = hyperparams::experimentNamedIn(config_yaml);
    config.sources = root["sources"].as<std::map<std::string, std::string>>();
  } catch (const YAML::Exception& e) {
    throw UserError("--resolved " + path + ": not a file gcrun's launcher wrote (" + e.what() + ")");
  }
  checkSources(path, config.sources, keys);
  return config;
}

}  // namespace

std::string resolvedFileText(const ResolvedExperiment& experiment) {
  YAML::Emitter out;
  out << YAML::BeginMap << YAML::Key << "config" << YAML::Value << experiment.config_yaml;
  out << YAML::Key << "sources" << YAML::Value << experiment.config.sources << YAML::EndMap;
  return std::string(out.c_str()) + "\n";
}

ResolvedExperiment readResolvedFile(const std::string& path) {
  const auto keys = configKeys();
  return resolve(launcherResolved(path, keys), keys);
}

}  // namespace gcrun::experiments
