#include "outputs/run_info.h"

#include <cmath>
#include <ctime>
#include <limits>

#include "outputs/json_document.h"

namespace gcrun::outputs {
namespace {

// Each member is read where the loop stands: looking it up by key again would cost a search of
// the object per member.
double finiteOr(const Json& value, double fallback) {
  if (!value.is_number()) return fallback;
  const double number = value.get<double>();
  return std::isfinite(number) ? number : fallback;
}

Json scheduleJson(const SyncSchedule& schedule) {
  Json json;
  json["strategy"] = schedule.strategy;
  json["periodic"] = schedule.periodic;
  json["every"] = schedule.every;
  json["fragments"] = schedule.fragments;
  json["delay"] = schedule.delay;
  json["overlapped"] = schedule.overlapped;
  json["warmup_steps"] = schedule.warmup_steps;
  return json;
}

// run.json's "schedule", a file from elsewhere: every field present and of its type, and within
// what a strategy could declare (scheduleProblem); otherwise the problem, naming the field.
void readSchedule(const Json& json, RunInfo& info) {
  const auto problem = [&](const std::string& text) { info.schedule_problem = "schedule" + text; };
  if (!json.is_object()) return problem(" is not an object of strategy, periodic, every, fragments, ...");
  SyncSchedule schedule;
  const Json* strategy = memberOf(json, "strategy");
  if (!strategy || !strategy->is_string()) return problem(".strategy is missing or not a string");
  schedule.strategy = strategy->get<std::string>();
  for (const auto& [key, field] :
       {std::pair<const char*, bool*>{"periodic", &schedule.periodic}, {"overlapped", &schedule.overlapped}}) {
    const Json* value = memberOf(json, key);
    if (!value || !value->is_boolean()) return problem(std::string(".") + key + " is missing or not true or false");
    *field = value->get<bool>();
  }
  for (const auto& [key, field] : {std::pair<const char*, int64_t*>{"every", &schedule.every},
                                   {"fragments", &schedule.fragments},
                                   {"delay", &schedule.delay},
                                   {"warmup_steps", &schedule.warmup_steps}}) {
    const Json* value = memberOf(json, key);
    if (!value || !value->is_number_integer())
      return problem(std::string(".") + key + " is missing or not a whole number");
    *field = value->get<int64_t>();
  }
  if (const auto why = scheduleProblem(schedule); !why.empty()) return problem("." + why);
  info.schedule = schedule;
}

}  // namespace

std::string runInfoJson(const RunInfo& info) {
  Json json;
  json["experiment"] = info.experiment;
  json["gcrun_version"] = info.gcrun_version;
  json["torch_version"] = info.torch_version;
  json["world_size"] = info.world_size;
  json["processes"] = info.processes;
  json["simulated_workers"] = info.simulated_workers;
  if (info.simulated_workers > 1) json["compute_per_batch_ms"] = info.compute_per_batch_ms;
  json["backend"] = info.backend;
  json["device"] = info.device;
  json["num_parameters"] = info.num_parameters;
  json["steps"] = info.steps;
  json["epochs_done"] = info.epochs_done;
  json["bits_sent"] = info.bits_sent;
  if (info.syncs > 0) {
    json["syncs"] = info.syncs;
    json["bits_per_sync"] = info.bits_per_sync;
  }
  json["peak_rss_mib"] = info.peak_rss_mib;
  json["synthetic_data"] = info.synthetic_data;
  json["status"] = info.status ? runStatusText(*info.status) : "";
  json["error"] = info.error;
  json["start_time"] = info.start_time;
  json["end_time"] = info.end_time;
  json["final_metrics"] = Json::object();
  for (const auto& [name, value] : info.final_metrics) json["final_metrics"][name] = value;
  if (!info.paper.metric.empty()) {
    auto& paper = json["paper"];
    paper["metric"] = info.paper.metric;
    paper["source"] = info.paper.source;
    for (const auto& [name, value] : info.paper.numbers) paper[name] = value;
  }
  if (!info.sources.empty()) json["sources"] = info.sources;
  if (info.baseline) json["baseline"] = baselineName(*info.baseline);
  if (info.schedule) json["schedule"] = scheduleJson(*info.schedule);
  return jsonText(json, 2) + "\n";
}

std::optional<RunInfo> parseRunInfo(std::string_view text) {
  const auto json = parseJson(text);
  if (!json || !json->is_object()) return std::nullopt;
  RunInfo info;
  info.experiment = stringOr(*json, "experiment", "");
  info.gcrun_version = stringOr(*json, "gcrun_version", "");
  info.torch_version = stringOr(*json, "torch_version", "");
  const auto count = [&](const char* key, int fallback) {
    const int64_t value = integerOr(*json, key, fallback);
    return value >= 0 && value <= std::numeric_limits<int>::max() ? static_cast<int>(value) : fallback;
  };
  info.world_size = count("world_size", 1);
  info.processes = count("processes", 1);
  info.simulated_workers = count("simulated_workers", 1);
  info.compute_per_batch_ms = numberAt(*json, "compute_per_batch_ms").value_or(0);
  info.backend = stringOr(*json, "backend", "");
  info.device = stringOr(*json, "device", "");
  info.num_parameters = integerOr(*json, "num_parameters", 0);
  info.steps = integerOr(*json, "steps", 0);
  info.epochs_done = numberAt(*json, "epochs_done").value_or(0);
  info.bits_sent = static_cast<uint64_t>(std::max(0.0, numberAt(*json, "bits_sent").value_or(0)));
  info.syncs = std::max<int64_t>(0, integerOr(*json, "syncs", 0));
  info.bits_per_sync = std::max(0.0, numberAt(*json, "bits_per_sync").value_or(0));
  if (const Json* peaks = memberOf(*json, "peak_rss_mib"); peaks && peaks->is_array()) {
    for (const auto& peak : *peaks) info.peak_rss_mib.push_back(peak.is_number() ? peak.get<double>() : NAN);
  }
  info.synthetic_data = boolOr(*json, "synthetic_data", false);
  info.status = parseRunStatus(stringOr(*json, "status", ""));
  info.error = stringOr(*json, "error", "");
  info.start_time = stringOr(*json, "start_time", "");
  info.end_time = stringOr(*json, "end_time", "");
  if (const Json* finals = memberOf(*json, "final_metrics"); finals && finals->is_object()) {
    for (auto it = finals->begin(); it != finals->end(); ++it) info.final_metrics[it.key()] = finiteOr(*it, NAN);
  }
  if (const Json* paper = memberOf(*json, "paper"); paper && paper->is_object()) {
    info.paper.metric = stringOr(*paper, "metric", "");
    info.paper.source = stringOr(*paper, "source", "");
    for (auto it = paper->begin(); it != paper->end(); ++it) {
      if (const double value = finiteOr(*it, NAN); !std::isnan(value)) info.paper.numbers[it.key()] = value;
    }
  }
  if (const Json* sources = memberOf(*json, "sources"); sources && sources->is_object()) {
    for (auto it = sources->begin(); it != sources->end(); ++it) {
      if (it->is_string()) info.sources[it.key()] = it->get<std::string>();
    }
  }
  info.baseline = baselineOf(stringOr(*json, "baseline", ""));
  if (const Json* schedule = memberOf(*json, "schedule")) readSchedule(*schedule, info);
  return info;
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
