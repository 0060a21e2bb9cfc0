#include <cerrno>
#include <cstring>
#include <fstream>
#include <stdexcept>

#include "outputs/builtin_sinks.h"
#include "outputs/json.h"

namespace gcrun::outputs {
namespace {

class JsonlSink : public MetricSink {
 public:
  JsonlSink(std::string path, bool append)
      : path_(std::move(path)), out_(path_, append ? std::ios::app : std::ios::trunc) {
    if (!out_) {
      throw std::runtime_error("cannot open '" + path_ + "' for writing: " + std::strerror(errno));
    }
  }

  void metric(const MetricEvent& event) override {
    out_ << "{\"name\": " << jsonString(event.name) << ", \"value\": " << jsonNumber(event.value)
         << ", \"split\": " << jsonString(event.split) << ", \"epoch\": " << jsonNumber(event.epoch)
         << ", \"step\": " << event.step << ", \"bits\": " << event.bits;
    if (event.window > 0) out_ << ", \"window\": " << event.window;
    out_ << "}\n";
  }

  // Flushing per epoch rather than per line: a crash loses at most the current epoch's events.
  void epochEnd(const EpochSummary&) override { flush(); }
  void close() override { flush(); }

 private:
  void flush() {
    out_.flush();
    if (!out_) throw std::runtime_error("cannot write '" + path_ + "': " + std::strerror(errno));
  }

  std::string path_;
  std::ofstream out_;
};

}  // namespace

std::unique_ptr<MetricSink> makeJsonlSink(const SinkContext& context) {
  return std::make_unique<JsonlSink>(context.run_dir + "/metrics.jsonl", context.resume);
}

}  // namespace gcrun::outputs
