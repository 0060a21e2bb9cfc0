#include "tasks/token_sources/meta_pickle.h"

#include <map>
#include <memory>
#include <unordered_map>
#include <vector>

#include "hyperparams/base/errors.h"
#include "outputs/files/safe_files.h"

namespace gcrun::tasks {
namespace {

// A pickled value as far as a vocabulary needs it: dicts keep their string -> integer items only.
struct Value {
  enum Kind { kInteger, kText, kDict, kOther, kMark } kind = kOther;
  int64_t integer = 0;
  // Shared, as the memo's copies are: MEMOIZE and GET copy values for one byte each.
  std::shared_ptr<const std::string> text;
  std::shared_ptr<std::map<std::string, int64_t>> items;
};

class MetaReader {
 public:
  MetaReader(std::string_view bytes, const std::string& source) : bytes_(bytes), source_(source) {}
  Value read();

 private:
  [[noreturn]] void fail(const std::string& what) const {
    throw UserError(source_ + ": " + what + " at byte " + std::to_string(at_) +
                    "; gcrun reads a pickled dict of strings and integers (nanoGPT's meta.pkl)");
  }
  std::string_view take(uint64_t count) {
    if (count > bytes_.size() - at_) fail("a value runs past the end");
    const std::string_view out = bytes_.substr(at_, count);
    at_ += count;
    return out;
  }
  // Little-endian, `count` bytes (at most 8), sign-extended when `is_signed`.
  int64_t number(size_t count, bool is_signed) {
    const std::string_view raw = take(count);
    uint64_t value = 0;
    for (size_t i = count; i-- > 0;) value = (value << 8) | static_cast<unsigned char>(raw[i]);
    if (is_signed && count < 8 && (value >> (8 * count - 1)) != 0) value |= ~uint64_t{0} << (8 * count);
    return static_cast<int64_t>(value);
  }
  Value pop() {
    if (stack_.empty() || stack_.back().kind == Value::kMark) fail("an opcode finds no value");
    Value out = std::move(stack_.back());
    stack_.pop_back();
    return out;
  }
  std::vector<Value> popToMark() {
    std::vector<Value> out;
    while (!stack_.empty() && stack_.back().kind != Value::kMark) out.push_back(pop());
    if (stack_.empty()) fail("no MARK before a collection's items");
    stack_.pop_back();
    return {out.rbegin(), out.rend()};
  }
  void setItem(const Value& key, const Value& value) {
    if (stack_.empty() || stack_.back().kind != Value::kDict) fail("items set on something not a dict");
    if (key.kind == Value::kText && value.kind == Value::kInteger) (*stack_.back().items)[*key.text] = value.integer;
  }
  void text(uint64_t length) {
    stack_.push_back({Value::kText, 0, std::make_shared<const std::string>(take(length)), nullptr});
  }
  void integer(int64_t value) { stack_.push_back({Value::kInteger, value, {}, {}}); }
  bool scalar(unsigned char opcode);
  bool memo(unsigned char opcode);
  bool step(unsigned char opcode);

