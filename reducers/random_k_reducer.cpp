#include "reducers/builtin_reducers.h"
#include "reducers/random_sparse_reducer.h"

namespace gcrun::reducers {

// The reference's UniformRandomSparseReducer ("Random K"): k indices drawn uniformly without
// replacement (the first k of a shared random permutation; the reference draws them with numpy,
// so the indices differ from its runs, not their distribution). See random_sparse_reducer.h.
ReducerSpec randomKSpec() {
  return randomSparseSpec(
      [](int64_t numel, int64_t count, at::Generator& shared) {
        return at::randperm(numel, shared, at::TensorOptions().dtype(at::kLong)).narrow(0, 0, count);
      },
      "UniformRandomSparseReducer");
}

}  // namespace gcrun::reducers
