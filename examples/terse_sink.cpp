// A user's own metric sink, added to gcrun as a plugin (examples/CMakeLists.txt builds it):
//     gcrun experiment fashion-sgd --plugin libgcrun_terse_plugin.so --set output.sinks=[terse,jsonl]
// It prints one terse line per epoch instead of the console's progress. Its spec lists a setting of
// its own, output.terse_digits, which --set, --config, `gcrun show` and `gcrun list keys` then
// treat like a built-in key.
#include <cstdio>
#include <memory>

#include "hyperparams/settings.h"
#include "outputs/metric_sink.h"

namespace {

struct TerseOptions {
  int64_t terse_digits = 4;
};

const gcrun::hyperparams::SettingsSchema<TerseOptions>& settings() {
  static const auto schema = gcrun::hyperparams::SettingsSchema<TerseOptions>().add(
      &TerseOptions::terse_digits, "terse_digits", gcrun::hyperparams::integerAtLeast(0),
      "terse sink plugin: decimals of the test accuracy it prints.");
  return schema;
}

class TerseSink : public gcrun::outputs::MetricSink {
 public:
  explicit TerseSink(const TerseOptions& options) : digits_(static_cast<int>(options.terse_digits)) {}

  void metric(const gcrun::outputs::MetricEvent& event) override { ++events_; }

  void epochEnd(const gcrun::outputs::EpochSummary& summary) override {
    std::printf("terse: epoch=%lld step=%lld test_accuracy=%.*f events=%d\n", static_cast<long long>(summary.epoch),
                static_cast<long long>(summary.step), digits_,
                summary.test.count("accuracy") ? summary.test.at("accuracy") : 0.0, events_);
  }

  void close() override { std::printf("terse: closed after %d events\n", events_); }

 private:
  const int digits_;
  int events_ = 0;
};

}  // namespace

extern "C" void gcrun_register(void) {
  gcrun::outputs::sinkRegistry().add(
      "terse", "one terse line per epoch (example plugin)",
      {[](const gcrun::outputs::SinkContext& context) {
         return std::make_unique<TerseSink>(settings().read(context.config.output.settings));
       },
       settings().specs()});
}
