#include <sstream>

#include "outputs/builtin_sinks.h"
#include "outputs/files/safe_files.h"
#include "outputs/json.h"

namespace gcrun::outputs {
namespace {

class JsonlSink : public MetricSink {
 public:
  JsonlSink(const std::string& run_dir, bool append)
      : out_(run_dir, "metrics.jsonl", /*truncate=*/!append) {}

  void metric(const MetricEvent& event) override {
    std::ostringstream line;
    line << "{\"name\": " << jsonString(event.name) << ", \"value\": " << jsonNumber(event.value)
         << ", \"split\": " << jsonString(event.split) << ", \"epoch\": " << jsonNumber(event.epoch)
         << ", \"step\": " << event.step << ", \"bits\": " << event.bits;
    if (event.window > 0) line << ", \"window\": " << event.window;
    line << "}\n";
    out_.write(line.str());
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
