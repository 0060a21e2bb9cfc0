#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

#include <ATen/ATen.h>

#include "reducers/tensor_buffer.h"

namespace gcrun::reducers {

// Helpers shared by the low-rank reducers (powersgd, unbiased-rank, svd).

// How the reference sees a tensor with ndim >= 2 as a matrix: [shape0, everything else], compressed
// at rank min(rows, cols, requested).
struct MatrixShape {
  int64_t rows = 0, cols = 0, rank = 0;
};

inline MatrixShape matrixShape(const at::Tensor& tensor, int64_t requested_rank) {
  MatrixShape shape;
  shape.rows = tensor.size(0);
  shape.cols = tensor.numel() / shape.rows;
  shape.rank = std::min({shape.rows, shape.cols, requested_rank});
  return shape;
}

// Gram-Schmidt on the columns of p ([n, r], or a batch [b, n, r] of independent matrices), in
// place, as the reference does it: col /= (|col| + eps), then the later columns lose their
// component along col. eps keeps all-zero columns finite.
inline void orthogonalize(const at::Tensor& p, double epsilon) {
  const int64_t rows_dim = p.dim() - 2;
  const int64_t cols = p.size(-1);
  for (int64_t i = 0; i < cols; ++i) {
    auto col = p.narrow(-1, i, 1);
    col.div_(col.pow(2).sum(rows_dim, /*keepdim=*/true).sqrt_().add_(epsilon));
    if (i + 1 < cols) {
      auto rest = p.narrow(-1, i + 1, cols - i - 1);
      rest.sub_((col * rest).sum(rows_dim, /*keepdim=*/true) * col);
    }
  }
}

}  // namespace gcrun::reducers
