#include "outputs/builtin_sinks.h"
#include "outputs/metric_sink.h"
#include "outputs/tensorboard/tensorboard_sink.h"

namespace gcrun::outputs {

Registry<SinkSpec>& sinkRegistry() {
  // Built-ins are added here, not by static registrars, which a static library would drop.
  static Registry<SinkSpec> registry = [] {
    Registry<SinkSpec> built_ins("metric sink");
    built_ins.add("console", "progress and one line per epoch on stdout", {makeConsoleSink});
    built_ins.add("jsonl", "every metric event as a JSON line in <run_dir>/metrics.jsonl", {makeJsonlSink});
    built_ins.add("csv", "one row of metrics per epoch in <run_dir>/epochs.csv", {makeCsvSink});
    built_ins.add("tensorboard", "TensorBoard event files and HParams in <run_dir>/tb/ (off by default)",
                  {tensorboard::makeTensorboardSink});
    return built_ins;
  }();
  return registry;
}

}  // namespace gcrun::outputs
