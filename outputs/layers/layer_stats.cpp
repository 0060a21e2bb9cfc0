#include "outputs/layers/layer_stats.h"

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <map>
#include <utility>

#include "hyperparams/base/errors.h"
#include "hyperparams/base/text.h"
#include "outputs/csv_field.h"
#include "outputs/json.h"
#include "outputs/run_directory.h"

namespace gcrun::outputs {
namespace {

// A layer row is short; a longer line is not gcrun's.
constexpr size_t kMaxRowBytes = 4 << 10;

// The fields of a CSV line, quotes undone; nothing for an unterminated quote.
std::optional<std::vector<std::string>> splitCsv(const std::string& line) {
  std::vector<std::string> fields(1);
  bool quoted = false;
  for (size_t i = 0; i < line.size(); ++i) {
    const char c = line[i];
    if (quoted) {
      if (c != '"') {
        fields.back() += c;
      } else if (i + 1 < line.size() && line[i + 1] == '"') {
        fields.back() += '"';
        ++i;
      } else {
        quoted = false;
      }
    } else if (c == '"') {
      quoted = true;
    } else if (c == ',') {
      fields.emplace_back();
    } else {
      fields.back() += c;
    }
  }
  if (quoted) return std::nullopt;
  return fields;
}

std::optional<int64_t> integerOf(const std::string& text) {
  if (text.empty()) return std::nullopt;
  char* end = nullptr;
  errno = 0;
  const long long value = std::strtoll(text.c_str(), &end, 10);
  if (errno != 0 || *end != '\0') return std::nullopt;
  return value;
}

std::optional<double> finiteOf(const std::string& text) {
  if (text.empty()) return std::nullopt;
  char* end = nullptr;
  const double value = std::strtod(text.c_str(), &end);
  if (*end != '\0' || !std::isfinite(value)) return std::nullopt;
  return value;
}

std::optional<std::vector<int64_t>> shapeOf(const std::string& text) {
  std::vector<int64_t> shape;
  if (text == "scalar") return shape;
  size_t start = 0;
  for (;;) {
    const size_t cross = text.find('x', start);
    const auto size = integerOf(text.substr(start, cross == std::string::npos ? std::string::npos : cross - start));
    if (!size || *size < 0) return std::nullopt;
    shape.push_back(*size);
    if (cross == std::string::npos) return shape;
    start = cross + 1;
  }
}

// Whether the file's last byte is a newline (read after the file was opened for appending, which
// refuses a symlink).
bool endsWithNewline(const std::string& path) {
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  if (!in || in.tellg() <= 0) return true;
  in.seekg(-1, std::ios::end);
  return in.get() == '\n';
}

// An empty cell for an unknown value.
template <class T, class Format>
std::string cell(const std::optional<T>& value, Format format) {
  return value ? format(*value) : std::string();
}

}  // namespace

const char kLayerStatsHeader[] = "step,parameter,shape,elements,bits,grad_norm,rel_compression_error,rank";

std::string shapeText(const std::vector<int64_t>& shape) {
  if (shape.empty()) return "scalar";
  std::string text;
  for (size_t d = 0; d < shape.size(); ++d) text += (d ? "x" : "") + std::to_string(shape[d]);
  return text;
}

std::string formatLayerStatsRow(const LayerStatsRow& row) {
  const auto integer = [](auto value) { return std::to_string(value); };
  return std::to_string(row.step) + ',' + csvField(oneLine(row.parameter)) + ',' + shapeText(row.shape) + ',' +
         std::to_string(row.elements) + ',' + cell(row.bits, integer) + ',' + jsonNumber(row.grad_norm) + ',' +
         cell(row.rel_compression_error, jsonNumber) + ',' + cell(row.rank, integer);
}

std::optional<LayerStatsRow> parseLayerStatsRow(const std::string& line) {
  const auto fields = splitCsv(line);
  if (!fields || fields->size() != 8) return std::nullopt;
  const auto& f = *fields;
  LayerStatsRow row;
  const auto step = integerOf(f[0]);
  const auto shape = shapeOf(f[2]);
  const auto elements = integerOf(f[3]);
  const auto grad_norm = finiteOf(f[5]);
  if (!step || f[1].empty() || !shape || !elements || *elements < 0 || !grad_norm) return std::nullopt;
  row.step = *step;
  row.parameter = csvFieldText(f[1]);
  row.shape = *shape;
  row.elements = *elements;
  row.grad_norm = *grad_norm;
  if (!f[4].empty()) {
    const auto bits = integerOf(f[4]);
    if (!bits || *bits < 0) return std::nullopt;
    row.bits = static_cast<uint64_t>(*bits);
  }
  if (!f[6].empty() && !(row.rel_compression_error = finiteOf(f[6]))) return std::nullopt;
  if (!f[7].empty() && !(row.rank = integerOf(f[7]))) return std::nullopt;
  return row;
}

LayerStatsFile::LayerStatsFile(const std::string& run_dir, bool append)
    : file_(run_dir, run_files::kLayers, /*truncate=*/!append) {
  if (file_.wasEmpty()) {
    file_.write(std::string(kLayerStatsHeader) + "\n");
  } else if (!endsWithNewline(file_.path())) {
    file_.write("\n");  // a crash cut the last row short: the resumed run's rows start on a line of their own
  }
}

void LayerStatsFile::layerStats(const std::vector<LayerStatsRow>& rows) {
  for (const auto& row : rows) file_.write(formatLayerStatsRow(row) + "\n");
  file_.flush();
}

std::unique_ptr<MetricSink> makeLayerStatsSink(const SinkContext& context) {
  return std::make_unique<LayerStatsFile>(context.run_dir, context.resume);
}

std::vector<LayerSummary> readLayerSummaries(const std::string& path) {
  struct Sums {
    LayerSummary summary;
    double bits = 0, error = 0;
    size_t with_bits = 0, with_error = 0;
  };
  std::vector<Sums> layers;
  std::map<std::string, size_t> index_of;
  bool first = true;
  files::forEachLine(path, files::kMaxMetricsBytes, kMaxRowBytes, [&](const std::string& line) {
    if (std::exchange(first, false)) {
      if (line != kLayerStatsHeader) {
        throw UserError(path + ": not a gcrun layers.csv (its first line is not '" + kLayerStatsHeader + "')");
      }
      return;
    }
    const auto row = parseLayerStatsRow(line);
    if (!row) return;
    auto [at, added] = index_of.emplace(row->parameter, layers.size());
    if (added) {
      layers.emplace_back();
      layers.back().summary.parameter = row->parameter;
      layers.back().summary.shape = shapeText(row->shape);
      layers.back().summary.elements = row->elements;
    }
    auto& sums = layers[at->second];
    ++sums.summary.samples;
    if (row->bits) {
      sums.bits += static_cast<double>(*row->bits);
      ++sums.with_bits;
    }
    if (row->rel_compression_error) {
      sums.error += *row->rel_compression_error;
      ++sums.with_error;
    }
    sums.summary.rank = row->rank;
  });
  std::vector<LayerSummary> summaries;
  for (auto& sums : layers) {
    if (sums.with_bits) sums.summary.mean_bits = sums.bits / static_cast<double>(sums.with_bits);
    if (sums.with_error) sums.summary.mean_compression_error = sums.error / static_cast<double>(sums.with_error);
    summaries.push_back(std::move(sums.summary));
  }
  return summaries;
}

}  // namespace gcrun::outputs
