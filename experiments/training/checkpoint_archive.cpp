#include "experiments/training/checkpoint_archive.h"

#include <cstring>
#include <memory>
#include <optional>
#include <set>
#include <stdexcept>
#include <unordered_map>
#include <vector>

#include <caffe2/serialize/inline_container.h>
#include <caffe2/serialize/read_adapter_interface.h>
#include <torch/csrc/jit/serialization/pickler.h>
#include <torch/csrc/jit/serialization/unpickler.h>

#include "hyperparams/base/text.h"

namespace gcrun::experiments {
namespace {

using Op = torch::jit::PickleOpCode;

[[noreturn]] void refuse(const std::string& what) { throw std::invalid_argument(what); }

// Little-endian fields of a byte string, each read checked against its end.
class Bytes {
 public:
  Bytes(std::string_view bytes, std::string what) : bytes_(bytes), what_(std::move(what)) {}

  size_t size() const { return bytes_.size(); }
  uint64_t number(size_t at, size_t width) const {
    uint64_t value = 0;
    for (size_t i = view(at, width).size(); i-- > 0;) value = value << 8 | static_cast<unsigned char>(bytes_[at + i]);
    return value;
  }
  std::string_view view(size_t at, size_t length) const {
    if (at > bytes_.size() || length > bytes_.size() - at) {
      refuse(what_ + " ends inside a field at byte " + std::to_string(at));
    }
    return bytes_.substr(at, length);
  }

 private:
  std::string_view bytes_;
  std::string what_;
};

// --- the pickle ---

// A value on the pickle's stack or in its memo, as far as nesting goes.
struct Value {
  enum class Kind { scalar, list, dict, other } kind = Kind::scalar;
  int depth = 0;        // 0 for a scalar, 1 + its deepest element's for a container
  bool placed = false;  // inside another value: its depth is fixed from then on
};
using ValuePtr = std::shared_ptr<Value>;

// The globals a checkpoint's pickle names.
bool allowedGlobal(std::string_view module, std::string_view name) {
  static const std::set<std::string_view> storages = {
      "FloatStorage", "DoubleStorage", "HalfStorage", "BFloat16Storage", "LongStorage",         "IntStorage",
      "ShortStorage", "CharStorage",   "ByteStorage", "BoolStorage",     "ComplexFloatStorage", "ComplexDoubleStorage"};
  return (module == "torch._utils" && name == "_rebuild_tensor_v2") ||
         (module == "collections" && name == "OrderedDict") || (module == "torch" && storages.count(name) > 0) ||
         (module == "torch.jit._pickle" && name == "restore_type_tag");
}

class PickleCheck {
 public:
  explicit PickleCheck(std::string_view pickle) : bytes_(pickle, "data.pkl") {}

  void run() {
    while (!stopped_) {
      const size_t at = pos_;
      if (at >= bytes_.size()) refuse("data.pkl ends without STOP");
      step(static_cast<Op>(bytes_.view(pos_++, 1)[0]), at);
    }
    if (pos_ != bytes_.size()) refuse("data.pkl has bytes after STOP at byte " + std::to_string(pos_ - 1));
    if (stack_.size() != 1 || !marks_.empty()) refuse("data.pkl leaves no single value at STOP");
  }

 private:
  void step(Op op, size_t at) {
    switch (op) {
      case Op::PROTO:
        if (read(1) != 2) refuse("data.pkl is not pickle protocol 2");
        return;
      case Op::STOP:
        stopped_ = true;
        return;
      case Op::MARK:
        if (static_cast<int>(marks_.size()) >= kMaxPickleNesting) tooDeep(at);
        marks_.push_back(stack_.size());
        return;
      case Op::EMPTY_LIST:
        return push(container(Value::Kind::list));
      case Op::EMPTY_DICT:
        return push(container(Value::Kind::dict));
      case Op::EMPTY_TUPLE:
        return push(container(Value::Kind::other));
      case Op::TUPLE:
        return push(holding(popToMark(at), at));
      case Op::TUPLE1:
      case Op::TUPLE2:
      case Op::TUPLE3:
        return push(holding(pop(static_cast<size_t>(op) - static_cast<size_t>(Op::TUPLE1) + 1, at), at));
      case Op::APPEND:
        return addTo(Value::Kind::list, pop(1, at), at);
      case Op::APPENDS:
        return addTo(Value::Kind::list, popToMark(at), at);
      case Op::SETITEM:
        return addTo(Value::Kind::dict, pop(2, at), at);
      case Op::SETITEMS:
        return addTo(Value::Kind::dict, popToMark(at), at);
      case Op::REDUCE:
        return push(holding(pop(2, at), at));
      case Op::BINPERSID:
        return push(holding(pop(1, at), at));
      case Op::BINUNICODE: {
        const uint64_t length = read(4);
        pos_ += bytes_.view(pos_, length).size();
        return push(scalar());
      }
      case Op::BININT1:
      case Op::BININT2:
      case Op::BININT:
      case Op::BINFLOAT:
        read(op == Op::BININT1 ? 1 : op == Op::BININT2 ? 2 : op == Op::BININT ? 4 : 8);
        return push(scalar());
      case Op::LONG1: {
        const uint64_t width = read(1);
        if (width > 8) {
          refuse("data.pkl has an integer of " + std::to_string(width) + " bytes at byte " + std::to_string(at));
        }
        read(width);
        return push(scalar());
      }
      case Op::NONE:
      case Op::NEWTRUE:
      case Op::NEWFALSE:
        return push(scalar());
      case Op::GLOBAL: {
        const std::string_view module = line(), name = line();
        if (!allowedGlobal(module, name)) {
          refuse("data.pkl names '" + clipForMessage(std::string(module) + "." + std::string(name)) +
                 "', which no checkpoint holds (byte " + std::to_string(at) + ")");
        }
        return push(scalar());
      }
      case Op::BINPUT:
      case Op::LONG_BINPUT:
        if (stack_.empty()) refuse("data.pkl memoizes from an empty stack at byte " + std::to_string(at));
        memo_[read(op == Op::BINPUT ? 1 : 4)] = stack_.back();
        return;
      case Op::BINGET:
      case Op::LONG_BINGET: {
        const auto found = memo_.find(read(op == Op::BINGET ? 1 : 4));
        if (found == memo_.end()) refuse("data.pkl gets an unset memo entry at byte " + std::to_string(at));
        return push(found->second);
      }
      default:
        refuse("data.pkl has opcode 0x" + hexByte(op) + " at byte " + std::to_string(at) +
               ", which no checkpoint holds");
    }
  }

