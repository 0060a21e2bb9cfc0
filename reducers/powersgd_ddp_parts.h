#pragma once

#include <cstddef>
#include <cstdint>
#include <random>
#include <vector>

#include <ATen/core/Tensor.h>

// The parts of powersgd-ddp (powersgd_ddp_reducer.cpp) that do not depend on its bucket: the
// hook's seed generator, its orthogonalisation, and the check of a saved bucket order.

namespace gcrun::reducers {

// numpy's np.random.RandomState(seed).randint(1_000_000_000), call after call: the legacy seeding is
// MT19937's init_genrand, and the legacy bounded draw takes 32-bit outputs masked to 30 bits
// (numpy's gen_mask of the range), rejecting those above 999,999,999. Its first draws for seeds 0,
// 42 and 2^32 - 1 were compared with numpy 1.24's; the conformance test's queries depend on it.
// A checkpoint keeps the engine's state (its 624 words and position), so that a restore replays
// nothing.
class NumpyLegacyRandint {
 public:
  static constexpr int64_t kStateSize = std::mt19937::state_size + 1;

  explicit NumpyLegacyRandint(uint32_t seed) : engine_(seed) {}
  uint64_t next();

  std::vector<int64_t> state() const;
  // `words` as state() gave them; std::invalid_argument when they are no MT19937 state.
  void setState(const std::vector<int64_t>& words);

 private:
  static constexpr uint32_t kLargest = 999'999'999, kMask = (1u << 30) - 1;
  std::mt19937 engine_;
};

// _orthogonalize of powerSGD_hook.py, op for op on a batch [b, n, r] of matrices in place: Gram-Schmidt
// for rank <= 2 (and half types), else torch.linalg.qr into the matrices themselves. Unlike gcrun's
// powersgd, epsilon 0 adds nothing: an all-zero column becomes nan, as in the hook.
void orthogonalizeAsTheHook(at::Tensor matrices, double epsilon);

// A checkpoint's 'bucket_order' of a model of `tensors` parameters (0: not known), checked against
// what a run could have saved: empty before DDP's rebuild (not `rebuilt`), a permutation of the
// tensors from it on. Throws std::invalid_argument saying what is wrong.
std::vector<size_t> savedBucketOrder(const at::Tensor& saved, bool rebuilt, size_t tensors);

}  // namespace gcrun::reducers
