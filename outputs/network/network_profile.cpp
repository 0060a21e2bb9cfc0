// network.yaml: read (every error one line naming the file and the key), written, and built by hand.
#include "outputs/network/network_profile.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <regex>
#include <set>
#include <stdexcept>
#include <tuple>
#include <utility>

#include <yaml-cpp/yaml.h>

#include "hyperparams/base/decimal.h"
#include "hyperparams/base/errors.h"
#include "hyperparams/base/text.h"
#include "hyperparams/base/units.h"
#include "hyperparams/config_io.h"
#include "outputs/files/safe_files.h"
#include "outputs/network/shortest_number.h"

namespace gcrun::network {
namespace {

constexpr CollectiveKind kCollectives[] = {CollectiveKind::all_reduce, CollectiveKind::all_gather,
                                           CollectiveKind::broadcast};
// max_relative_residual is informative; a fit that far off is no fit.
constexpr double kMaxResidual = 1e6;

// A range's bound in the messages: 1000, not 1e+03.
std::string wholeText(double bound) {
  char text[32];
  std::snprintf(text, sizeof(text), "%.17g", bound);
  return text;
}

// Errors in one file: each names the file and the key.
class ProfileReader {
 public:
  explicit ProfileReader(std::string source) : source_(std::move(source)) {}

  [[noreturn]] void fail(const std::string& key, const std::string& problem) const {
    throw UserError(source_ + ": " + key + ": " + problem);
  }

  // A mapping whose keys are all in `known`, each given once (yaml-cpp keeps both entries of a key
  // written twice, and a lookup finds only the first).
  void checkMap(const YAML::Node& node, const std::string& key, const std::set<std::string>& known) const {
    if (!node.IsMap()) fail(key, "expected a mapping");
    std::string names;
    for (const auto& name : known) names += (names.empty() ? "" : ", ") + name;
    std::set<std::string> given;
    for (const auto& entry : node) {
      const auto name = entry.first.Scalar();
      if (!known.count(name)) fail(prefixed(key, clipForMessage(name, 60)), "unknown key; known: " + names);
      if (!given.insert(name).second) fail(prefixed(key, name), "given twice; keep one");
    }
  }

  std::string text(const YAML::Node& node, const std::string& key) const {
    if (!node.IsScalar()) fail(key, "expected a single value");
    return node.Scalar();
  }

  // A plain decimal from `min` to `max`.
  double number(const YAML::Node& node, const std::string& key, double min, double max) const {
    const auto value = text(node, key);
    const auto number = parseDecimal(value);
    if (!number || *number < min || *number > max) {
      fail(key, "'" + clipForMessage(value, 60) + "' is not a number from " + wholeText(min) + " to " + wholeText(max));
    }
    return *number;
  }

  // A message size: whole bytes (gcrun writes 1000000 as 1e+06), so that neighbouring samples
  // differ by a byte or more and the slope between them stays finite.
  double bytes(const YAML::Node& node, const std::string& key) const {
    const auto value = text(node, key);
    const auto number = parseDecimal(value);
    if (!number || *number < 0 || *number > kMaxSampleBytes || std::floor(*number) != *number) {
      fail(key,
           "'" + clipForMessage(value, 60) + "' is not a size in whole bytes from 0 to " + wholeText(kMaxSampleBytes));
    }
    return *number;
  }

  int count(const YAML::Node& node, const std::string& key) const {
    const auto value = text(node, key);
    const auto number = parseWholeNumber(value);
    if (!number || *number < 0 || *number > kMaxWorkers) {
      fail(key, "'" + clipForMessage(value, 60) + "' is not a worker count (a whole number from 0 to " +
                    std::to_string(kMaxWorkers) + "; 0 means any)");
    }
    return static_cast<int>(*number);
  }

  DataType dataType(const YAML::Node& node, const std::string& key) const {
    const auto value = text(node, key);
    const auto type = dataTypeOf(value);
    if (!type) fail(key, "'" + clipForMessage(value, 60) + "' is not a data type; expected " + dataTypeNames());
    return *type;
  }

  // What a parser of units or names calls the key: its message then names the file too.
  std::string what(const std::string& key) const { return source_ + ": " + key; }

  static std::string prefixed(const std::string& parent, const std::string& key) {
    return parent.empty() ? key : parent + "." + key;
  }

