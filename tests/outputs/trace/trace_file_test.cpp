// The trace recorder and trace-rank<r>.json: written, read back, bounded, and refused when foreign.
#include <gtest/gtest.h>

#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "hyperparams/config.h"
#include "outputs/json_document.h"
#include "outputs/trace/recorder.h"
#include "outputs/trace/trace_file.h"
#include "tests/support/temp_dir.h"
#include "tests/support/user_error.h"

namespace gcrun::trace {
namespace {

using testing::expectMessageHas;
using testing::TempDir;
using testing::userErrorOf;

ProcessTimeline sampleTimeline() {
  ProcessTimeline timeline{1, 4, "powersgd", true, "gloo", false, {}};
  WorkerTimeline worker{2, {}, {}};
  worker.spans = {{"forward", 3, 10.5, 100.25}, {"backward", 3, 110.75, 200}, {"evaluation", 3, 400, 0}};
  worker.collectives = {{CollectiveKind::all_reduce, 4096, 2, 3, true, 150, 320.5, 330, DataType::float16},
                        {CollectiveKind::all_gather, 12, 2, 3, false, 340, 340, 345.125, DataType::uint8},
                        {CollectiveKind::broadcast, 8, 2, 3, false, 350, 350, 352}};
  timeline.workers = {worker, WorkerTimeline{3, {{"batch", 3, 0, 500}}, {}}};
  return timeline;
}

// The file keeps times to the nanosecond.
constexpr double kUs = 1e-3;

void expectSame(const ProcessTimeline& a, const ProcessTimeline& b) {
  EXPECT_EQ(a.rank, b.rank);
  EXPECT_EQ(a.world_size, b.world_size);
  EXPECT_EQ(a.reducer, b.reducer);
  EXPECT_EQ(a.summable, b.summable);
  EXPECT_EQ(a.backend, b.backend);
  EXPECT_EQ(a.truncated, b.truncated);
  ASSERT_EQ(a.workers.size(), b.workers.size());
  for (size_t w = 0; w < a.workers.size(); ++w) {
    const auto& x = a.workers[w];
    const auto& y = b.workers[w];
    EXPECT_EQ(x.worker, y.worker);
    ASSERT_EQ(x.spans.size(), y.spans.size());
    for (size_t i = 0; i < x.spans.size(); ++i) {
      EXPECT_EQ(x.spans[i].name, y.spans[i].name);
      EXPECT_EQ(x.spans[i].step, y.spans[i].step);
      EXPECT_NEAR(x.spans[i].start_us, y.spans[i].start_us, kUs);
      EXPECT_NEAR(x.spans[i].duration_us, y.spans[i].duration_us, kUs);
    }
    ASSERT_EQ(x.collectives.size(), y.collectives.size());
    for (size_t i = 0; i < x.collectives.size(); ++i) {
      const auto& c = x.collectives[i];
      const auto& d = y.collectives[i];
      EXPECT_EQ(c.kind, d.kind);
      EXPECT_EQ(c.bytes, d.bytes);
      EXPECT_EQ(c.dtype, d.dtype);
      EXPECT_EQ(c.group_size, d.group_size);
      EXPECT_EQ(c.step, d.step);
      EXPECT_EQ(c.async, d.async);
      EXPECT_NEAR(c.issued_us, d.issued_us, kUs);
      EXPECT_NEAR(c.wait_us, d.wait_us, kUs);
      EXPECT_NEAR(c.done_us, d.done_us, kUs);
    }
  }
}

TEST(TraceFile, WrittenFileReadsBackAsWritten) {
  TempDir dir;
  const auto timeline = sampleTimeline();
  writeTraceFile(dir.path().string(), timeline);
  expectSame(readTraceFile(dir.file("trace-rank1.json")), timeline);
}

TEST(TraceFile, IsAChromeTraceWithOneNamedTrackPerWorker) {
  const auto document = outputs::parseJson(traceJson(sampleTimeline()));
  ASSERT_TRUE(document);
  EXPECT_EQ((*document)["displayTimeUnit"], "ms");
  EXPECT_EQ((*document)["otherData"]["gcrun_trace"], 1);
  std::vector<std::string> tracks;
  int begins = 0, ends = 0;
  for (const auto& event : (*document)["traceEvents"]) {
    EXPECT_EQ(event["pid"], 1);
    if (event["ph"] == "M" && event["name"] == "thread_name") tracks.push_back(event["args"]["name"]);
    begins += event["ph"] == "b";
    ends += event["ph"] == "e";
  }
  EXPECT_EQ(tracks, (std::vector<std::string>{"worker 2", "worker 3"}));
  EXPECT_EQ(begins, 3);
  EXPECT_EQ(ends, 3);
}

// A collective's one "b" and "e" event pair in a trace of `dtype_arg` (an args member, or none).
std::string oneCollectiveTrace(const std::string& dtype_arg) {
  return R"({"traceEvents": [{"ph": "b", "cat": "collective", "tid": 0, "ts": 1, "id": 7, "name": "all-reduce",
             "args": {"kind": "all-reduce", "bytes": 4, "group_size": 2, "step": 1, "async": false, "wait_us": 1)" +
         dtype_arg + R"(}}, {"ph": "e", "cat": "collective", "tid": 0, "ts": 2, "id": 7, "name": "all-reduce"}],
             "otherData": {"gcrun_trace": 1, "rank": 0, "world_size": 2}})";
}

