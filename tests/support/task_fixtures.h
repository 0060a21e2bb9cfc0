#pragma once

// What the task tests share: IDX files written by hand (gzipped), and comparing model weights.

#include <cstdint>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <torch/torch.h>
#include <zlib.h>

namespace gcrun::tasks {

using Bytes = std::vector<uint8_t>;

inline Bytes idxFile(uint32_t magic, const std::vector<uint32_t>& dims, const Bytes& data) {
  std::vector<uint32_t> header = {magic};
  header.insert(header.end(), dims.begin(), dims.end());
  Bytes out;
  for (uint32_t word : header) {
    for (int shift = 24; shift >= 0; shift -= 8) out.push_back(static_cast<uint8_t>(word >> shift));
  }
  out.insert(out.end(), data.begin(), data.end());
  return out;
}

inline void writeGz(const std::string& path, const Bytes& bytes) {
  gzFile file = gzopen(path.c_str(), "wb");
  ASSERT_NE(file, nullptr);
  ASSERT_EQ(gzwrite(file, bytes.data(), static_cast<unsigned>(bytes.size())), static_cast<int>(bytes.size()));
  ASSERT_EQ(gzclose(file), Z_OK);
}

inline bool sameParameters(torch::nn::Module& a, torch::nn::Module& b) {
  auto pa = a.parameters();
  auto pb = b.parameters();
  if (pa.size() != pb.size()) return false;
  for (size_t i = 0; i < pa.size(); ++i) {
    if (!torch::equal(pa[i], pb[i])) return false;
  }
  return true;
}

}  // namespace gcrun::tasks