  uint64_t read(size_t width) {
    const uint64_t value = bytes_.number(pos_, width);
    pos_ += width;
    return value;
  }
  std::string_view line() {
    const std::string_view rest = bytes_.view(pos_, bytes_.size() - pos_);
    const size_t end = rest.find('\n');
    if (end == std::string_view::npos || end > 200) {
      refuse("data.pkl has an unterminated name at byte " + std::to_string(pos_));
    }
    pos_ += end + 1;
    return rest.substr(0, end);
  }
  static std::string hexByte(Op op) {
    const char* digits = "0123456789abcdef";
    const auto byte = static_cast<unsigned char>(op);
    return {digits[byte >> 4], digits[byte & 15]};
  }

  static ValuePtr scalar() { return std::make_shared<Value>(); }
  static ValuePtr container(Value::Kind kind) { return std::make_shared<Value>(Value{kind, 1, false}); }

  // A new value made of `parts` (a tuple, a call's result): they are placed inside it.
  ValuePtr holding(const std::vector<ValuePtr>& parts, size_t at) {
    auto made = container(Value::Kind::other);
    for (const auto& part : parts) place(*part, *made, at);
    return made;
  }
  // `parts` go into the list or dict below them on the stack, which nothing holds yet.
  void addTo(Value::Kind kind, const std::vector<ValuePtr>& parts, size_t at) {
    if (stack_.empty() || stack_.back()->kind != kind || stack_.back()->placed) {
      refuse("data.pkl adds to a value that is no open " + std::string(kind == Value::Kind::list ? "list" : "dict") +
             " at byte " + std::to_string(at));
    }
    if (kind == Value::Kind::dict && parts.size() % 2 != 0) {
      refuse("data.pkl sets a key without a value at byte " + std::to_string(at));
    }
    Value& target = *stack_.back();
    for (const auto& part : parts) {
      if (part.get() == &target) refuse("data.pkl puts a container inside itself at byte " + std::to_string(at));
      place(*part, target, at);
    }
  }
  void place(Value& part, Value& into, size_t at) {
    part.placed = true;
    into.depth = std::max(into.depth, part.depth + 1);
    if (into.depth > kMaxPickleNesting) tooDeep(at);
  }
  [[noreturn]] static void tooDeep(size_t at) {
    refuse("data.pkl nests deeper than " + std::to_string(kMaxPickleNesting) + " levels at byte " + std::to_string(at));
  }

  void push(ValuePtr value) { stack_.push_back(std::move(value)); }
  std::vector<ValuePtr> pop(size_t count, size_t at) {
    const size_t floor = marks_.empty() ? 0 : marks_.back();
    if (stack_.size() < floor + count) refuse("data.pkl pops past its stack at byte " + std::to_string(at));
    std::vector<ValuePtr> popped(stack_.end() - static_cast<std::ptrdiff_t>(count), stack_.end());
    stack_.resize(stack_.size() - count);
    return popped;
  }
  std::vector<ValuePtr> popToMark(size_t at) {
    if (marks_.empty()) refuse("data.pkl closes a MARK it never opened at byte " + std::to_string(at));
    const size_t mark = marks_.back();
    marks_.pop_back();
    std::vector<ValuePtr> popped(stack_.begin() + static_cast<std::ptrdiff_t>(mark), stack_.end());
    stack_.resize(mark);
    return popped;
  }