TEST(TraceFile, RecordsEachCollectivesDataTypeAndReadsOldTracesAsFloat32) {
  const auto dtypeOf = [](const std::string& arg) {
    return parseTrace(oneCollectiveTrace(arg), "trace").workers.at(0).collectives.at(0).dtype;
  };
  EXPECT_EQ(dtypeOf(R"(, "dtype": "bfloat16")"), DataType::bfloat16);
  EXPECT_EQ(dtypeOf(R"(, "dtype": "int64")"), DataType::int64);
  EXPECT_EQ(dtypeOf(""), DataType::float32);
  const auto document = outputs::parseJson(traceJson(sampleTimeline()));
  ASSERT_TRUE(document);
  std::vector<std::string> written;
  for (const auto& event : (*document)["traceEvents"]) {
    if (event["ph"] == "b") written.push_back(event["args"]["dtype"]);
  }
  EXPECT_EQ(written, (std::vector<std::string>{"float16", "uint8", "float32"}));
  for (const char* bad : {R"("float8")", R"("Float32")", "16", "null"}) {
    expectMessageHas(
        userErrorOf([&] { parseTrace(oneCollectiveTrace(std::string(R"(, "dtype": )") + bad), "t.json"); }),
        {"t.json", "trace event 0", "\"dtype\""});
  }
  expectMessageHas(userErrorOf([&] { parseTrace(oneCollectiveTrace(R"(, "dtype": "float8")"), "t.json"); }),
                   {"'float8' is not a data type", "float32, float16, bfloat16"});
}

TEST(TraceFile, ForeignCorruptOrHugeFilesAreOneLineErrorsNamingTheFile) {
  TempDir dir;
  const std::string path = dir.file("trace-rank0.json");
  auto refused = [&](const std::string& text) {
    std::ofstream(path, std::ios::binary) << text;
    return userErrorOf([&] { readTraceFile(path); });
  };
  const std::string good = traceJson(sampleTimeline());
  expectMessageHas(refused(good.substr(0, good.size() / 2)), {path, "not JSON"});
  expectMessageHas(refused(R"({"traceEvents": [], "displayTimeUnit": "ms"})"), {path, "not a gcrun trace"});
  expectMessageHas(refused("[1, 2]"), {path, "not a trace file"});
  expectMessageHas(refused(R"({"traceEvents": [{"ph": "X"}], "otherData": {"gcrun_trace": 1, "rank": 0,
                              "world_size": 1}})"),
                   {path, "trace event 0", "tid"});
  expectMessageHas(refused(R"({"traceEvents": [{"ph": "b", "cat": "collective", "tid": 0, "ts": 1, "id": 7,
                              "args": {"kind": "all-reduce", "bytes": 4, "group_size": 2, "step": 1,
                              "async": false, "wait_us": 1}}], "otherData": {"gcrun_trace": 1, "rank": 0,
                              "world_size": 2}})"),
                   {path, "collective id 7"});
  expectMessageHas(refused(R"({"traceEvents": [], "otherData": {"gcrun_trace": 2, "rank": 0, "world_size": 1}})"),
                   {path, "version"});
  {
    std::ofstream out(path, std::ios::binary);
    out << std::string(kMaxTraceBytes + 1, ' ');
  }
  expectMessageHas(userErrorOf([&] { readTraceFile(path); }), {path});
  expectMessageHas(userErrorOf([&] { readTraceFile(dir.file("missing.json")); }), {"missing.json"});
}

