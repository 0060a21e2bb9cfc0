#include <algorithm>
#include <limits>
#include <mutex>
#include <unordered_map>

#include <ATen/CPUGeneratorImpl.h>

#include "reducers/builtin_reducers.h"
#include "reducers/random_sparse_reducer.h"

namespace gcrun::reducers {
namespace {

// LibTorch's CPU randperm is a Fisher-Yates shuffle of 0..n-1: for i < n - 1, z = random() % (n - i)
// and r[i] swaps with r[i + z]. Its first `count` entries are settled by the first `count` swaps,
// which need only the positions they touch, kept in a map instead of an n-element array; the
// remaining draws are made and dropped, so the generator ends where randperm leaves it. For 1% of
// ResNet-18 that is 112K swaps and 11M bare draws instead of a shuffle of 11M indices.
at::Tensor partialShuffle(int64_t n, int64_t count, at::Generator& shared) {
  auto* generator = at::check_generator<at::CPUGeneratorImpl>(shared);
  std::lock_guard<std::mutex> lock(generator->mutex_);
  auto result = at::empty({count}, at::TensorOptions().dtype(at::kLong));
  int64_t* first = result.data_ptr<int64_t>();
  std::unordered_map<int64_t, int64_t> moved;  // position -> its value, where that is not the position
  moved.reserve(static_cast<size_t>(2 * count));
  const auto valueAt = [&](int64_t position) {
    const auto found = moved.find(position);
    return found == moved.end() ? position : found->second;
  };
  const int64_t swaps = std::min(count, n - 1);
  for (int64_t i = 0; i < swaps; ++i) {
    const int64_t z = generator->random() % (n - i);
    const int64_t chosen = valueAt(i + z);
    moved[i + z] = valueAt(i);  // position i is never read again
    first[i] = chosen;
  }
  if (count == n) first[n - 1] = valueAt(n - 1);
  for (int64_t i = swaps; i < n - 1; ++i) generator->random();
  return result;
}

// The shuffle above, checked once against at::randperm itself (indices and the generator's next
// draw), so that a LibTorch that shuffles differently falls back to randperm rather than changing
// which indices are sent. Past 2^32 / 20 elements newer LibTorch draws 64-bit numbers: randperm too.
bool partialShuffleIsRandperm() {
  static const bool same = [] {
    for (auto [n, count] : {std::pair<int64_t, int64_t>{1000, 10}, {1, 1}, {9, 9}, {50, 49}}) {
      auto mine = at::detail::createCPUGenerator(n + count);
      auto theirs = at::detail::createCPUGenerator(n + count);
      const auto expected = at::randperm(n, theirs, at::TensorOptions().dtype(at::kLong)).narrow(0, 0, count);
      if (!at::equal(partialShuffle(n, count, mine), expected)) return false;
      if (at::check_generator<at::CPUGeneratorImpl>(mine)->random() !=
          at::check_generator<at::CPUGeneratorImpl>(theirs)->random()) {
        return false;
      }
    }
    return true;
  }();
  return same;
}

}  // namespace

at::Tensor firstOfRandomPermutation(int64_t numel, int64_t count, at::Generator& shared) {
  if (numel < std::numeric_limits<uint32_t>::max() / 20 && partialShuffleIsRandperm()) {
    return partialShuffle(numel, count, shared);
  }
  return at::randperm(numel, shared, at::TensorOptions().dtype(at::kLong)).narrow(0, 0, count);
}

// The reference's UniformRandomSparseReducer ("Random K"): k indices drawn uniformly without
// replacement (the first k of a shared random permutation; the reference draws them with numpy,
// so the indices differ from its runs, not their distribution). See random_sparse_reducer.h.
ReducerSpec randomKSpec() { return randomSparseSpec(firstOfRandomPermutation, "UniformRandomSparseReducer"); }

}  // namespace gcrun::reducers
