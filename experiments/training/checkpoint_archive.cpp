#include "experiments/training/checkpoint_archive.h"

#include <cstring>
#include <memory>
#include <optional>
#include <stdexcept>
#include <unordered_map>
#include <vector>

#include <caffe2/serialize/inline_container.h>
#include <caffe2/serialize/read_adapter_interface.h>
#include <torch/csrc/jit/serialization/unpickler.h>

#include "experiments/training/checked_bytes.h"
#include "hyperparams/base/text.h"

namespace gcrun::experiments {
namespace {

constexpr uint32_t kEndOfDirectory = 0x06054b50, kZip64Locator = 0x07064b50, kZip64End = 0x06064b50,
                   kDirectoryEntry = 0x02014b50, kLocalHeader = 0x04034b50;
constexpr uint64_t kSaturated32 = 0xffffffff;

// A zip64 extra field's 64-bit values, for those of `fields` that are saturated, in zip order.
void readZip64Sizes(const CheckedBytes& zip, size_t extra, size_t extra_length, std::vector<uint64_t*> fields) {
  for (size_t at = extra; at + 4 <= extra + extra_length;) {
    const uint64_t id = zip.number(at, 2), length = zip.number(at + 2, 2);
    if (id == 1) {
      size_t next = at + 4;
      for (uint64_t* field : fields) {
        if (*field != kSaturated32) continue;
        if (next + 8 > at + 4 + length) refuseCheckpointBytes("the zip64 field of a record is too short");
        *field = zip.number(next, 8);
        next += 8;
      }
      return;
    }
    at += 4 + length;
  }
}

// Every record of the zip central directory is stored as is and lies inside the bytes: LibTorch
// allocates what a record's header claims before it inflates, so a compressed record could claim
// any size.
void checkStoredRecords(std::string_view archive) {
  const CheckedBytes zip(archive, "the zip archive");
  // The end record (22 bytes) closes the archive, after a comment of at most 64 KiB.
  const size_t lowest = archive.size() > 22 + 65535 ? archive.size() - 22 - 65535 : 0;
  size_t end = std::string_view::npos;
  for (size_t at = archive.size() >= 22 ? archive.size() - 21 : 0; end == std::string_view::npos && at-- > lowest;) {
    if (zip.number(at, 4) == kEndOfDirectory) end = at;
  }
  if (end == std::string_view::npos) refuseCheckpointBytes("not a zip archive (no end of central directory)");
  uint64_t entries = zip.number(end + 10, 2), directory = zip.number(end + 16, 4);
  if ((entries == 0xffff || directory == kSaturated32) && end >= 20 && zip.number(end - 20, 4) == kZip64Locator) {
    const uint64_t zip64_end = zip.number(end - 20 + 8, 8);
    if (zip.number(zip64_end, 4) != kZip64End) refuseCheckpointBytes("the zip64 end of central directory is missing");
    entries = zip.number(zip64_end + 32, 8);
    directory = zip.number(zip64_end + 48, 8);
  }
  for (uint64_t i = 0, at = directory; i < entries; ++i) {
    if (zip.number(at, 4) != kDirectoryEntry) refuseCheckpointBytes("the zip central directory is cut short");
    const uint64_t method = zip.number(at + 10, 2), name_length = zip.number(at + 28, 2),
                   extra_length = zip.number(at + 30, 2), comment_length = zip.number(at + 32, 2);
    uint64_t packed = zip.number(at + 20, 4), size = zip.number(at + 24, 4), offset = zip.number(at + 42, 4);
    readZip64Sizes(zip, at + 46 + name_length, extra_length, {&size, &packed, &offset});
    const std::string name(zip.view(at + 46, name_length));
    if (method != 0 || packed != size) refuseCheckpointBytes("record " + clipForMessage(name) + " is compressed");
    if (zip.number(offset, 4) != kLocalHeader)
      refuseCheckpointBytes("record " + clipForMessage(name) + " has no local header");
    const uint64_t data = offset + 30 + zip.number(offset + 26, 2) + zip.number(offset + 28, 2);
    zip.view(data, size);  // throws when the record's bytes run past the archive
    at += 46 + name_length + extra_length + comment_length;
  }
}

// LibTorch's zip reader on bytes held elsewhere.
class ViewAdapter : public caffe2::serialize::ReadAdapterInterface {
 public:
  explicit ViewAdapter(std::string_view bytes) : bytes_(bytes) {}
  size_t size() const override { return bytes_.size(); }
  size_t read(uint64_t pos, void* buf, size_t n, const char* /*what*/) const override {
    if (pos >= bytes_.size()) return 0;
    n = std::min<size_t>(n, bytes_.size() - pos);
    std::memcpy(buf, bytes_.data() + pos, n);
    return n;
  }

 private:
  std::string_view bytes_;
};

// The storage records handed to the unpickler, each read once: a pickle may name a record again
// for every tensor that shares it (torch.save does), and each gets the same bytes. A storage's
// size in the pickle is only what the pickle says; sizeAt() is what its record holds.
class RecordReader {
 public:
  explicit RecordReader(caffe2::serialize::PyTorchStreamReader& zip) : zip_(zip) {}

