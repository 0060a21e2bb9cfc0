#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace gcrun::outputs::tensorboard {

// TFRecord framing, the container of TensorBoard event files (tensorflow/core/lib/io/record_writer):
// per record, uint64 length (little-endian), masked CRC-32C of those 8 bytes, the data, masked
// CRC-32C of the data.

// CRC-32C (Castagnoli, reflected polynomial 0x82F63B78), computed by Boost.CRC.
uint32_t crc32c(std::string_view bytes);
// TFRecord's mask: ((crc >> 15) | (crc << 17)) + 0xa282ead8, mod 2^32.
uint32_t maskedCrc32c(std::string_view bytes);
// `data` framed as one record.
std::string tfRecord(std::string_view data);

}  // namespace gcrun::outputs::tensorboard
