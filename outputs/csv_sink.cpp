#include <cmath>
#include <sstream>
#include <vector>

#include "hyperparams/base/units.h"
#include "outputs/builtin_sinks.h"
#include "outputs/csv_field.h"
#include "outputs/files/safe_files.h"
#include "outputs/json.h"
#include "outputs/run_directory.h"

namespace gcrun::outputs {
namespace {

std::string csvNumber(double value) {
  if (std::isnan(value)) return "nan";
  if (std::isinf(value)) return value > 0 ? "inf" : "-inf";
  return jsonNumber(value);
}

class CsvSink : public MetricSink {
 public:
  CsvSink(const std::string& run_dir, bool append)
      : file_(run_dir, run_files::kEpochs, /*truncate=*/!append), header_on_file_(append && !file_.wasEmpty()) {}

  void metric(const MetricEvent&) override {}

  void epochEnd(const EpochSummary& summary) override {
    if (!header_written_) writeHeader(summary);
    out_ << summary.epoch << ',' << summary.step;
    writeValues(summary.train, train_columns_);
    writeValues(summary.validation, validation_columns_);
    writeValues(summary.test, test_columns_);
    out_ << ',' << csvNumber(units::mibOfBits(static_cast<double>(summary.bits))) << ',' << csvNumber(summary.elapsed_s)
         << ',' << csvNumber(summary.learning_rate) << '\n';
    file_.write(out_.str());
    out_.str("");
    file_.flush();
  }

  void close() override { file_.flush(); }

 private:
  // The columns are fixed by the first epoch: later epochs report the same metrics.
  void writeHeader(const EpochSummary& summary) {
    std::ostringstream header;
    header << "epoch,step";
    for (const auto& [name, value] : summary.train) {
      train_columns_.push_back(name);
      header << ',' << csvField("train_" + name);
    }
    for (const auto& [name, value] : summary.validation) {
      validation_columns_.push_back(name);
      header << ',' << csvField("validation_" + name);
    }
    for (const auto& [name, value] : summary.test) {
      test_columns_.push_back(name);
      header << ',' << csvField("test_" + name);
    }
    header << ",mib_sent,elapsed_s,learning_rate\n";
    if (!header_on_file_) out_ << header.str();
    header_written_ = true;
  }

  void writeValues(const std::map<std::string, double>& values, const std::vector<std::string>& columns) {
    for (const auto& column : columns) {
      out_ << ',';
      if (auto it = values.find(column); it != values.end()) out_ << csvNumber(it->second);
    }
  }

  files::AppendFile file_;
  bool header_on_file_;     // a resumed run's file already starts with the header
  std::ostringstream out_;  // the row being written
  bool header_written_ = false;
  std::vector<std::string> train_columns_;
  std::vector<std::string> validation_columns_;
  std::vector<std::string> test_columns_;
};

}  // namespace

std::unique_ptr<MetricSink> makeCsvSink(const SinkContext& context) {
  return std::make_unique<CsvSink>(context.run_dir, context.resume);
}

}  // namespace gcrun::outputs
