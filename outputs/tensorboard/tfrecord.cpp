#include "outputs/tensorboard/tfrecord.h"

#include <boost/crc.hpp>

namespace gcrun::outputs::tensorboard {
namespace {

void appendLittleEndian(std::string& out, uint64_t value, int bytes) {
  for (int i = 0; i < bytes; ++i) out.push_back(static_cast<char>((value >> (8 * i)) & 0xff));
}

}  // namespace

uint32_t crc32c(std::string_view bytes) {
  boost::crc_optimal<32, 0x1EDC6F41, 0xFFFFFFFF, 0xFFFFFFFF, true, true> crc;
  crc.process_bytes(bytes.data(), bytes.size());
  return crc.checksum();
}

uint32_t maskedCrc32c(std::string_view bytes) {
  const uint32_t crc = crc32c(bytes);
  return ((crc >> 15) | (crc << 17)) + 0xa282ead8u;
}

std::string tfRecord(std::string_view data) {
  std::string record;
  record.reserve(data.size() + 16);
  appendLittleEndian(record, data.size(), 8);
  appendLittleEndian(record, maskedCrc32c(record), 4);
  record.append(data);
  appendLittleEndian(record, maskedCrc32c(data), 4);
  return record;
}

}  // namespace gcrun::outputs::tensorboard
