#pragma once

#include <cstdint>
#include <string>

#include <ATen/core/Tensor.h>

namespace gcrun::tasks {

// Readers for the IDX format of (Fashion-)MNIST: a big-endian header (magic, then one uint32 per
// dimension) followed by the raw uint8 data. Files may be gzipped or plain (zlib reads both).
// The data must fill the file exactly: a short file is reported as truncated and bytes after the
// declared data are rejected too, since either means the header does not describe the file.
// Every problem is a UserError whose message starts with the path.

// Magic 0x00000803: uint8 images, returned as a uint8 tensor [N, rows, cols].
at::Tensor readIdxImages(const std::string& path);

// Magic 0x00000801: uint8 labels, returned as a uint8 tensor [N]; every label in [0, num_classes).
at::Tensor readIdxLabels(const std::string& path, int64_t num_classes);

struct IdxDataset {
  at::Tensor images;  // uint8 [N, rows, cols]
  at::Tensor labels;  // uint8 [N]
};

// Both files of one split, checked to hold the same number of samples.
IdxDataset readIdxDataset(const std::string& images_path, const std::string& labels_path, int64_t num_classes);

}  // namespace gcrun::tasks