TEST(StepWindow, AcceptsRangesAndSingleStepsOnly) {
  EXPECT_EQ(parseStepWindow("10-20")->first, 10);
  EXPECT_EQ(parseStepWindow("10-20")->last, 20);
  EXPECT_EQ(parseStepWindow("7")->first, 7);
  EXPECT_EQ(parseStepWindow("7")->last, 7);
  EXPECT_TRUE(parseStepWindow("3-3"));
  for (const char* bad :
       {"", "0", "0-2", "5-4", "-3", "3-", "a-b", " 2-3", "2 - 3", "1-2-3", "+2", "1e3", "99999999999999999999"}) {
    EXPECT_FALSE(parseStepWindow(bad)) << bad;
  }
}

Recorder::Options options(int64_t max_events = Recorder::kDefaultMaxEvents) {
  return {StepWindow{2, 3}, 0, 2, "exact", true, "gloo", max_events};
}

TEST(Recorder, RecordsOnlyTheWindowsSteps) {
  Recorder recorder(options());
  auto& trace = recorder.worker(0);
  for (int64_t step = 1; step <= 4; ++step) {
    trace.setStep(step);
    auto span = trace.span("forward");
  }
  const auto timeline = recorder.timeline();
  ASSERT_EQ(timeline.workers.size(), 1u);
  ASSERT_EQ(timeline.workers[0].spans.size(), 2u);
  EXPECT_EQ(timeline.workers[0].spans[0].step, 2);
  EXPECT_EQ(timeline.workers[0].spans[1].step, 3);
}

TEST(Recorder, OffRecordsNothing) {
  Recorder recorder({std::nullopt, 0, 1, "exact", true, "gloo"});
  EXPECT_FALSE(recorder.enabled());
  auto& trace = recorder.worker(0);
  trace.setStep(1);
  EXPECT_FALSE(trace.recording());
  { auto span = trace.span("forward"); }
  EXPECT_FALSE(trace.issued({CollectiveKind::all_reduce, 4, 2, 0, false, 0, 0, 0}, 0));
  EXPECT_TRUE(recorder.timeline().workers[0].spans.empty());
}

TEST(Recorder, CodecIsTheReduceOutsideItsCollectives) {
  Recorder recorder(options());
  auto& trace = recorder.worker(0);
  trace.setStep(2);
  {
    auto reduce = trace.reduce();
    const double start = trace.now();
    while (trace.now() < start + 200) {
    }
    const double issued = trace.now();
    while (trace.now() < issued + 200) {
    }
    const double done = trace.now();
    trace.issued({CollectiveKind::all_reduce, 8, 2, 0, false, issued, issued, done}, done);
    const double after = trace.now();
    while (trace.now() < after + 200) {
    }
  }
  const auto timeline = recorder.timeline();
  const auto& spans = timeline.workers[0].spans;
  double codec = 0, reduce = 0;
  int codec_spans = 0;
  for (const auto& span : spans) {
    if (span.name == "codec") codec += span.duration_us, ++codec_spans;
    if (span.name == "reduce") reduce = span.duration_us;
  }
  const auto& collective = timeline.workers[0].collectives.at(0);
  EXPECT_EQ(codec_spans, 2);
  EXPECT_NEAR(codec + (collective.done_us - collective.issued_us), reduce, 1e-6);
  EXPECT_EQ(collective.step, 2);
}

TEST(Recorder, StopsAtItsBoundAndSaysSoInAValidFile) {
  Recorder recorder(options(10));
  std::vector<std::thread> workers;
  for (int w = 0; w < 2; ++w) {
    workers.emplace_back([&recorder, w] {
      auto& trace = recorder.worker(w);
      trace.setStep(2);
      for (int i = 0; i < 100; ++i) auto span = trace.span("forward");
    });
  }
  for (auto& worker : workers) worker.join();
  const auto timeline = recorder.timeline();
  EXPECT_TRUE(timeline.truncated);
  size_t spans = 0;
  for (const auto& worker : timeline.workers) spans += worker.spans.size();
  EXPECT_EQ(spans, 10u);
  const auto read = parseTrace(traceJson(timeline), "trace");
  EXPECT_TRUE(read.truncated);
  expectSame(read, timeline);
}

}  // namespace
}  // namespace gcrun::trace