  std::string_view bytes_;
  const std::string& source_;
  size_t at_ = 0;
  std::vector<Value> stack_;
  std::unordered_map<int64_t, Value> memo_;
};

// Opcodes that push a scalar: strings, bytes, integers, floats, None, booleans. False: not one.
bool MetaReader::scalar(unsigned char opcode) {
  switch (opcode) {
    case 0x8c:
      text(number(1, false));
      return true;  // SHORT_BINUNICODE
    case 'X':
      text(number(4, false));
      return true;  // BINUNICODE
    case 0x8d:
      text(number(8, false));
      return true;  // BINUNICODE8
    case 'C':
      take(number(1, false));
      break;  // SHORT_BINBYTES
    case 'B':
      take(number(4, false));
      break;  // BINBYTES
    case 'G':
      take(8);
      break;  // BINFLOAT
    case 'N':
    case 0x88:
    case 0x89:
      break;  // NONE, NEWTRUE, NEWFALSE
    case 'K':
      integer(number(1, false));
      return true;
    case 'M':
      integer(number(2, false));
      return true;
    case 'J':
      integer(number(4, true));
      return true;
    case 0x8a: {  // LONG1: a length, then that many little-endian two's-complement bytes
      const auto length = static_cast<size_t>(number(1, false));
      if (length > 8) {  // beyond int64: not a vocabulary size
        take(length);
        break;
      }
      integer(length == 0 ? 0 : number(length, true));
      return true;
    }
    default:
      return false;
  }
  stack_.push_back(Value{});
  return true;
}

// The memo's opcodes. False: not one.
bool MetaReader::memo(unsigned char opcode) {
  if (opcode == 0x94 || opcode == 'q' || opcode == 'r') {  // MEMOIZE, BINPUT, LONG_BINPUT
    const auto index = opcode == 0x94 ? static_cast<int64_t>(memo_.size()) : number(opcode == 'q' ? 1 : 4, false);
    if (stack_.empty()) fail("a memo PUT of nothing");
    memo_[index] = stack_.back();
    return true;
  }
  if (opcode == 'h' || opcode == 'j') {  // BINGET, LONG_BINGET
    const auto found = memo_.find(number(opcode == 'h' ? 1 : 4, false));
    if (found == memo_.end()) fail("a memo GET of an entry never PUT");
    stack_.push_back(found->second);
    return true;
  }
  return false;
}

// Containers and the framing opcodes; false at STOP.
bool MetaReader::step(unsigned char opcode) {
  if (scalar(opcode) || memo(opcode)) return true;
  switch (opcode) {
    case 0x80:
      take(1);
      return true;  // PROTO
    case 0x95:
      take(8);
      return true;  // FRAME
    case '(':
      stack_.push_back({Value::kMark, 0, {}, {}});
      return true;
    case '}':
      stack_.push_back({Value::kDict, 0, {}, std::make_shared<std::map<std::string, int64_t>>()});
      return true;
    case ']':
    case ')':
      stack_.push_back(Value{});
      return true;  // EMPTY_LIST, EMPTY_TUPLE
    case 's': {     // SETITEM
      const Value value = pop(), key = pop();
      setItem(key, value);
      return true;
    }
    case 'u': {  // SETITEMS
      const std::vector<Value> items = popToMark();
      if (items.size() % 2 != 0) fail("SETITEMS of an odd number of values");
      for (size_t i = 0; i < items.size(); i += 2) setItem(items[i], items[i + 1]);
      return true;
    }
    case 'a':
    case 'e':  // APPEND, APPENDS: a list's items are not needed
      if (opcode == 'a')
        pop();
      else
        popToMark();
      if (stack_.empty()) fail("items appended to nothing");
      return true;
    case 't':
      popToMark();
      stack_.push_back(Value{});
      return true;  // TUPLE
    case 0x85:
    case 0x86:
    case 0x87:  // TUPLE1, TUPLE2, TUPLE3
      for (int i = 0; i <= opcode - 0x85; ++i) pop();
      stack_.push_back(Value{});
      return true;
    case '.':
      return false;  // STOP
    default:
      fail("opcode " + std::to_string(opcode) + ", which a dict of strings and integers does not use");
  }
}

Value MetaReader::read() {
  while (step(static_cast<unsigned char>(take(1)[0]))) {
  }
  if (stack_.size() != 1) fail("STOP with " + std::to_string(stack_.size()) + " values on the stack");
  return stack_.back();
}

}  // namespace

std::optional<int64_t> pickledVocabularySize(std::string_view pickle, const std::string& source) {
  const Value top = MetaReader(pickle, source).read();
  if (top.kind != Value::kDict) {
    throw UserError(source + ": not a pickled dict; gcrun reads nanoGPT's meta.pkl, a dict with vocab_size");
  }
  const auto found = top.items->find("vocab_size");
  if (found == top.items->end()) return std::nullopt;
  return found->second;
}

std::optional<int64_t> metaPickleVocabularySize(const std::string& path) {
  if (files::notRegularFileReason(path) == "no such file") return std::nullopt;
  return pickledVocabularySize(files::readBoundedFile(path, kMaxMetaPickleBytes), path);
}

}  // namespace gcrun::tasks