  Bytes bytes_;
  size_t pos_ = 0;
  bool stopped_ = false;
  std::vector<ValuePtr> stack_;
  std::vector<size_t> marks_;  // stack sizes at each open MARK
  std::unordered_map<uint64_t, ValuePtr> memo_;
};

// --- the zip archive ---

constexpr uint32_t kEndOfDirectory = 0x06054b50, kZip64Locator = 0x07064b50, kZip64End = 0x06064b50,
                   kDirectoryEntry = 0x02014b50, kLocalHeader = 0x04034b50;
constexpr uint64_t kSaturated32 = 0xffffffff;

// A zip64 extra field's 64-bit values, for those of `fields` that are saturated, in zip order.
void readZip64Sizes(const Bytes& zip, size_t extra, size_t extra_length, std::vector<uint64_t*> fields) {
  for (size_t at = extra; at + 4 <= extra + extra_length;) {
    const uint64_t id = zip.number(at, 2), length = zip.number(at + 2, 2);
    if (id == 1) {
      size_t next = at + 4;
      for (uint64_t* field : fields) {
        if (*field != kSaturated32) continue;
        if (next + 8 > at + 4 + length) refuse("the zip64 field of a record is too short");
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
  const Bytes zip(archive, "the zip archive");
  // The end record (22 bytes) closes the archive, after a comment of at most 64 KiB.
  const size_t lowest = archive.size() > 22 + 65535 ? archive.size() - 22 - 65535 : 0;
  size_t end = std::string_view::npos;
  for (size_t at = archive.size() >= 22 ? archive.size() - 21 : 0; end == std::string_view::npos && at-- > lowest;) {
    if (zip.number(at, 4) == kEndOfDirectory) end = at;
  }
  if (end == std::string_view::npos) refuse("not a zip archive (no end of central directory)");
  uint64_t entries = zip.number(end + 10, 2), directory = zip.number(end + 16, 4);
  if ((entries == 0xffff || directory == kSaturated32) && end >= 20 && zip.number(end - 20, 4) == kZip64Locator) {
    const uint64_t zip64_end = zip.number(end - 20 + 8, 8);
    if (zip.number(zip64_end, 4) != kZip64End) refuse("the zip64 end of central directory is missing");
    entries = zip.number(zip64_end + 32, 8);
    directory = zip.number(zip64_end + 48, 8);
  }
  for (uint64_t i = 0, at = directory; i < entries; ++i) {
    if (zip.number(at, 4) != kDirectoryEntry) refuse("the zip central directory is cut short");
    const uint64_t method = zip.number(at + 10, 2), name_length = zip.number(at + 28, 2),
                   extra_length = zip.number(at + 30, 2), comment_length = zip.number(at + 32, 2);
    uint64_t packed = zip.number(at + 20, 4), size = zip.number(at + 24, 4), offset = zip.number(at + 42, 4);
    readZip64Sizes(zip, at + 46 + name_length, extra_length, {&size, &packed, &offset});
    const std::string name(zip.view(at + 46, name_length));
    if (method != 0 || packed != size) refuse("record " + clipForMessage(name) + " is compressed");
    if (zip.number(offset, 4) != kLocalHeader) refuse("record " + clipForMessage(name) + " has no local header");
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
  if (type != "Dict[str, Tensor]") refuse("data.pkl tags a value as '" + clipForMessage(type) + "'");
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
    refuse(name + " is not a dense CPU tensor");
  }
  at::StorageImpl& storage = *tensor.storage().unsafeGetStorageImpl();
  storage.set_nbytes(records.sizeAt(storage.data()));  // what is there, not what the pickle claims
  if (tensor.storage_offset() < 0) refuse(name + " has a negative storage offset");
  for (int64_t d = 0; d < tensor.dim(); ++d) {
    if (tensor.size(d) < 0 || tensor.stride(d) < 0) refuse(name + " has a negative size or stride");
  }
  if (tensor.numel() == 0) return;
  std::optional<int64_t> last = tensor.storage_offset();
  for (int64_t d = 0; d < tensor.dim() && last; ++d) last = mulAdd(tensor.size(d) - 1, tensor.stride(d), *last);
  const auto bytes = last ? mulAdd(*last + 1, static_cast<int64_t>(tensor.itemsize()), 0) : std::nullopt;
  if (!bytes || static_cast<uint64_t>(*bytes) > storage.nbytes()) {
    refuse(name + " reaches " + (bytes ? std::to_string(*bytes) : std::string("past 2^63")) +
           " bytes into its storage record, which holds " + std::to_string(storage.nbytes()));
  }
}

}  // namespace

void checkCheckpointPickle(std::string_view pickle) { PickleCheck(pickle).run(); }

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
  if (!value.isGenericDict()) refuse("data.pkl holds no dict");
  TensorMap state;
  for (const auto& item : value.toGenericDict()) {
    if (!item.key().isString() || !item.value().isTensor()) refuse("data.pkl's dict is not one of named tensors");
    checkTensor(item.key().toStringRef(), item.value().toTensor(), records);
    state[item.key().toStringRef()] = item.value().toTensor();
  }
  return state;
}

}  // namespace gcrun::experiments
