#pragma once

#include <algorithm>
#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include <ATen/ATen.h>
#include <c10/util/accumulate.h>

#include "reducers/reducer.h"
#include "reducers/tensor_buffer.h"
#include "reducers/tensor_costs.h"

namespace gcrun::reducers {

// Helpers shared by the low-rank reducers (powersgd, unbiased-rank, svd).

// How the reference sees a tensor with ndim >= 2 as a matrix: [shape0, everything else], compressed
// at rank min(rows, cols, requested).
struct MatrixShape {
  int64_t rows = 0, cols = 0, rank = 0;
};

inline MatrixShape matrixShapeOf(const std::vector<int64_t>& sizes, int64_t requested_rank) {
  MatrixShape shape;
  shape.rows = sizes.front();
  shape.cols = c10::multiply_integers(sizes) / shape.rows;
  shape.rank = std::min({shape.rows, shape.cols, requested_rank});
  return shape;
}
inline MatrixShape matrixShape(const at::Tensor& tensor, int64_t requested_rank) {
  return matrixShapeOf(tensor.sizes().vec(), requested_rank);
}

// What a rank-r factorisation sends per round: P [rows, r] and Q [cols, r], of `element_bits` each
// (the gradients' type: 32 for float32).
inline uint64_t lowRankBits(const MatrixShape& shape, uint64_t element_bits) {
  return element_bits * static_cast<uint64_t>(shape.rank) * static_cast<uint64_t>(shape.rows + shape.cols);
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

// Which shapes MatrixSplit compresses: those with ndim >= 2 that `compress` (when given) accepts.
using CompressRule = std::function<bool(const MatrixShape&)>;
inline bool splitCompresses(const std::vector<int64_t>& sizes, int64_t rank, const CompressRule& compress) {
  return sizes.size() >= 2 && (!compress || compress(matrixShapeOf(sizes, rank)));
}

// What a list of tensors of `shapes` split as MatrixSplit splits it sends per call, nothing
// allocated: the uncompressed tensors whole in float32, and `matrix_bits(shape)` per matrix, as
// its costs() count them.
template <class MatrixBits>
uint64_t plannedSplitBits(const std::vector<std::vector<int64_t>>& shapes, int64_t rank, MatrixBits&& matrix_bits,
                          const CompressRule& compress = nullptr) {
  uint64_t bits = 0;
  for (const auto& sizes : shapes) {
    if (splitCompresses(sizes, rank, compress)) {
      bits += matrix_bits(matrixShapeOf(sizes, rank));
    } else {
      bits += 8 * sizeof(float) * static_cast<uint64_t>(c10::multiply_integers(sizes));
    }
  }
  return bits;
}

// How the low-rank reducers split a gradient list: the matrices they compress, and the rest (1-D
// tensors such as biases, and matrices not worth compressing), which travel uncompressed in one
// all-reduce of their average and keep zero memory.
class MatrixSplit {
 public:
  MatrixSplit() = default;
  // Tensors with ndim >= 2 are matrices, compressed at min(rows, cols, rank), if `compress` (when
  // given) accepts their shape.
  MatrixSplit(const std::vector<at::Tensor>& like, int64_t rank, const CompressRule& compress = nullptr) {
    for (size_t i = 0; i < like.size(); ++i) {
      if (!splitCompresses(like[i].sizes().vec(), rank, compress)) {
        vector_ids_.push_back(i);
        continue;
      }
      matrix_ids_.push_back(i);
      shapes_.push_back(matrixShape(like[i], rank));
    }
    vectors_ = TensorBuffer::over(pick(like, vector_ids_));
  }

  size_t matrices() const { return shapes_.size(); }
  const std::vector<MatrixShape>& shapes() const { return shapes_; }
  // Matrix k of `tensors` (a list like the one given at construction) as [rows, cols].
  at::Tensor matrix(const std::vector<at::Tensor>& tensors, size_t k) const {
    return tensors[matrix_ids_[k]].view({shapes_[k].rows, shapes_[k].cols});
  }

  // Starts summing the uncompressed tensors of `send` over the workers; nullptr when there are
  // none (Gloo can hang on empty tensors).
  std::unique_ptr<PendingCollective> startVectors(const std::vector<at::Tensor>& send, comm::Communicator& comm) {
    vectors_.pack(pick(send, vector_ids_));
    return vectors_.numel() > 0 ? comm.allreduceSumAsync(vectors_.flat()) : nullptr;
  }
  // Waits for the sum, writes its average into `out` and zero into `memory`; returns the bits sent.
  uint64_t finishVectors(std::unique_ptr<PendingCollective> pending, const std::vector<at::Tensor>& out,
                         const std::vector<at::Tensor>& memory, int workers) {
    if (pending) pending->wait();
    vectors_.unpack(pick(out, vector_ids_), 1.0 / workers);
    for (size_t i : vector_ids_) memory[i].zero_();
    return bitsOf(vectors_.flat());
  }

  // lastCosts() of the list split this way: the uncompressed tensors' own bits, and for matrix k,
  // `matrix_bits(k)` at its rank.
  template <class MatrixBits>
  std::vector<TensorCost> costs(MatrixBits&& matrix_bits) const {
    std::vector<TensorCost> costs(vector_ids_.size() + matrix_ids_.size());
    const auto element_bits = static_cast<uint64_t>(8 * vectors_.flat().element_size());
    for (size_t j = 0; j < vector_ids_.size(); ++j) {
      costs[vector_ids_[j]].bits = element_bits * static_cast<uint64_t>(vectors_.slice(j).numel());
    }
    for (size_t k = 0; k < shapes_.size(); ++k) costs[matrix_ids_[k]] = {matrix_bits(k), shapes_[k].rank};
    return costs;
  }

 private:
  std::vector<size_t> vector_ids_, matrix_ids_;
  std::vector<MatrixShape> shapes_;
  TensorBuffer vectors_;
};

}  // namespace gcrun::reducers
