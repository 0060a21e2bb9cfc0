#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "outputs/metric_sink.h"

namespace gcrun::outputs {

// The built-in sinks, registered in sinkRegistry() under "console", "jsonl" and "csv".
// `jsonl`: <run_dir>/metrics.jsonl, one object per MetricEvent, flushed at every epoch end.
// `csv`: <run_dir>/epochs.csv, one row per EpochSummary.
// `console`: progress and one line per epoch on stdout.
std::unique_ptr<MetricSink> makeConsoleSink(const SinkContext& context);
std::unique_ptr<MetricSink> makeJsonlSink(const SinkContext& context);
std::unique_ptr<MetricSink> makeCsvSink(const SinkContext& context);

// The console's text, as pure functions so that tests can check it without capturing stdout.

// "step 120/1000  epoch 1/10  loss 0.4123  1234 samples/s  ETA 1m05s"; with `bar_width` > 0 and
// a known total, led by a "[#####-----] " bar.
std::string formatProgressLine(const Progress& progress, int bar_width);
// "epoch 3/10  train loss 0.4123 acc 85.21%  test loss 0.3871 acc 86.40%  sent 12.3 MiB  1m23s",
// led by "[synthetic data] " for runs on synthetic data; sentText's words for `world_size` workers.
std::string formatEpochLine(const EpochSummary& summary, int64_t total_epochs, bool synthetic, int world_size = 0);
// What one worker sent: "sent 12.3 MiB". A lone worker (`world_size` 1) sends nothing, though its
// reducer counts what it would send: "nothing sent (one worker; each of more would send 12.3 MiB)".
std::string sentText(uint64_t bits, int world_size);

}  // namespace gcrun::outputs
