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
  // A cut below the k-th largest magnitude, estimated from an evenly strided sample: at the
  // sample's rank for about 2k + 8 n / m elements. Everything not below it is a candidate; if
  // fewer than k are, the cut was too high and every element is one.
  constexpr int64_t kSample = 16384;
  float cut = 0;
  if (n > kSample) {
    std::vector<float> sample(kSample);
    for (int64_t s = 0; s < kSample; ++s) sample[s] = std::fabs(x[s * (n / kSample)]);
    const int64_t rank = std::min(kSample - 1, 2 * k * kSample / n + 8);
    std::nth_element(sample.begin(), sample.begin() + rank, sample.end(), std::greater<float>());
    cut = sample[rank];
  }
  std::vector<std::pair<float, int64_t>> candidates;
  const auto collect = [&](float below) {
    candidates.clear();
    for (int64_t j = 0; j < n; ++j) {
      const float m = std::fabs(x[j]);
      if (!(m < below)) candidates.emplace_back(m, j);  // NaN included, to be refused below
    }
  };
  collect(cut);
  if (static_cast<int64_t>(candidates.size()) < k) collect(0);
  for (const auto& c : candidates) {
    if (std::isnan(c.first)) return viaTorch(flat, k);
  }
  const auto larger = [](const auto& a, const auto& b) { return a.first > b.first; };
  std::nth_element(candidates.begin(), candidates.begin() + (k - 1), candidates.end(), larger);
  const float threshold = candidates[k - 1].first;
  // The k winners are the candidates not below the threshold, unless one more ties with it.
  const auto end = std::partition(candidates.begin(), candidates.end(),
                                  [threshold](const auto& c) { return c.first >= threshold; });
  if (end - candidates.begin() != k) return viaTorch(flat, k);
  std::sort(candidates.begin(), end, larger);
  auto positions = at::empty({k}, at::kLong);
  int64_t* out = positions.data_ptr<int64_t>();
  for (int64_t i = 0; i < k; ++i) {
    if (i > 0 && candidates[i].first == candidates[i - 1].first) return viaTorch(flat, k);  // order unspecified
    out[i] = candidates[i].second;
  }
  return positions;
}

}  // namespace gcrun::reducers
