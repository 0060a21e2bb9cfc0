#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "outputs/trace/timeline.h"

namespace gcrun::trace {

// trace-rank<r>.json (outputs::run_files::traceFile): one process's timeline in the Chrome Trace
// Event Format, which Perfetto (ui.perfetto.dev) and chrome://tracing open:
//   {"traceEvents": [...], "displayTimeUnit": "ms",
//    "otherData": {"gcrun_trace": 1, "rank": r, "world_size": W, "reducer": ..., "backend": ...,
//                  "truncated": false}}
// pid is the process's rank, tid a logical worker's global rank, so that each (simulated) worker
// is a track of its own, labelled by "process_name" / "thread_name" metadata ("M") events. Times
// (ts, dur) are microseconds since the process's trace origin.
//  - A Span is an "X" event of cat "phase", args {"step": k}.
//  - A Collective is an async pair of cat "collective" with a unique id: "b" at issue, with args
//    {"kind", "bytes", "dtype", "group_size", "step", "async", "wait_us"}, and "e" when its wait
//    returned (a trace without "dtype", from before gcrun wrote it, reads as float32);
//    plus an "X" event of cat "wait" over the blocked part (wait_us to done), which the reader
//    skips (it repeats what the pair says) but makes the wait visible on the worker's track.

inline constexpr int kTraceFormatVersion = 1;  // otherData.gcrun_trace
// Trace events a Span and a Collective become.
inline constexpr int64_t kEventsPerSpan = 1;
inline constexpr int64_t kEventsPerCollective = 3;
// The largest trace file read back: far above what Recorder's bound lets gcrun write.
inline constexpr size_t kMaxTraceBytes = size_t{128} << 20;
// The values a trace may hold: times (ts, dur, wait_us) from 0 to 1e12 us (11.6 days), a
// collective's bytes up to 1 TiB; past them predictions would overflow into inf and nan.
inline constexpr double kMaxTraceMicroseconds = 1e12;
inline constexpr int64_t kMaxCollectiveBytes = int64_t{1} << 40;

std::string traceJson(const ProcessTimeline& timeline);
// Writes trace-rank<timeline.rank>.json into `run_dir` atomically, never through a symlink.
void writeTraceFile(const std::string& run_dir, const ProcessTimeline& timeline);

// The timeline in trace-file text `text`; `name` is what errors call it. Anything but a trace
// file as traceJson writes it (other JSON, another program's trace, a file cut short, bad values:
// a collective kind or dtype of another name, a number outside the ranges above) is a UserError of one line
// naming `name` and what is wrong.
ProcessTimeline parseTrace(std::string_view text, const std::string& name);
// parseTrace of the file at `path`, read within kMaxTraceBytes (a UserError past that, or when it
// is missing or not a regular file).
ProcessTimeline readTraceFile(const std::string& path);

}  // namespace gcrun::trace
