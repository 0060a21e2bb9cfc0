#include "reducers/dct_blocks.h"

#include <cmath>

#include <ATen/ATen.h>

namespace gcrun::reducers {

at::Tensor dctMatrix(int64_t n, at::ScalarType dtype) {
  const auto k = at::arange(n, at::kDouble).unsqueeze(1);
  const auto j = at::arange(n, at::kDouble).unsqueeze(0);
  auto matrix = at::cos(M_PI * (2 * j + 1) * k / (2.0 * static_cast<double>(n))).mul(std::sqrt(2.0 / n));
  matrix[0].fill_(std::sqrt(1.0 / n));
  return matrix.to(dtype);
}

int64_t largestDivisorUpTo(int64_t size, int64_t limit) {
  for (int64_t d = std::min(size, limit); d > 1; --d) {
    if (size % d == 0) return d;
  }
  return 1;
}

DctGrid dctGridOf(at::IntArrayRef shape, int64_t block) {
  DctGrid grid;
  grid.rows = shape.size() >= 2 ? shape[0] : 1;
  grid.cols = grid.rows > 0 ? c10::multiply_integers(shape) / grid.rows : 0;
  grid.block_rows = largestDivisorUpTo(grid.rows, block);
  grid.block_cols = largestDivisorUpTo(grid.cols, block);
  return grid;
}

DctBlocks::DctBlocks(at::IntArrayRef shape, int64_t block, at::ScalarType dtype)
    : shape_(shape.vec()),
      grid_(dctGridOf(shape, block)),
      row_dct_(dctMatrix(grid_.block_rows, dtype)),
      col_dct_(dctMatrix(grid_.block_cols, dtype)) {}

at::Tensor DctBlocks::forward(const at::Tensor& tensor) const {
  const auto blocks_of =
      tensor.reshape({grid_.rows / grid_.block_rows, grid_.block_rows, grid_.cols / grid_.block_cols, grid_.block_cols})
          .permute({0, 2, 1, 3})
          .reshape({blocks(), grid_.block_rows, grid_.block_cols});
  return at::matmul(at::matmul(row_dct_, blocks_of), col_dct_.t()).reshape({blocks(), blockElements()});
}

at::Tensor DctBlocks::inverse(const at::Tensor& coefficients) const {
  const auto blocks_of = at::matmul(
      at::matmul(row_dct_.t(), coefficients.reshape({blocks(), grid_.block_rows, grid_.block_cols})), col_dct_);
  return blocks_of
      .reshape({grid_.rows / grid_.block_rows, grid_.cols / grid_.block_cols, grid_.block_rows, grid_.block_cols})
      .permute({0, 2, 1, 3})
      .reshape(shape_);
}

}  // namespace gcrun::reducers
