#include "outputs/builtin_sinks.h"
#include "outputs/files/safe_files.h"
#include "outputs/json_document.h"
#include "outputs/run_directory.h"

namespace gcrun::outputs {
namespace {

class JsonlSink : public MetricSink {
 public:
  JsonlSink(const std::string& run_dir, bool append) : out_(run_dir, run_files::kMetrics, /*truncate=*/!append) {}

  void metric(const MetricEvent& event) override {
    Json line{{"name", event.name},   {"value", event.value}, {"split", event.split},
              {"epoch", event.epoch}, {"step", event.step},   {"bits", event.bits}};
    if (event.window > 0) line["window"] = event.window;
    out_.write(jsonText(line) + "\n");
  }

  // Flushing per epoch rather than per line: a crash loses at most the current epoch's events.
  void epochEnd(const EpochSummary&) override { out_.flush(); }
  void close() override { out_.flush(); }

 private:
  files::AppendFile out_;
};

}  // namespace

std::unique_ptr<MetricSink> makeJsonlSink(const SinkContext& context) {
  return std::make_unique<JsonlSink>(context.run_dir, context.resume);
}

}  // namespace gcrun::outputs
