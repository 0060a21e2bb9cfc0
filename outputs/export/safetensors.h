#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

namespace gcrun::outputs {

// One tensor of a safetensors file: its dtype as the format spells it (F32, F64, I64, ...), its
// shape, and its elements' bytes, little-endian, in row-major order.
struct SafetensorsTensor {
  std::string name;
  std::string dtype;
  std::vector<int64_t> shape;
  std::string_view bytes;
};

// The bytes of one element of `dtype` (a safetensors dtype name), or 0 when the format has no such
// dtype.
size_t safetensorsElementBytes(const std::string& dtype);

// A safetensors file (huggingface/safetensors' format): an 8-byte little-endian header length N,
// N bytes of a JSON object (each tensor's dtype, shape and data_offsets [begin, end) relative to
// the data section, and "__metadata__": `metadata`), padded with spaces to a multiple of 8, then
// the tensors' bytes back to back in the order given. Throws std::invalid_argument for a name
// given twice or "__metadata__", an unknown dtype, a negative dimension, or bytes that are not the
// shape's size.
std::string safetensorsFile(const std::vector<SafetensorsTensor>& tensors,
                            const std::map<std::string, std::string>& metadata);
// The file's beginning up to its data section (the header length and the padded JSON), with the
// same checks: a writer that streams writes it, then each tensor's bytes in the order given.
std::string safetensorsHeader(const std::vector<SafetensorsTensor>& tensors,
                              const std::map<std::string, std::string>& metadata);

}  // namespace gcrun::outputs
