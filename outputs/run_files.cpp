#include "outputs/run_files.h"

#include <algorithm>
#include <cctype>
#include <ctime>
#include <filesystem>

#include "hyperparams/base/errors.h"
#include "outputs/files/safe_files.h"
#include "outputs/json.h"

namespace gcrun::outputs {
namespace fs = std::filesystem;

namespace {

std::string localTimestamp() {
  std::time_t now = std::time(nullptr);
  std::tm local{};
  localtime_r(&now, &local);
  char text[32];
  std::strftime(text, sizeof(text), "%Y%m%d-%H%M%S", &local);
  return text;
}

// Preset names are plain, but a config file may name its experiment anything: keep the folder
// name to characters that need no quoting in a shell.
std::string folderSafe(const std::string& name) {
  if (name.empty()) return "run";
  std::string out = name;
  for (char& c : out) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '-' && c != '_' && c != '.') c = '_';
  }
  return out;
}

[[noreturn]] void throwCannotCreate(const fs::path& path, const std::error_code& error) {
  throw UserError("cannot create output directory '" + path.string() + "': " + error.message());
}

std::string createDefaultRunDirectory(const std::string& experiment) {
  fs::path parent = "outputs";
  std::error_code error;
  fs::create_directories(parent, error);
  if (error) throwCannotCreate(parent, error);
  const std::string base = folderSafe(experiment) + "-" + localTimestamp();
  // create_directory reports an existing folder instead of failing, so two runs started in the
  // same second (even concurrently) each get a folder of their own.
  for (int suffix = 1;; ++suffix) {
    fs::path candidate = parent / (suffix == 1 ? base : base + "-" + std::to_string(suffix));
    if (fs::create_directory(candidate, error)) return candidate.string();
    if (error) throwCannotCreate(candidate, error);
  }
}

std::string createRequestedRunDirectory(const std::string& requested) {
  std::error_code error;
  fs::path path = requested;
  if (fs::exists(path, error)) {
    if (!fs::is_directory(path, error)) {
      throw UserError("output directory '" + requested +
                      "' exists and is not a directory; choose another --output-dir");
    }
    const auto entries = fs::directory_iterator(path, error);
    if (std::any_of(begin(entries), end(entries),
                    [](const fs::directory_entry& entry) { return entry.path().filename() != kStudyRunMarker; })) {
      throw UserError("output directory '" + requested +
                      "' already holds files; choose another --output-dir or remove it");
    }
    return requested;
  }
  fs::create_directories(path, error);
  if (error) throwCannotCreate(path, error);
  return requested;
}

}  // namespace

std::string createRunDirectory(const std::string& requested, const std::string& experiment) {
  return requested.empty() ? createDefaultRunDirectory(experiment)
                           : createRequestedRunDirectory(requested);
}

void writeFileAtomically(const std::string& path, std::string_view contents) {
  const fs::path target(path);
  const auto parent = target.parent_path();
  const std::string name = target.filename().string();
  files::directoryToWrite(parent.empty() ? "." : parent.string(), name).writeAtomically(name, contents);
}

std::string runInfoJson(const RunInfo& info) {
  std::string metrics = "{";
  for (const auto& [name, value] : info.final_metrics) {
    metrics += (metrics.size() > 1 ? ",\n    " : "\n    ") + jsonString(name) + ": " +
               jsonNumber(value);
  }
  metrics += info.final_metrics.empty() ? "}" : "\n  }";
  std::string paper;
  if (!info.paper.metric.empty()) {
    paper = ",\n  \"paper\": {\n    \"metric\": " + jsonString(info.paper.metric) +
            ",\n    \"source\": " + jsonString(info.paper.source);
    for (const auto& [name, value] : info.paper.numbers) {
      paper += ",\n    " + jsonString(name) + ": " + jsonNumber(value);
    }
    paper += "\n  }";
  }

  auto field = [](const std::string& key, const std::string& value) {
    return "  " + jsonString(key) + ": " + value;
  };
  auto numberList = [](const std::vector<double>& values) {
    std::string list = "[";
    for (size_t i = 0; i < values.size(); ++i) list += (i ? ", " : "") + jsonNumber(values[i]);
    return list + "]";
  };
  return "{\n" + field("experiment", jsonString(info.experiment)) + ",\n" +
         field("gcrun_version", jsonString(info.gcrun_version)) + ",\n" +
         field("torch_version", jsonString(info.torch_version)) + ",\n" +
         field("world_size", std::to_string(info.world_size)) + ",\n" +
         field("processes", std::to_string(info.processes)) + ",\n" +
         field("simulated_workers", std::to_string(info.simulated_workers)) + ",\n" +
         (info.simulated_workers > 1 ? field("compute_per_batch_ms", jsonNumber(info.compute_per_batch_ms)) + ",\n" : "") +
         field("backend", jsonString(info.backend)) + ",\n" +
         field("device", jsonString(info.device)) + ",\n" +
         field("num_parameters", std::to_string(info.num_parameters)) + ",\n" +
         field("steps", std::to_string(info.steps)) + ",\n" +
         field("epochs_done", jsonNumber(info.epochs_done)) + ",\n" +
         field("bits_sent", std::to_string(info.bits_sent)) + ",\n" +
         field("peak_rss_mib", numberList(info.peak_rss_mib)) + ",\n" +
         field("synthetic_data", info.synthetic_data ? "true" : "false") + ",\n" +
         field("status", jsonString(info.status)) + ",\n" +
         field("error", jsonString(info.error)) + ",\n" +
         field("start_time", jsonString(info.start_time)) + ",\n" +
         field("end_time", jsonString(info.end_time)) + ",\n" +
         field("final_metrics", metrics) + paper + "\n}\n";
}

std::string isoTimeNow() {
  std::time_t now = std::time(nullptr);
  std::tm utc{};
  gmtime_r(&now, &utc);
  char text[32];
  std::strftime(text, sizeof(text), "%Y-%m-%dT%H:%M:%SZ", &utc);
  return text;
}

}  // namespace gcrun::outputs
