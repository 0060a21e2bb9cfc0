#include "reducers/powersgd_ddp_parts.h"

#include <sstream>
#include <stdexcept>
#include <string>

#include <ATen/ATen.h>

namespace gcrun::reducers {

uint64_t NumpyLegacyRandint::next() {
  uint32_t value = 0;
  do {
    value = static_cast<uint32_t>(engine_()) & kMask;
  } while (value > kLargest);
  return value;
}

std::vector<int64_t> NumpyLegacyRandint::state() const {
  std::stringstream text;
  text << engine_;
  std::vector<int64_t> words;
  for (int64_t word = 0; text >> word;) words.push_back(word);
  return words;
}

void NumpyLegacyRandint::setState(const std::vector<int64_t>& words) {
  if (static_cast<int64_t>(words.size()) != kStateSize) {
    throw std::invalid_argument("holds " + std::to_string(words.size()) + " values, not " + std::to_string(kStateSize));
  }
  std::stringstream text;
  for (size_t k = 0; k < words.size(); ++k) {
    const int64_t most = k + 1 < words.size() ? int64_t{0xFFFFFFFF} : int64_t{std::mt19937::state_size};
    if (words[k] < 0 || words[k] > most) {
      throw std::invalid_argument("value " + std::to_string(k) + " is " + std::to_string(words[k]) + ", outside 0 to " +
                                  std::to_string(most));
    }
    text << words[k] << ' ';
  }
  text >> engine_;
}

void orthogonalizeAsTheHook(at::Tensor matrices, double epsilon) {
  const int64_t columns = matrices.size(2);
  const auto dtype = matrices.scalar_type();
  if (columns > 2 && dtype != at::kHalf && dtype != at::kBFloat16) {
    auto r = at::empty({matrices.size(0), columns, columns}, matrices.options());
    at::linalg_qr_out(matrices, r, matrices, "reduced");
    return;
  }
  for (int64_t i = 0; i < columns; ++i) {
    auto col = matrices.slice(2, i, i + 1);
    // torch.norm(col, dim=1, keepdim=True) is frobenius_norm in torch 1.13's functional.py.
    if (epsilon == 0) {
      col.div_(at::frobenius_norm(col, {1}, /*keepdim=*/true));
    } else {
      col.div_(at::frobenius_norm(col, {1}, /*keepdim=*/true) + epsilon);
    }
    if (i + 1 < columns) {
      auto rest = matrices.slice(2, i + 1);
      rest.sub_(at::sum(col * rest, {1}, /*keepdim=*/true) * col);
    }
  }
}

std::vector<size_t> savedBucketOrder(const at::Tensor& saved, bool rebuilt, size_t tensors) {
  const auto refuse = [](const std::string& why) {
    throw std::invalid_argument("powersgd-ddp state: 'bucket_order' " + why);
  };
  if (saved.dim() != 1 || saved.scalar_type() != at::kLong) refuse("is not a list of 64-bit integers");
  const int64_t count = saved.numel();
  if (!rebuilt && count != 0) refuse("is set before DDP's rebuild (iter below 2)");
  if (rebuilt && count != static_cast<int64_t>(tensors) && tensors != 0) {
    refuse("has " + std::to_string(count) + " tensors, this model " + std::to_string(tensors));
  }
  std::vector<size_t> order;
  std::vector<bool> seen(static_cast<size_t>(count), false);
  const auto values = saved.contiguous();
  for (int64_t k = 0; k < count; ++k) {
    const int64_t index = values.data_ptr<int64_t>()[k];
    if (index < 0 || index >= count || seen[static_cast<size_t>(index)]) {
      refuse("is no permutation of 0 to " + std::to_string(count - 1) + " (" + std::to_string(index) + " at " +
             std::to_string(k) + ")");
    }
    seen[static_cast<size_t>(index)] = true;
    order.push_back(static_cast<size_t>(index));
  }
  return order;
}

}  // namespace gcrun::reducers
