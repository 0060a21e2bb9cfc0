// A user's own metric sink, plugged into gcrun through the library API: it replaces the built-in
// console sink with one that prints one terse line per epoch, then runs an experiment in this
// process. Usage: gcrun_custom_sink_example OUTPUT_DIR [key=value ...]
#include <cstdio>
#include <string>
#include <vector>

#include "experiments/presets.h"
#include "experiments/experiment.h"
#include "outputs/metric_sink.h"

namespace {

class TerseSink : public gcrun::outputs::MetricSink {
 public:
  void metric(const gcrun::outputs::MetricEvent& event) override { ++events_; }

  void epochEnd(const gcrun::outputs::EpochSummary& summary) override {
    std::printf("terse: epoch=%lld step=%lld test_accuracy=%.4f events=%d\n",
                static_cast<long long>(summary.epoch), static_cast<long long>(summary.step),
                summary.test.count("accuracy") ? summary.test.at("accuracy") : 0.0, events_);
  }

  void close() override { std::printf("terse: closed after %d events\n", events_); }

 private:
  int events_ = 0;
};

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s OUTPUT_DIR [key=value ...]\n", argv[0]);
    return 2;
  }
  gcrun::outputs::sinkRegistry().add("console", "one terse line per epoch (example)",
                                     [](const gcrun::outputs::SinkContext&) { return std::make_unique<TerseSink>(); });
  try {
    gcrun::experiments::ExperimentRequest request;
    request.preset = "fashion-sgd";
    request.output_dir = argv[1];
    request.assignments.assign(argv + 2, argv + argc);
    return gcrun::experiments::runExperiment(request);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "example: %s\n", e.what());
    return 1;
  }
  return 0;
}
