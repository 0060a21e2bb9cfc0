#pragma once

#include <algorithm>
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
      sizes_.push_back(t.numel());
      total += t.numel();
    }
    total_ = total;
    flat_ = like.empty() ? at::empty({0}) : at::empty({total}, like.front().options());
  }

  // A buffer over `tensors` themselves when they lie back to back, in any order, in one storage
  // (the trainer's flat gradient layout): pack() and unpack() into those same tensors then copy
  // nothing. Otherwise the same as TensorBuffer(tensors).
  static TensorBuffer over(const std::vector<at::Tensor>& tensors) {
    TensorBuffer buffer;
    if (!buffer.alias(tensors)) buffer = TensorBuffer(tensors);
    return buffer;
  }

  void pack(const std::vector<at::Tensor>& tensors) {
    if (holds(tensors)) return;
    for (size_t i = 0; i < tensors.size(); ++i) slice(i).view(tensors[i].sizes()).copy_(tensors[i]);
  }
  // Copies the buffer back into `tensors`, each scaled by `scale`.
  void unpack(const std::vector<at::Tensor>& tensors, double scale = 1.0) const {
    if (holds(tensors)) {
      if (scale != 1.0) flat_.mul_(scale);
      return;
    }
    for (size_t i = 0; i < tensors.size(); ++i) {
      const auto source = slice(i).view(tensors[i].sizes());
      at::Tensor target = tensors[i];
      if (scale != 1.0) {
        at::mul_out(target, source, scale);
      } else {
        target.copy_(source);
      }
    }
  }

  at::Tensor& flat() { return flat_; }
  const at::Tensor& flat() const { return flat_; }
  int64_t numel() const { return total_; }
  size_t count() const { return sizes_.size(); }  // the tensors it holds
  at::Tensor slice(size_t i) const { return flat_.narrow(0, offsets_[i], sizes_[i]); }

 private:
  // Becomes a view of `tensors` if they tile one contiguous range of a storage.
  bool alias(const std::vector<at::Tensor>& tensors) {
    if (tensors.empty()) return false;
    const auto& first = tensors.front();
    std::vector<std::pair<int64_t, int64_t>> ranges;  // [storage offset, numel)
    for (const auto& t : tensors) {
      if (t.numel() == 0 || !t.is_contiguous() || t.scalar_type() != first.scalar_type() ||
          !t.storage().is_alias_of(first.storage())) {
        return false;
      }
      ranges.emplace_back(t.storage_offset(), t.numel());
    }
    std::vector<std::pair<int64_t, int64_t>> sorted = ranges;
    std::sort(sorted.begin(), sorted.end());
    for (size_t i = 1; i < sorted.size(); ++i) {
      if (sorted[i - 1].first + sorted[i - 1].second != sorted[i].first) return false;
    }
    const int64_t base = sorted.front().first;
    total_ = sorted.back().first + sorted.back().second - base;
    flat_ = first.as_strided({total_}, {1}, base);
    for (const auto& range : ranges) {
      offsets_.push_back(range.first - base);
      sizes_.push_back(range.second);
    }
    aliased_ = tensors;
    return true;
  }

  // True when `tensors` are the very tensors this buffer is a view of.
  bool holds(const std::vector<at::Tensor>& tensors) const {
    if (aliased_.empty() || tensors.size() != aliased_.size()) return false;
    for (size_t i = 0; i < tensors.size(); ++i) {
      if (tensors[i].data_ptr() != aliased_[i].data_ptr() || tensors[i].numel() != aliased_[i].numel()) return false;
    }
    return true;
  }

  std::vector<int64_t> offsets_, sizes_;  // per tensor (aliased slices need not be in order)
  int64_t total_ = 0;
  at::Tensor flat_;
  std::vector<at::Tensor> aliased_;
};

// tensors[ids[0]], tensors[ids[1]], ...
inline std::vector<at::Tensor> pick(const std::vector<at::Tensor>& tensors, const std::vector<size_t>& ids) {
  std::vector<at::Tensor> picked;
  picked.reserve(ids.size());
  for (size_t i : ids) picked.push_back(tensors[i]);
  return picked;
}

// True when `a` and `b` are the very same tensors, in the same order.
inline bool sameTensors(const std::vector<at::Tensor>& a, const std::vector<at::Tensor>& b) {
  return std::equal(a.begin(), a.end(), b.begin(), b.end(),
                    [](const at::Tensor& x, const at::Tensor& y) { return x.is_same(y); });
}

// Raw float32 access to a tensor on the CPU: the tensor itself when it is one already, else a
// contiguous CPU copy that writeBack() returns to it.
class CpuFloats {
 public:
  explicit CpuFloats(const at::Tensor& t)
      : target_(t),
        data_(t.is_cpu() && t.is_contiguous() && t.scalar_type() == at::kFloat
                  ? t
                  : t.to(at::kCPU, at::kFloat).contiguous()) {}
  float* data() const { return data_.data_ptr<float>(); }
  void writeBack() const {
    if (!data_.is_same(target_)) target_.copy_(data_.view(target_.sizes()));
  }

 private:
  at::Tensor target_, data_;
};

// Calls fn with t as one flat tensor it may write: a view of t when t is contiguous, else a copy
// that is written back afterwards.
template <class Fn>
void withFlat(const at::Tensor& t, Fn&& fn) {
  if (t.is_contiguous()) {
    fn(t.view({-1}));
    return;
  }
  auto flat = t.reshape({-1}).clone();
  fn(flat);
  t.copy_(flat.view(t.sizes()));
}

}  // namespace gcrun::reducers
