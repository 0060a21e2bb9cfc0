#include "outputs/trace/trace_file.h"

#include <cmath>
#include <limits>
#include <map>

#include "hyperparams/base/errors.h"
#include "hyperparams/base/text.h"
#include "outputs/files/safe_files.h"
#include "outputs/json_document.h"
#include "outputs/run_directory.h"

namespace gcrun::trace {
namespace {

using outputs::Json;

constexpr char kPhase[] = "phase";
constexpr char kCollective[] = "collective";
constexpr char kWait[] = "wait";

// Microseconds to the nanosecond: the clock's own resolution, without the sums' float noise.
double microseconds(double us) { return std::round(us * 1000) / 1000; }

Json event(const char* ph, const std::string& name, const char* cat, int pid, int tid, double ts) {
  return Json{{"name", name}, {"cat", cat}, {"ph", ph}, {"pid", pid}, {"tid", tid}, {"ts", microseconds(ts)}};
}

Json metadata(const char* name, int pid, int tid, const std::string& label) {
  return Json{{"name", name}, {"ph", "M"}, {"pid", pid}, {"tid", tid}, {"args", {{"name", label}}}};
}

void addWorker(const WorkerTimeline& worker, int pid, int64_t& next_id, Json& events) {
  const int tid = worker.worker;
  events.push_back(metadata("thread_name", pid, tid, "worker " + std::to_string(tid)));
  for (const auto& span : worker.spans) {
    auto x = event("X", span.name, kPhase, pid, tid, span.start_us);
    x["dur"] = microseconds(span.duration_us);
    x["args"] = {{"step", span.step}};
    events.push_back(std::move(x));
  }
  for (const auto& c : worker.collectives) {
    const int64_t id = next_id++;
    const std::string kind = collectiveName(c.kind);
    auto begin = event("b", kind, kCollective, pid, tid, c.issued_us);
    begin["id"] = id;
    begin["args"] = {
        {"kind", kind},   {"bytes", c.bytes}, {"dtype", dataTypeName(c.dtype)},    {"group_size", c.group_size},
        {"step", c.step}, {"async", c.async}, {"wait_us", microseconds(c.wait_us)}};
    // A background collective's wait was its thread's, not the worker's: no wait slice.
    if (c.background) begin["args"]["background"] = true;
    events.push_back(std::move(begin));
    if (!c.background) {
      auto wait = event("X", "wait " + kind, kWait, pid, tid, c.wait_us);
      wait["dur"] = microseconds(c.done_us - c.wait_us);
      events.push_back(std::move(wait));
    }
    auto end = event("e", kind, kCollective, pid, tid, c.done_us);
    end["id"] = id;
    events.push_back(std::move(end));
  }
}

// Reading: every problem is one line naming the file.
class TraceReader {
 public:
  explicit TraceReader(const std::string& name) : name_(name) {}

  [[noreturn]] void fail(const std::string& what) const { throw UserError(name_ + ": " + what); }
  [[noreturn]] void failAt(size_t index, const std::string& what) const {
    fail("trace event " + std::to_string(index) + ": " + what);
  }

  const Json& member(const Json& object, const char* key, size_t index) const {
    const Json* value = outputs::memberOf(object, key);
    if (!value) failAt(index, std::string("no \"") + key + "\"");
    return *value;
  }
  // A time in microseconds, from 0 to kMaxTraceMicroseconds.
  double time(const Json& object, const char* key, size_t index) const {
    const auto value = outputs::numberAt(object, key);
    if (!value || *value < 0 || *value > kMaxTraceMicroseconds) {
      failAt(index, std::string("\"") + key + "\" is not a time from 0 to 1e12 microseconds");
    }
    return *value;
  }
  int64_t integer(const Json& object, const char* key, size_t index, int64_t min,
                  int64_t max = std::numeric_limits<int64_t>::max()) const {
    const Json& value = member(object, key, index);
    if (!value.is_number_integer() || value.get<int64_t>() < min || value.get<int64_t>() > max) {
      failAt(index, std::string("\"") + key + "\" is not an integer from " + std::to_string(min) + " to " +
                        std::to_string(max));
    }
    return value.get<int64_t>();
  }
  std::string text(const Json& object, const char* key, size_t index) const {
    const Json& value = member(object, key, index);
    if (!value.is_string()) failAt(index, std::string("\"") + key + "\" is not a string");
    return value.get<std::string>();
  }

