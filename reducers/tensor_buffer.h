#pragma once

#include <cstdint>
#include <vector>

#include <ATen/ATen.h>

namespace gcrun::reducers {

// One flat tensor holding several tensors back to back (the reference's TensorBuffer), so that a
// whole list travels in one collective. Allocated once; pack/unpack copy without allocating.
class TensorBuffer {
 public:
  TensorBuffer() = default;
  // Sized and typed for `like`; the contents are uninitialised until pack().
  explicit TensorBuffer(const std::vector<at::Tensor>& like) {
    int64_t total = 0;
    for (const auto& t : like) {
      offsets_.push_back(total);
      total += t.numel();
    }
    offsets_.push_back(total);
    flat_ = like.empty() ? at::empty({0}) : at::empty({total}, like.front().options());
  }

  void pack(const std::vector<at::Tensor>& tensors) {
    for (size_t i = 0; i < tensors.size(); ++i) slice(i).copy_(tensors[i].reshape({-1}));
  }
  // Copies the buffer back into `tensors`, each scaled by `scale`.
  void unpack(const std::vector<at::Tensor>& tensors, double scale = 1.0) const {
    for (size_t i = 0; i < tensors.size(); ++i) {
      tensors[i].copy_(slice(i).view(tensors[i].sizes()));
      if (scale != 1.0) tensors[i].mul_(scale);
    }
  }

  at::Tensor& flat() { return flat_; }
  int64_t numel() const { return flat_.numel(); }
  at::Tensor slice(size_t i) const { return flat_.slice(0, offsets_[i], offsets_[i + 1]); }

 private:
  std::vector<int64_t> offsets_;
  at::Tensor flat_;
};

}  // namespace gcrun::reducers
