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

using Pair = std::pair<float, int64_t>;  // (magnitude, position), as at::topk's queue

// at::topk's partial_sort, replayed (see the header): the first k pairs and every later pair that
// enters the heap, which is one larger than the k-th largest magnitude before it (a heap of floats
// tracks that bound), then the same std::partial_sort over those alone. False on a NaN, which
// at::topk orders by another rule.
bool replayPartialSort(const float* x, int64_t n, int64_t k, std::vector<Pair>& pairs) {
  pairs.clear();
  std::vector<float> kept;  // the k largest magnitudes so far, least on top
  kept.reserve(static_cast<size_t>(k));
  for (int64_t j = 0; j < k; ++j) {
    const float m = std::fabs(x[j]);
    if (std::isnan(m)) return false;
    pairs.emplace_back(m, j);
    kept.push_back(m);
  }
  std::make_heap(kept.begin(), kept.end(), std::greater<float>());
  float bound = kept.front();
  for (int64_t j = k; j < n; ++j) {
    const float m = std::fabs(x[j]);
    if (m <= bound) continue;
    if (std::isnan(m)) return false;
    pairs.emplace_back(m, j);
    std::pop_heap(kept.begin(), kept.end(), std::greater<float>());
    kept.back() = m;
    std::push_heap(kept.begin(), kept.end(), std::greater<float>());
    bound = kept.front();
  }
  std::partial_sort(pairs.begin(), pairs.begin() + k, pairs.end(),
                    [](const Pair& a, const Pair& b) { return a.first > b.first; });
  return true;
}

// The replay checked once against at::topk on ties of every kind, so that a LibTorch whose top-k
// orders them otherwise falls back to at::topk rather than changing what is sent.
bool replayIsTopk() {
  static const bool same = [] {
    auto generator = at::detail::createCPUGenerator(5);
    std::vector<Pair> pairs;
    for (const auto& flat : {at::randint(-20, 20, {30000}, generator).to(at::kFloat), at::randn({30000}, generator)}) {
      for (int64_t k : {1, 7, 200, 468}) {
        if (!replayPartialSort(flat.data_ptr<float>(), flat.numel(), k, pairs)) return false;
        const auto expected = viaTorch(flat, k);
        const int64_t* e = expected.data_ptr<int64_t>();
        for (int64_t i = 0; i < k; ++i) {
          if (pairs[i].second != e[i]) return false;
        }
      }
    }
    return true;
  }();
  return same;
}

}  // namespace

at::Tensor topMagnitudePositions(const at::Tensor& flat, int64_t k) {
  const int64_t n = flat.numel();
  if (k <= 0 || k * 64 > n || !flat.is_cpu() || flat.scalar_type() != at::kFloat || !flat.is_contiguous() ||
      !replayIsTopk()) {
    return viaTorch(flat, k);
  }
  std::vector<Pair> pairs;
  if (!replayPartialSort(flat.data_ptr<float>(), n, k, pairs)) return viaTorch(flat, k);
  auto positions = at::empty({k}, at::kLong);
  int64_t* out = positions.data_ptr<int64_t>();
  for (int64_t i = 0; i < k; ++i) out[i] = pairs[i].second;
  return positions;
}

}  // namespace gcrun::reducers
