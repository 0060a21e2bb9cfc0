#include "experiments/training/checkpoint_pickle.h"

#include <algorithm>
#include <memory>
#include <set>
#include <unordered_map>
#include <vector>

#include <torch/csrc/jit/serialization/pickler.h>

#include "experiments/training/checked_bytes.h"
#include "hyperparams/base/text.h"

namespace gcrun::experiments {
namespace {

using Op = torch::jit::PickleOpCode;

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

[[noreturn]] void tooDeep(size_t at) {
  refuseCheckpointBytes("data.pkl nests deeper than " + std::to_string(kMaxPickleNesting) + " levels at byte " +
                        std::to_string(at));
}

// The pickle's stack, marks and memo, as far as nesting goes; `at` is the opcode's byte, for messages.
class PickleStack {
 public:
  bool settled() const { return stack_.size() == 1 && marks_.empty(); }

  void mark(size_t at) {
    if (static_cast<int>(marks_.size()) >= kMaxPickleNesting) tooDeep(at);
    marks_.push_back(stack_.size());
  }
  void push(ValuePtr value) { stack_.push_back(std::move(value)); }
  std::vector<ValuePtr> pop(size_t count, size_t at) {
    const size_t floor = marks_.empty() ? 0 : marks_.back();
    if (stack_.size() < floor + count)
      refuseCheckpointBytes("data.pkl pops past its stack at byte " + std::to_string(at));
    std::vector<ValuePtr> popped(stack_.end() - static_cast<std::ptrdiff_t>(count), stack_.end());
    stack_.resize(stack_.size() - count);
    return popped;
  }
  std::vector<ValuePtr> popToMark(size_t at) {
    if (marks_.empty()) refuseCheckpointBytes("data.pkl closes a MARK it never opened at byte " + std::to_string(at));
    const size_t mark = marks_.back();
    marks_.pop_back();
    std::vector<ValuePtr> popped(stack_.begin() + static_cast<std::ptrdiff_t>(mark), stack_.end());
    stack_.resize(mark);
    return popped;
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
      refuseCheckpointBytes("data.pkl adds to a value that is no open " +
                            std::string(kind == Value::Kind::list ? "list" : "dict") + " at byte " +
                            std::to_string(at));
    }
    if (kind == Value::Kind::dict && parts.size() % 2 != 0) {
      refuseCheckpointBytes("data.pkl sets a key without a value at byte " + std::to_string(at));
    }
    Value& target = *stack_.back();
    for (const auto& part : parts) {
      if (part.get() == &target) {
        refuseCheckpointBytes("data.pkl puts a container inside itself at byte " + std::to_string(at));
      }
      place(*part, target, at);
    }
  }

  void memoize(uint64_t key, size_t at) {
    if (stack_.empty()) refuseCheckpointBytes("data.pkl memoizes from an empty stack at byte " + std::to_string(at));
    memo_[key] = stack_.back();
  }
  ValuePtr memoized(uint64_t key, size_t at) const {
    const auto found = memo_.find(key);
    if (found == memo_.end()) refuseCheckpointBytes("data.pkl gets an unset memo entry at byte " + std::to_string(at));
    return found->second;
  }

 private:
  static void place(Value& part, Value& into, size_t at) {
    part.placed = true;
    into.depth = std::max(into.depth, part.depth + 1);
    if (into.depth > kMaxPickleNesting) tooDeep(at);
  }

  std::vector<ValuePtr> stack_;
  std::vector<size_t> marks_;  // stack sizes at each open MARK
  std::unordered_map<uint64_t, ValuePtr> memo_;
};

// Reads the pickle opcode by opcode: those that build containers (structure) and those that read
// values (value), each checked against the bytes and the stack.
class PickleCheck {
 public:
  explicit PickleCheck(std::string_view pickle) : bytes_(pickle, "data.pkl") {}

  void run() {
    while (!stopped_) {
      const size_t at = pos_;
      if (at >= bytes_.size()) refuseCheckpointBytes("data.pkl ends without STOP");
      const auto op = static_cast<Op>(bytes_.view(pos_++, 1)[0]);
      if (!structure(op, at)) value(op, at);
    }
    if (pos_ != bytes_.size()) {
      refuseCheckpointBytes("data.pkl has bytes after STOP at byte " + std::to_string(pos_ - 1));
    }
    if (!stack_.settled()) refuseCheckpointBytes("data.pkl leaves no single value at STOP");
  }