  at::DataPtr operator()(const std::string& key) {
    auto& record = records_[key];
    if (!record) {
      auto [data, size] = zip_.getRecord("data/" + key);
      sizes_[data.get()] = size;
      record = std::make_shared<at::DataPtr>(std::move(data));
    }
    // An alias that keeps the record alive.
    return at::DataPtr(record->get(), new std::shared_ptr<at::DataPtr>(record), releaseAlias, at::kCPU);
  }
  size_t sizeAt(const void* data) const {
    const auto found = sizes_.find(data);
    return found == sizes_.end() ? 0 : found->second;
  }

 private:
  static void releaseAlias(void* holder) { delete static_cast<std::shared_ptr<at::DataPtr>*>(holder); }

  caffe2::serialize::PyTorchStreamReader& zip_;
  std::unordered_map<std::string, std::shared_ptr<at::DataPtr>> records_;
  std::unordered_map<const void*, size_t> sizes_;
};

// The only type tag a checkpoint carries (LibTorch's own pickles before gcrun 0.9 tagged the dict).
c10::TypePtr dictOfTensorsOnly(const std::string& type) {
  if (type != "Dict[str, Tensor]") refuseCheckpointBytes("data.pkl tags a value as '" + clipForMessage(type) + "'");
  return c10::DictType::create(c10::StringType::get(), c10::TensorType::get());
}

// a * b + c, or nullopt when it leaves int64_t.
std::optional<int64_t> mulAdd(int64_t a, int64_t b, int64_t c) {
  int64_t product = 0, sum = 0;
  if (__builtin_mul_overflow(a, b, &product) || __builtin_add_overflow(product, c, &sum)) return std::nullopt;
  return sum;
}

// A dense CPU tensor whose elements lie inside the bytes its storage record holds.
void checkTensor(const std::string& key, const at::Tensor& tensor, const RecordReader& records) {
  const std::string name = "tensor '" + clipForMessage(key) + "'";
  if (!tensor.defined() || tensor.layout() != at::kStrided || !tensor.device().is_cpu() || tensor.is_quantized()) {
    refuseCheckpointBytes(name + " is not a dense CPU tensor");
  }
  at::StorageImpl& storage = *tensor.storage().unsafeGetStorageImpl();
  storage.set_nbytes(records.sizeAt(storage.data()));  // what is there, not what the pickle claims
  if (tensor.storage_offset() < 0) refuseCheckpointBytes(name + " has a negative storage offset");
  for (int64_t d = 0; d < tensor.dim(); ++d) {
    if (tensor.size(d) < 0 || tensor.stride(d) < 0) refuseCheckpointBytes(name + " has a negative size or stride");
  }
  if (tensor.numel() == 0) return;
  std::optional<int64_t> last = tensor.storage_offset();
  for (int64_t d = 0; d < tensor.dim() && last; ++d) last = mulAdd(tensor.size(d) - 1, tensor.stride(d), *last);
  const auto bytes = last ? mulAdd(*last + 1, static_cast<int64_t>(tensor.itemsize()), 0) : std::nullopt;
  if (!bytes || static_cast<uint64_t>(*bytes) > storage.nbytes()) {
    refuseCheckpointBytes(name + " reaches " + (bytes ? std::to_string(*bytes) : std::string("past 2^63")) +
                          " bytes into its storage record, which holds " + std::to_string(storage.nbytes()));
  }
}

}  // namespace

TensorMap readTensorArchive(std::string_view archive) {
  checkStoredRecords(archive);
  caffe2::serialize::PyTorchStreamReader zip(std::make_shared<ViewAdapter>(archive));
  auto [pickle, pickle_size] = zip.getRecord("data.pkl");
  const std::string_view pickled(static_cast<const char*>(pickle.get()), pickle_size);
  checkCheckpointPickle(pickled);
  size_t read = 0;
  const auto reader = [&](char* buffer, size_t length) {
    length = std::min(length, pickled.size() - read);
    std::memcpy(buffer, pickled.data() + read, length);
    read += length;
    return length;
  };
  RecordReader records(zip);
  torch::jit::Unpickler unpickler(reader, nullptr, nullptr, std::ref(records), c10::Device(c10::kCPU), false,
                                  dictOfTensorsOnly);
  const auto value = unpickler.parse_ivalue();
  if (!value.isGenericDict()) refuseCheckpointBytes("data.pkl holds no dict");
  TensorMap state;
  for (const auto& item : value.toGenericDict()) {
    if (!item.key().isString() || !item.value().isTensor())
      refuseCheckpointBytes("data.pkl's dict is not one of named tensors");
    checkTensor(item.key().toStringRef(), item.value().toTensor(), records);
    state[item.key().toStringRef()] = item.value().toTensor();
  }
  return state;
}

}  // namespace gcrun::experiments
