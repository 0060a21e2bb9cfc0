#include "reducers/top_magnitudes.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <tuple>
#include <utility>
#include <vector>

#include <ATen/ATen.h>

namespace gcrun::reducers {
namespace {

at::Tensor viaTorch(const at::Tensor& flat, int64_t k) {
  return std::get<1>(at::topk(flat.abs(), k, /*dim=*/0, /*largest=*/true, /*sorted=*/false));
}

}  // namespace

at::Tensor topMagnitudePositions(const at::Tensor& flat, int64_t k) {
  const int64_t n = flat.numel();
  const bool partial_sort_regime = k * 64 <= n || k == 1;
  if (k <= 0 || !partial_sort_regime || !flat.is_cpu() || flat.scalar_type() != at::kFloat || !flat.is_contiguous()) {
    return viaTorch(flat, k);
  }
  const float* x = flat.data_ptr<float>();
  std::vector<float> magnitudes(static_cast<size_t>(n));
  for (int64_t j = 0; j < n; ++j) {
    magnitudes[j] = std::fabs(x[j]);
    if (std::isnan(magnitudes[j])) return viaTorch(flat, k);
  }
  std::nth_element(magnitudes.begin(), magnitudes.begin() + (k - 1), magnitudes.end(), std::greater<float>());
  const float threshold = magnitudes[k - 1];

  std::vector<std::pair<float, int64_t>> top;
  top.reserve(static_cast<size_t>(k));
  for (int64_t j = 0; j < n; ++j) {
    const float m = std::fabs(x[j]);
    if (m < threshold) continue;
    if (static_cast<int64_t>(top.size()) == k) return viaTorch(flat, k);  // a tie at the threshold
    top.emplace_back(m, j);
  }
  std::sort(top.begin(), top.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
  auto positions = at::empty({k}, at::kLong);
  int64_t* out = positions.data_ptr<int64_t>();
  for (int64_t i = 0; i < k; ++i) {
    if (i > 0 && top[i].first == top[i - 1].first) return viaTorch(flat, k);  // a tie inside: order unspecified
    out[i] = top[i].second;
  }
  return positions;
}

}  // namespace gcrun::reducers
