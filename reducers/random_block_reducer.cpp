#include "reducers/builtin_reducers.h"
#include "reducers/random_sparse_reducer.h"

namespace gcrun::reducers {

// The reference's UniformRandomSparseBlockReducer ("Random Block"): k contiguous elements from a
// uniform random start, wrapping around the end of the tensor, so every element is covered with
// probability k / numel and the rescaled variant is unbiased too. Cheaper than random-k: a
// contiguous copy and no permutation. See random_sparse_reducer.h.
ReducerSpec randomBlockSpec() {
  return randomSparseSpec(
      [](int64_t numel, int64_t count, at::Generator& shared) {
        const auto start = at::randint(numel, {1}, shared, at::TensorOptions().dtype(at::kLong));
        return at::arange(count, at::TensorOptions().dtype(at::kLong)).add_(start).remainder_(numel);
      },
      "UniformRandomSparseBlockReducer");
}

}  // namespace gcrun::reducers
