#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>
#include <string_view>

namespace gcrun::experiments {

// A checkpoint file's bytes that are not what they must be: std::invalid_argument saying why.
[[noreturn]] inline void refuseCheckpointBytes(const std::string& what) { throw std::invalid_argument(what); }

// Little-endian fields of a byte string, each read checked against its end.
class CheckedBytes {
 public:
  CheckedBytes(std::string_view bytes, std::string what) : bytes_(bytes), what_(std::move(what)) {}

  size_t size() const { return bytes_.size(); }
  uint64_t number(size_t at, size_t width) const {
    uint64_t value = 0;
    for (size_t i = view(at, width).size(); i-- > 0;) value = value << 8 | static_cast<unsigned char>(bytes_[at + i]);
    return value;
  }
  std::string_view view(size_t at, size_t length) const {
    if (at > bytes_.size() || length > bytes_.size() - at) {
      refuseCheckpointBytes(what_ + " ends inside a field at byte " + std::to_string(at));
    }
    return bytes_.substr(at, length);
  }

 private:
  std::string_view bytes_;
  std::string what_;
};

}  // namespace gcrun::experiments
