#pragma once

#include <cstdint>
#include <vector>

#include <ATen/core/Tensor.h>

#include "hyperparams/config.h"

namespace gcrun::reducers {

// The orthonormal DCT-II matrix of size n: C[k][j] = s_k cos(π (2j + 1) k / 2n), s_0 = sqrt(1/n),
// s_k = sqrt(2/n) for k > 0. It is orthogonal (Cᵀ C = I), so a block X transforms as C X Cᵀ and
// back as Cᵀ Y C. Computed in float64, returned as `dtype`.
at::Tensor dctMatrix(int64_t n, at::ScalarType dtype);

// The largest divisor of `size` (>= 1) that is at most `limit` (>= 1).
int64_t largestDivisorUpTo(int64_t size, int64_t limit);

// DeMo's blocks of a tensor: the tensor seen as a matrix (dim 0 its rows, the other dimensions
// flattened into its columns; a tensor of fewer than 2 dimensions is one row), cut into blocks of
// (r, c) elements, r and c the largest divisors of the rows and columns that are at most `block`.
struct DctGrid {
  int64_t rows = 1, cols = 0, block_rows = 1, block_cols = 1;
  int64_t blocks() const { return (rows / block_rows) * (cols / block_cols); }
  int64_t blockElements() const { return block_rows * block_cols; }
};
DctGrid dctGridOf(at::IntArrayRef shape, int64_t block);

// Each block of a tensor's DctGrid transformed by the 2-D DCT-II C_r X C_cᵀ (for a single row,
// C_r = [1]: along the columns only).
class DctBlocks {
 public:
  DctBlocks(at::IntArrayRef shape, int64_t block, at::ScalarType dtype);

  const DctGrid& grid() const { return grid_; }
  int64_t blocks() const { return grid_.blocks(); }
  int64_t blockElements() const { return grid_.blockElements(); }

  // A tensor of the shape given -> its coefficients (blocks(), blockElements()): the blocks in row-major
  // order over the matrix, each block's coefficients row-major.
  at::Tensor forward(const at::Tensor& tensor) const;
  // Coefficients laid out as forward() returns them -> the tensor of the shape given.
  at::Tensor inverse(const at::Tensor& coefficients) const;

 private:
  std::vector<int64_t> shape_;
  DctGrid grid_;
  at::Tensor row_dct_, col_dct_;  // C_r and C_c
};

// The largest DCT block side the dct-topk reducer accepts (reducer.block): a side of n costs an
// n x n matrix per tensor dimension, computed in float64; DeMo's blocks are 64, and 4096, 64 times
// that, costs 128 MiB per matrix.
constexpr int64_t kMaxDctBlock = 4096;

// The dct-topk reducer's block side as `settings` (the config's reducer.* values) set it, for the
// memory its DCT matrices take (the demo strategy's estimate).
int64_t dctTopKBlock(const SettingValues& settings);

}  // namespace gcrun::reducers