 private:
  std::string source_;
};

Fit readFit(const ProfileReader& reader, const YAML::Node& node, const std::string& key) {
  reader.checkMap(
      node, key,
      {"collective", "dtype", "world_size", "latency_s", "seconds_per_byte", "max_relative_residual", "samples"});
  for (const char* required : {"collective", "world_size", "latency_s", "seconds_per_byte"}) {
    if (!node[required]) reader.fail(key + "." + required, "missing");
  }
  Fit fit;
  const std::string collective_key = key + ".collective";
  fit.collective = parseCollective(reader.text(node["collective"], collective_key), reader.what(collective_key));
  if (node["dtype"]) fit.dtype = reader.dataType(node["dtype"], key + ".dtype");
  fit.world_size = reader.count(node["world_size"], key + ".world_size");
  fit.latency_s = reader.number(node["latency_s"], key + ".latency_s", 0, units::kMaxLatency);
  fit.seconds_per_byte =
      reader.number(node["seconds_per_byte"], key + ".seconds_per_byte", 0, 1 / units::kMinBandwidth);
  if (node["max_relative_residual"]) {
    fit.max_relative_residual =
        reader.number(node["max_relative_residual"], key + ".max_relative_residual", 0, kMaxResidual);
  }
  if (const auto samples = node["samples"]) {
    if (!samples.IsSequence()) reader.fail(key + ".samples", "expected a list of [bytes, seconds] pairs");
    for (size_t i = 0; i < samples.size(); ++i) {
      const std::string at = key + ".samples[" + std::to_string(i) + "]";
      if (!samples[i].IsSequence() || samples[i].size() != 2) reader.fail(at, "expected [bytes, seconds]");
      const Sample sample{reader.bytes(samples[i][0], at + "[0]"),
                          reader.number(samples[i][1], at + "[1]", 0, kMaxSampleSeconds)};
      if (!fit.samples.empty() && sample.bytes <= fit.samples.back().bytes) {
        reader.fail(at, "sizes must grow from one sample to the next");
      }
      if (sample.seconds <= 0) reader.fail(at, "a time must be above 0");
      fit.samples.push_back(sample);
    }
  }
  return fit;
}

// `collectives: {all-gather: {bandwidth: 5gbit, latency: 40us}}`: a hand-written override at any
// world size; what it leaves out comes from the profile's link.
Fit readOverride(const ProfileReader& reader, const std::string& name, const YAML::Node& node,
                 const NetworkProfile& profile) {
  const std::string key = "collectives." + clipForMessage(name, 60);
  Fit fit;
  fit.collective = parseCollective(name, reader.what(key));
  fit.world_size = 0;
  reader.checkMap(node, key, {"bandwidth", "latency"});
  for (const char* part : {"bandwidth", "latency"}) {
    if (!node[part] && profile.latency_s < 0) {
      reader.fail(key + "." + part, "missing, and the profile has no top-level bandwidth and latency to take it from");
    }
  }
  const auto bandwidth = node["bandwidth"];
  const auto latency = node["latency"];
  fit.seconds_per_byte = 1 / (bandwidth ? units::parseBandwidth(reader.text(bandwidth, key + ".bandwidth"),
                                                                reader.what(key + ".bandwidth"))
                                        : profile.bandwidth_bytes_per_s);
  fit.latency_s = latency ? units::parseDuration(reader.text(latency, key + ".latency"), reader.what(key + ".latency"))
                          : profile.latency_s;
  return fit;
}

// Plain when YAML reads it back as the same text, else double-quoted.
std::string scalarText(const std::string& value) {
  static const std::regex plain("[A-Za-z_][A-Za-z0-9._/+-]*");
  if (std::regex_match(value, plain) && value != "true" && value != "false" && value != "null") return value;
  YAML::Emitter emitter;
  emitter << YAML::DoubleQuoted << value;
  return emitter.c_str();
}

}  // namespace

CollectiveKind parseCollective(const std::string& name, const std::string& what) {
  for (const auto collective : kCollectives) {
    if (name == collectiveName(collective)) return collective;
  }
  throw UserError(what + ": '" + clipForMessage(name, 60) +
                  "' is not a collective; expected all-reduce, all-gather or broadcast");
}

NetworkProfile parseProfile(const std::string& yaml_text, const std::string& source) {
  const ProfileReader reader(source);
  YAML::Node document;
  try {
    document = YAML::Load(yaml_text);
  } catch (const YAML::Exception& e) {
    throw UserError(source + ": not valid YAML (line " + std::to_string(e.mark.line + 1) + "): " + firstLine(e.msg));
  }
  if (hyperparams::exceedsValueLimit(document)) {
    throw UserError(source + ": holds more than " + std::to_string(hyperparams::kMaxYamlValues) +
                    " values once its YAML aliases are expanded; a network profile needs far fewer");
  }
  const YAML::Node& root = document;
  if (!root.IsMap()) {
    throw UserError(source + ": expected a mapping with bandwidth and latency, or the fits of gcrun bench network");
  }
  reader.checkMap(root, "", {"name", "bandwidth", "latency", "backend", "fits", "collectives"});
  NetworkProfile profile;
  profile.name = root["name"] ? reader.text(root["name"], "name") : std::filesystem::path(source).stem().string();
  profile.source = source;
  if (root["backend"]) profile.backend = reader.text(root["backend"], "backend");
  if (root["bandwidth"].IsDefined() != root["latency"].IsDefined()) {
    reader.fail(root["bandwidth"] ? "latency" : "bandwidth", "missing; a link needs both bandwidth and latency");
  }
  if (root["bandwidth"]) {
    profile.bandwidth_bytes_per_s =
        units::parseBandwidth(reader.text(root["bandwidth"], "bandwidth"), reader.what("bandwidth"));
    profile.latency_s = units::parseDuration(reader.text(root["latency"], "latency"), reader.what("latency"));
  }
  if (const auto fits = root["fits"]) {
    if (!fits.IsSequence()) reader.fail("fits", "expected a list of fits");
    for (size_t i = 0; i < fits.size(); ++i) {
      profile.fits.push_back(readFit(reader, fits[i], "fits[" + std::to_string(i) + "]"));
    }
  }
  if (const auto overrides = root["collectives"]) {
    reader.checkMap(overrides, "collectives", {"all-reduce", "all-gather", "broadcast"});
    for (const auto& entry : overrides) {
      profile.fits.push_back(readOverride(reader, entry.first.Scalar(), entry.second, profile));
    }
  }
  std::set<std::tuple<CollectiveKind, int, DataType>> seen;
  for (const auto& fit : profile.fits) {
    if (!seen.insert({fit.collective, fit.world_size, fit.dtype}).second) {
      reader.fail(fit.world_size == 0 ? "collectives" : "fits",
                  collectiveName(fit.collective) + " at world_size " + std::to_string(fit.world_size) + " in " +
                      dataTypeName(fit.dtype) + " is given twice (world_size 0: a hand-written override)");
    }
  }
  if (profile.latency_s < 0 && profile.fits.empty()) {
    throw UserError(source +
                    ": no link and no fits; give bandwidth and latency (e.g. bandwidth: 10gbit, latency: 20us) or "
                    "the fits of gcrun bench network");
  }
  return profile;
}

NetworkProfile loadProfile(const std::string& path) {
  return parseProfile(files::readBoundedFile(path, files::kMaxConfigBytes), path);
}

std::string profileYaml(const NetworkProfile& profile) {
  std::string yaml;
  if (!profile.name.empty()) yaml += "name: " + scalarText(profile.name) + "\n";
  if (profile.latency_s >= 0) {
    yaml += "bandwidth: " + units::bandwidthText(profile.bandwidth_bytes_per_s) + "\n";
    yaml += "latency: " + units::durationText(profile.latency_s) + "\n";
  }
  if (!profile.backend.empty()) yaml += "backend: " + scalarText(profile.backend) + "\n";
  if (!profile.fits.empty()) yaml += "fits:\n";
  for (const auto& fit : profile.fits) {
    yaml += "  - collective: " + collectiveName(fit.collective) + "\n";
    yaml += "    dtype: " + dataTypeName(fit.dtype) + "\n";
    yaml += "    world_size: " + std::to_string(fit.world_size) + "\n";
    yaml += "    latency_s: " + shortestNumber(fit.latency_s) + "\n";
    yaml += "    seconds_per_byte: " + shortestNumber(fit.seconds_per_byte) + "\n";
    yaml += "    max_relative_residual: " + shortestNumber(fit.max_relative_residual) + "\n";
    if (fit.samples.empty()) continue;
    yaml += "    samples: [";
    for (size_t i = 0; i < fit.samples.size(); ++i) {
      yaml += (i ? ", [" : "[") + shortestNumber(fit.samples[i].bytes) + ", " + shortestNumber(fit.samples[i].seconds) +
              "]";
    }
    yaml += "]\n";
  }
  return yaml;
}

NetworkProfile linkProfile(double bandwidth_bytes_per_s, double latency_s) {
  NetworkProfile profile;
  profile.name = units::bandwidthText(bandwidth_bytes_per_s) + "/" + units::durationText(latency_s);
  profile.bandwidth_bytes_per_s = bandwidth_bytes_per_s;
  profile.latency_s = latency_s;
  return profile;
}

}  // namespace gcrun::network
