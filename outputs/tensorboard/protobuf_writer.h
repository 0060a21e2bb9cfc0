#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace gcrun::outputs::tensorboard {

// One protocol-buffer message in the wire format (protobuf.dev, "Encoding"), built field by field:
// enough for the few messages of a TensorBoard event file, without generated code. Fields are
// written in the order they are added; nested messages are added as their serialized bytes.
class ProtoMessage {
 public:
  ProtoMessage& varint(int field, uint64_t value);         // wire type 0: int32, int64, bool, enum
  ProtoMessage& float64(int field, double value);          // wire type 1: double
  ProtoMessage& float32(int field, float value);           // wire type 5: float
  ProtoMessage& bytes(int field, std::string_view value);  // wire type 2: string, bytes, message
  ProtoMessage& message(int field, const ProtoMessage& value) { return bytes(field, value.data()); }

  const std::string& data() const { return data_; }

 private:
  void key(int field, int wire_type);
  void rawVarint(uint64_t value);

  std::string data_;
};

}  // namespace gcrun::outputs::tensorboard
