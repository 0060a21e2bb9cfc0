#include "outputs/tensorboard/protobuf_writer.h"

#include <cstring>

namespace gcrun::outputs::tensorboard {
namespace {

// Fixed-width values are little-endian on the wire, whatever the host's order.
template <typename Bits>
void appendLittleEndian(std::string& out, Bits bits) {
  for (size_t i = 0; i < sizeof(Bits); ++i) out.push_back(static_cast<char>((bits >> (8 * i)) & 0xff));
}

}  // namespace

void ProtoMessage::rawVarint(uint64_t value) {
  while (value >= 0x80) {
    data_.push_back(static_cast<char>((value & 0x7f) | 0x80));
    value >>= 7;
  }
  data_.push_back(static_cast<char>(value));
}

void ProtoMessage::key(int field, int wire_type) {
  rawVarint((static_cast<uint64_t>(field) << 3) | static_cast<uint64_t>(wire_type));
}

ProtoMessage& ProtoMessage::varint(int field, uint64_t value) {
  key(field, 0);
  rawVarint(value);
  return *this;
}

ProtoMessage& ProtoMessage::float64(int field, double value) {
  uint64_t bits = 0;
  std::memcpy(&bits, &value, sizeof(bits));
  key(field, 1);
  appendLittleEndian(data_, bits);
  return *this;
}

ProtoMessage& ProtoMessage::float32(int field, float value) {
  uint32_t bits = 0;
  std::memcpy(&bits, &value, sizeof(bits));
  key(field, 5);
  appendLittleEndian(data_, bits);
  return *this;
}

ProtoMessage& ProtoMessage::bytes(int field, std::string_view value) {
  key(field, 2);
  rawVarint(value.size());
  data_.append(value);
  return *this;
}

}  // namespace gcrun::outputs::tensorboard