 private:
  const std::string& name_;
};

int intOf(const TraceReader& reader, const Json& object, const char* key, size_t index, int64_t min) {
  return static_cast<int>(reader.integer(object, key, index, min, int64_t{1} << 30));
}

// The kinds Recorder writes.
CollectiveKind collectiveKind(const TraceReader& reader, const Json& args, size_t index) {
  const auto name = reader.text(args, "kind", index);
  const auto kind = collectiveKindOf(name);
  if (!kind) {
    reader.failAt(index, "\"kind\" '" + clipForMessage(name, 60) +
                             "' is not a collective gcrun traces (all-reduce, all-gather, broadcast, barrier)");
  }
  return *kind;
}

// The tensor's data type; a trace from before gcrun recorded it has none: float32.
DataType dataType(const TraceReader& reader, const Json& args, size_t index) {
  if (!outputs::memberOf(args, "dtype")) return DataType::float32;
  const auto name = reader.text(args, "dtype", index);
  const auto type = dataTypeOf(name);
  if (!type) {
    reader.failAt(index, "\"dtype\" '" + clipForMessage(name, 60) + "' is not a data type (" + dataTypeNames() + ")");
  }
  return *type;
}

}  // namespace

std::string traceJson(const ProcessTimeline& timeline) {
  Json events = Json::array();
  events.push_back(metadata("process_name", timeline.rank, 0, "rank " + std::to_string(timeline.rank)));
  int64_t next_id = 0;
  for (const auto& worker : timeline.workers) addWorker(worker, timeline.rank, next_id, events);
  Json document{{"traceEvents", std::move(events)},
                {"displayTimeUnit", "ms"},
                {"otherData",
                 {{"gcrun_trace", kTraceFormatVersion},
                  {"rank", timeline.rank},
                  {"world_size", timeline.world_size},
                  {"reducer", timeline.reducer},
                  {"summable", timeline.summable},
                  {"backend", timeline.backend},
                  {"truncated", timeline.truncated}}}};
  return outputs::jsonText(document, 2) + "\n";
}

void writeTraceFile(const std::string& run_dir, const ProcessTimeline& timeline) {
  outputs::RunDirectory(run_dir).write(outputs::run_files::traceFile(timeline.rank), traceJson(timeline));
}

namespace {

// otherData, once the document is checked to be a gcrun trace of the version this gcrun reads.
const Json& gcrunHeaderOf(const Json& document, const TraceReader& reader) {
  if (!document.is_object()) reader.fail("not a trace file (not a JSON object)");
  const Json* other = outputs::memberOf(document, "otherData");
  const Json* version = other && other->is_object() ? outputs::memberOf(*other, "gcrun_trace") : nullptr;
  if (!version) reader.fail("not a gcrun trace (no otherData.gcrun_trace)");
  if (*version != kTraceFormatVersion) {
    reader.fail("otherData.gcrun_trace is " + version->dump() + "; this gcrun reads version " +
                std::to_string(kTraceFormatVersion));
  }
  return *other;
}

// The process's part of the header: its rank, world, reducer and backend.
ProcessTimeline processOf(const Json& other, const TraceReader& reader) {
  ProcessTimeline timeline;
  const auto bad = [&](const char* key) { reader.fail(std::string("otherData.") + key + " is missing or invalid"); };
  const int64_t rank = outputs::integerOr(other, "rank", -1);
  const int64_t world_size = outputs::integerOr(other, "world_size", 0);
  if (rank < 0 || rank > (1 << 30)) bad("rank");
  if (world_size < 1 || world_size > (1 << 30)) bad("world_size");
  timeline.rank = static_cast<int>(rank);
  timeline.world_size = static_cast<int>(world_size);
  timeline.reducer = outputs::stringOr(other, "reducer", "");
  timeline.summable = outputs::boolOr(other, "summable", false);
  timeline.backend = outputs::stringOr(other, "backend", "");
  timeline.truncated = outputs::boolOr(other, "truncated", false);
  return timeline;
}

// A collective's "b" event `e`, at `ts`; its end comes with the "e" event of the same id.
Collective collectiveStartedBy(const Json& e, size_t i, double ts, const TraceReader& reader) {
  const Json& args = reader.member(e, "args", i);
  const Json& async = reader.member(args, "async", i);
  if (!async.is_boolean()) reader.failAt(i, "\"async\" is not true or false");
  return Collective{collectiveKind(reader, args, i),
                    static_cast<uint64_t>(reader.integer(args, "bytes", i, 0, kMaxCollectiveBytes)),
                    intOf(reader, args, "group_size", i, 1),
                    reader.integer(args, "step", i, 0),
                    async.get<bool>(),
                    ts,
                    reader.time(args, "wait_us", i),
                    ts,
                    dataType(reader, args, i),
                    outputs::boolOr(args, "background", false)};
}

// Every worker's phases and collectives, in tid order; a collective's "b" and "e" are paired by id.
std::vector<WorkerTimeline> workersOf(const Json& events, const TraceReader& reader) {
  std::map<int, WorkerTimeline> workers;
  std::map<int64_t, std::pair<int, size_t>> open;  // a "b" event's id: its worker and collective
  for (size_t i = 0; i < events.size(); ++i) {
    const Json& e = events[i];
    if (!e.is_object()) reader.failAt(i, "not a JSON object");
    const std::string ph = reader.text(e, "ph", i);
    const int tid = intOf(reader, e, "tid", i, 0);
    if (ph == "M") {
      if (reader.text(e, "name", i) == "thread_name") workers[tid].worker = tid;
      continue;
    }
    const std::string cat = reader.text(e, "cat", i);
    const double ts = reader.time(e, "ts", i);
    WorkerTimeline& worker = workers[tid];
    worker.worker = tid;
    if (ph == "X" && cat == kPhase) {
      const int64_t step = reader.integer(reader.member(e, "args", i), "step", i, 0);
      worker.spans.push_back({reader.text(e, "name", i), step, ts, reader.time(e, "dur", i)});
    } else if (ph == "b" && cat == kCollective) {
      if (!open.emplace(reader.integer(e, "id", i, 0), std::make_pair(tid, worker.collectives.size())).second) {
        reader.failAt(i, "a second \"b\" event with the same id");
      }
      worker.collectives.push_back(collectiveStartedBy(e, i, ts, reader));
    } else if (ph == "e" && cat == kCollective) {
      const auto found = open.find(reader.integer(e, "id", i, 0));
      if (found == open.end() || found->second.first != tid) reader.failAt(i, "an \"e\" event without its \"b\"");
      worker.collectives[found->second.second].done_us = ts;
      open.erase(found);
    } else if (!(ph == "X" && cat == kWait)) {
      reader.failAt(i, "ph \"" + ph + "\" with cat \"" + cat + "\" is not an event gcrun writes");
    }
  }
  if (!open.empty()) reader.fail("collective id " + std::to_string(open.begin()->first) + " has no \"e\" event");
  std::vector<WorkerTimeline> out;
  for (auto& [tid, worker] : workers) out.push_back(std::move(worker));
  return out;
}

}  // namespace

ProcessTimeline parseTrace(std::string_view text, const std::string& name) {
  const TraceReader reader(name);
  std::string why;
  const auto document = outputs::parseJson(text, &why);
  if (!document) reader.fail("not JSON (" + why + ")");
  const Json& other = gcrunHeaderOf(*document, reader);
  const Json* events = outputs::memberOf(*document, "traceEvents");
  if (!events || !events->is_array()) reader.fail("no \"traceEvents\" array");
  auto timeline = processOf(other, reader);
  timeline.workers = workersOf(*events, reader);
  return timeline;
}

ProcessTimeline readTraceFile(const std::string& path) {
  return parseTrace(files::readBoundedFile(path, kMaxTraceBytes), path);
}

}  // namespace gcrun::trace
