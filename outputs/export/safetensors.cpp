#include "outputs/export/safetensors.h"

#include <set>
#include <stdexcept>

#include "outputs/json_document.h"

namespace gcrun::outputs {
namespace {

constexpr char kMetadataKey[] = "__metadata__";

// The format stores every number little-endian and the tensors' bytes are copied as they are in
// memory: on a big-endian host they would have to be swapped.
bool hostIsLittleEndian() {
  const uint16_t one = 1;
  return *reinterpret_cast<const unsigned char*>(&one) == 1;
}

uint64_t elementsOf(const SafetensorsTensor& tensor) {
  uint64_t elements = 1;
  for (int64_t side : tensor.shape) {
    if (side < 0) throw std::invalid_argument("tensor '" + tensor.name + "' has a negative dimension");
    elements *= static_cast<uint64_t>(side);
  }
  return elements;
}

void checkTensor(const SafetensorsTensor& tensor, std::set<std::string>& names) {
  if (tensor.name == kMetadataKey || !names.insert(tensor.name).second) {
    throw std::invalid_argument("tensor name '" + tensor.name + "' is reserved or given twice");
  }
  const size_t element = safetensorsElementBytes(tensor.dtype);
  if (element == 0) throw std::invalid_argument("tensor '" + tensor.name + "': no safetensors dtype " + tensor.dtype);
  if (elementsOf(tensor) * element != tensor.bytes.size()) {
    throw std::invalid_argument("tensor '" + tensor.name + "': " + std::to_string(tensor.bytes.size()) +
                                " bytes do not fill its shape");
  }
}

std::string littleEndian64(uint64_t value) {
  std::string bytes(8, '\0');
  for (size_t i = 0; i < 8; ++i) bytes[i] = static_cast<char>((value >> (8 * i)) & 0xff);
  return bytes;
}

}  // namespace

size_t safetensorsElementBytes(const std::string& dtype) {
  static const std::map<std::string, size_t> sizes = {{"BOOL", 1}, {"U8", 1},   {"I8", 1},  {"I16", 2}, {"U16", 2},
                                                      {"F16", 2},  {"BF16", 2}, {"I32", 4}, {"U32", 4}, {"F32", 4},
                                                      {"I64", 8},  {"U64", 8},  {"F64", 8}};
  const auto found = sizes.find(dtype);
  return found == sizes.end() ? 0 : found->second;
}

std::string safetensorsHeader(const std::vector<SafetensorsTensor>& tensors,
                              const std::map<std::string, std::string>& metadata) {
  if (!hostIsLittleEndian()) throw std::invalid_argument("safetensors is written on little-endian hosts only");
  Json header = Json::object();
  std::set<std::string> names;
  uint64_t offset = 0;
  for (const auto& tensor : tensors) {
    checkTensor(tensor, names);
    header[tensor.name] = {
        {"dtype", tensor.dtype}, {"shape", tensor.shape}, {"data_offsets", {offset, offset + tensor.bytes.size()}}};
    offset += tensor.bytes.size();
  }
  header[kMetadataKey] = metadata;
  // Metadata comes from files (config.yaml): bytes that are not UTF-8 are replaced, not refused.
  std::string text = header.dump(-1, ' ', false, Json::error_handler_t::replace);
  // The data section starts 8-aligned, so that a reader may map its tensors in place.
  text.append((8 - text.size() % 8) % 8, ' ');
  return littleEndian64(text.size()) + text;
}

std::string safetensorsFile(const std::vector<SafetensorsTensor>& tensors,
                            const std::map<std::string, std::string>& metadata) {
  std::string file = safetensorsHeader(tensors, metadata);
  for (const auto& tensor : tensors) file.append(tensor.bytes);
  return file;
}

}  // namespace gcrun::outputs
