#include "tasks/idx_reader.h"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <limits>
#include <memory>
#include <optional>
#include <vector>

#include <zlib.h>

#include <ATen/ATen.h>

#include "hyperparams/base/errors.h"

namespace gcrun::tasks {
namespace {

constexpr uint32_t kImagesMagic = 0x00000803;  // uint8, 3 dimensions
constexpr uint32_t kLabelsMagic = 0x00000801;  // uint8, 1 dimension
constexpr unsigned kReadChunk = 1u << 20;

struct GzCloser {
  void operator()(gzFile_s* file) const { gzclose(file); }
};

std::string hex32(uint32_t value) {
  char text[11];
  std::snprintf(text, sizeof(text), "0x%08x", value);
  return text;
}

// A gzipped (or plain: gzread passes those through) file, read in order.
class GzReader {
 public:
  explicit GzReader(const std::string& path) : path_(path) {
    errno = 0;
    file_.reset(gzopen(path.c_str(), "rb"));
    if (!file_) {
      const char* reason = errno != 0 ? std::strerror(errno) : "out of memory";
      throw UserError(path + ": cannot open (" + reason + ")");
    }
  }

  // Appends up to `count` bytes to `out`; fewer only at the end of the data.
  void readInto(std::vector<uint8_t>& out, uint64_t count) {
    while (count > 0) {
      const unsigned chunk = static_cast<unsigned>(std::min<uint64_t>(count, kReadChunk));
      const size_t old_size = out.size();
      out.resize(old_size + chunk);
      const int got = gzread(file_.get(), out.data() + old_size, chunk);
      if (got < 0) {
        int code = 0;
        throw UserError(path_ + ": corrupt gzip data (" + gzerror(file_.get(), &code) + ")");
      }
      out.resize(old_size + static_cast<size_t>(got));
      if (got == 0) return;
      count -= static_cast<uint64_t>(got);
    }
  }

 private:
  std::string path_;
  std::unique_ptr<gzFile_s, GzCloser> file_;
};

uint32_t bigEndian32(const uint8_t* bytes) {
  return (uint32_t{bytes[0]} << 24) | (uint32_t{bytes[1]} << 16) | (uint32_t{bytes[2]} << 8) | uint32_t{bytes[3]};
}

std::optional<uint64_t> checkedProduct(const std::vector<int64_t>& dims) {
  uint64_t product = 1;
  for (int64_t dim : dims) {
    uint64_t d = static_cast<uint64_t>(dim);
    if (d != 0 && product > std::numeric_limits<uint64_t>::max() / d) return std::nullopt;
    product *= d;
  }
  return product;
}

// Parses magic and dimensions, then reads exactly the data they declare and one byte more: the
// decompressed stream is never read past what the header announces, so a small file that inflates
// to gigabytes costs no more memory than its header says.
at::Tensor readIdx(const std::string& path, uint32_t magic, const char* what) {
  GzReader reader(path);
  std::vector<uint8_t> data;
  reader.readInto(data, 4);
  if (data.size() < 4 || bigEndian32(data.data()) != magic) {
    std::string found = data.size() < 4 ? "a file of " + std::to_string(data.size()) + " bytes"
                                        : "magic " + hex32(bigEndian32(data.data()));
    throw UserError(path + ": not an IDX file of " + what + ": found " + found + ", expected magic " + hex32(magic));
  }
  const size_t num_dims = magic & 0xff;
  const size_t header = 4 * (1 + num_dims);
  reader.readInto(data, header - 4);
  if (data.size() < header) {
    throw UserError(path + ": truncated IDX header: expected " + std::to_string(header) + " bytes, got " +
                    std::to_string(data.size()));
  }
  std::vector<int64_t> dims;
  for (size_t i = 0; i < num_dims; ++i) dims.push_back(bigEndian32(data.data() + 4 * (i + 1)));
  const std::optional<uint64_t> expected = checkedProduct(dims);
  if (!expected) throw UserError(path + ": the IDX header declares over 2^64 bytes of " + what);
  reader.readInto(data, *expected + 1);
  const uint64_t payload = data.size() - header;
  if (*expected > payload) {
    throw UserError(path + ": truncated IDX data: the header declares " + std::to_string(*expected) + " bytes of " +
                    what + ", got " + std::to_string(payload));
  }
  if (*expected < payload) {
    throw UserError(path + ": unexpected bytes after the " + std::to_string(*expected) + " bytes of " + what +
                    " the IDX header declares");
  }
  at::Tensor out = at::empty(dims, at::kByte);
  std::memcpy(out.data_ptr<uint8_t>(), data.data() + header, payload);
  return out;
}

}  // namespace

at::Tensor readIdxImages(const std::string& path) { return readIdx(path, kImagesMagic, "uint8 3-D images"); }

at::Tensor readIdxLabels(const std::string& path, int64_t num_classes) {
  at::Tensor labels = readIdx(path, kLabelsMagic, "uint8 1-D labels");
  const uint8_t* values = labels.data_ptr<uint8_t>();
  for (int64_t i = 0; i < labels.numel(); ++i) {
    if (values[i] >= num_classes) {
      throw UserError(path + ": label " + std::to_string(values[i]) + " of sample " + std::to_string(i) +
                      " is outside [0, " + std::to_string(num_classes) + ")");
    }
  }
  return labels;
}

IdxDataset readIdxDataset(const std::string& images_path, const std::string& labels_path, int64_t num_classes) {
  IdxDataset dataset{readIdxImages(images_path), readIdxLabels(labels_path, num_classes)};
  if (dataset.images.size(0) != dataset.labels.size(0)) {
    throw UserError(labels_path + ": holds " + std::to_string(dataset.labels.size(0)) + " labels but " + images_path +
                    " holds " + std::to_string(dataset.images.size(0)) + " images");
  }
  return dataset;
}

}  // namespace gcrun::tasks