 private:
  // The opcodes that frame the pickle, build containers or use the memo; false for others.
  bool structure(Op op, size_t at) {
    switch (op) {
      case Op::PROTO:
        if (read(1) != 2) refuseCheckpointBytes("data.pkl is not pickle protocol 2");
        return true;
      case Op::STOP:
        stopped_ = true;
        return true;
      case Op::MARK:
        stack_.mark(at);
        return true;
      case Op::EMPTY_LIST:
      case Op::EMPTY_DICT:
      case Op::EMPTY_TUPLE: {
        const auto kind = op == Op::EMPTY_LIST   ? Value::Kind::list
                          : op == Op::EMPTY_DICT ? Value::Kind::dict
                                                 : Value::Kind::other;
        stack_.push(PickleStack::container(kind));
        return true;
      }
      case Op::TUPLE:
        stack_.push(stack_.holding(stack_.popToMark(at), at));
        return true;
      case Op::TUPLE1:
      case Op::TUPLE2:
      case Op::TUPLE3: {
        const size_t count = static_cast<size_t>(op) - static_cast<size_t>(Op::TUPLE1) + 1;
        stack_.push(stack_.holding(stack_.pop(count, at), at));
        return true;
      }
      case Op::APPEND:
      case Op::SETITEM:
        stack_.addTo(op == Op::APPEND ? Value::Kind::list : Value::Kind::dict, stack_.pop(op == Op::APPEND ? 1 : 2, at),
                     at);
        return true;
      case Op::APPENDS:
      case Op::SETITEMS:
        stack_.addTo(op == Op::APPENDS ? Value::Kind::list : Value::Kind::dict, stack_.popToMark(at), at);
        return true;
      case Op::REDUCE:
      case Op::BINPERSID:
        stack_.push(stack_.holding(stack_.pop(op == Op::REDUCE ? 2 : 1, at), at));
        return true;
      case Op::BINPUT:
      case Op::LONG_BINPUT:
        stack_.memoize(read(op == Op::BINPUT ? 1 : 4), at);
        return true;
      case Op::BINGET:
      case Op::LONG_BINGET:
        stack_.push(stack_.memoized(read(op == Op::BINGET ? 1 : 4), at));
        return true;
      default:
        return false;
    }
  }

  // The opcodes that push a scalar (a string, a number, a constant, an allowed global); any other
  // opcode is refused.
  void value(Op op, size_t at) {
    switch (op) {
      case Op::BINUNICODE: {
        const uint64_t length = read(4);
        pos_ += bytes_.view(pos_, length).size();
        break;
      }
      case Op::BININT1:
      case Op::BININT2:
      case Op::BININT:
      case Op::BINFLOAT:
        read(op == Op::BININT1 ? 1 : op == Op::BININT2 ? 2 : op == Op::BININT ? 4 : 8);
        break;
      case Op::LONG1: {
        const uint64_t width = read(1);
        if (width > 8) {
          refuseCheckpointBytes("data.pkl has an integer of " + std::to_string(width) + " bytes at byte " +
                                std::to_string(at));
        }
        read(width);
        break;
      }
      case Op::NONE:
      case Op::NEWTRUE:
      case Op::NEWFALSE:
        break;
      case Op::GLOBAL:
        global(at);
        break;
      default:
        refuseCheckpointBytes("data.pkl has opcode 0x" + hexByte(op) + " at byte " + std::to_string(at) +
                              ", which no checkpoint holds");
    }
    stack_.push(PickleStack::scalar());
  }

  void global(size_t at) {
    const std::string_view module = line(), name = line();
    if (!allowedGlobal(module, name)) {
      refuseCheckpointBytes("data.pkl names '" + clipForMessage(std::string(module) + "." + std::string(name)) +
                            "', which no checkpoint holds (byte " + std::to_string(at) + ")");
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
      refuseCheckpointBytes("data.pkl has an unterminated name at byte " + std::to_string(pos_));
    }
    pos_ += end + 1;
    return rest.substr(0, end);
  }
  static std::string hexByte(Op op) {
    const char* digits = "0123456789abcdef";
    const auto byte = static_cast<unsigned char>(op);
    return {digits[byte >> 4], digits[byte & 15]};
  }

  CheckedBytes bytes_;
  size_t pos_ = 0;
  bool stopped_ = false;
  PickleStack stack_;
};

}  // namespace

void checkCheckpointPickle(std::string_view pickle) { PickleCheck(pickle).run(); }

}  // namespace gcrun::experiments
