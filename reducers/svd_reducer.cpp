#include <ATen/ATen.h>

#include <tuple>

#include "reducers/builtin_reducers.h"
#include "reducers/low_rank.h"
#include "reducers/tensor_buffer.h"

namespace gcrun::reducers {
namespace {

// The reference's SVDReducer (powersgd.md 1.6): the paper's "SVD rank r", the best rank-r
// approximation of each worker's own matrices.
//  - Each tensor with ndim >= 2 is viewed as M = [shape0, rest]; this worker sends the top
//    r = min(rank, n, m) singular triplets of its M: u [n, r], s [r], v [m, r], so
//    32 * r * (n + m + 1) bits per matrix. They travel in one all-gather for all matrices (the
//    reference runs three per matrix; the bits are the same).
//  - Every worker rebuilds every worker's u diag(s) v^T and averages them in rank order.
//  - memory = M - this worker's own approximation; vectors are all-reduced and averaged with zero
//    memory, 32 bits per element.
class SvdReducer : public Reducer {
 public:
  explicit SvdReducer(const ReducerContext& context) : comm_(context.comm), rank_(context.options.rank) {}

  uint64_t reduce(const std::vector<at::Tensor>& send, const std::vector<at::Tensor>& out,
                  const std::vector<at::Tensor>& memory) override {
    if (!initialized_) allocate(send);

    vectors_.pack(pick(send, vector_ids_));
    std::unique_ptr<PendingCollective> vectors_pending;
    if (vectors_.numel() > 0) vectors_pending = comm_.allreduceSumAsync(vectors_.flat());

    for (size_t k = 0; k < shapes_.size(); ++k) {
      const auto m = matrixView(send, k);
      const int64_t r = shapes_[k].rank;
      at::Tensor u, s, vh;
      std::tie(u, s, vh) = at::linalg_svd(m, /*full_matrices=*/false);
      triplets_.slice(3 * k).view({shapes_[k].rows, r}).copy_(u.narrow(1, 0, r));
      triplets_.slice(3 * k + 1).copy_(s.narrow(0, 0, r));
      triplets_.slice(3 * k + 2).view({shapes_[k].cols, r}).copy_(vh.narrow(0, 0, r).t());
    }
    for (size_t k = 0; k < shapes_.size(); ++k) {
      auto error = matrixView(memory, k);
      at::sub_out(error, matrixView(send, k), approximation(triplets_.flat(), k));
    }

    if (!shapes_.empty()) {
      const auto messages = comm_.allgather(triplets_.flat());
      for (size_t k = 0; k < shapes_.size(); ++k) {
        auto average = matrixView(out, k);
        average.zero_();
        for (const auto& message : messages) average.add_(approximation(message, k));
        average.div_(comm_.size());
      }
    }

    if (vectors_pending) vectors_pending->wait();
    vectors_.unpack(pick(out, vector_ids_), 1.0 / comm_.size());
    for (size_t i : vector_ids_) memory[i].zero_();
    return bitsOf(triplets_.flat()) + bitsOf(vectors_.flat());
  }

 private:
  void allocate(const std::vector<at::Tensor>& like) {
    std::vector<at::Tensor> triplet_like;
    int64_t total = 0;
    for (size_t i = 0; i < like.size(); ++i) {
      if (like[i].dim() <= 1) {
        vector_ids_.push_back(i);
        continue;
      }
      const MatrixShape shape = matrixShape(like[i], rank_);
      matrix_ids_.push_back(i);
      shapes_.push_back(shape);
      offsets_.push_back(total);
      total += shape.rank * (shape.rows + shape.cols + 1);
      triplet_like.push_back(at::empty({shape.rows * shape.rank}, like[i].options()));
      triplet_like.push_back(at::empty({shape.rank}, like[i].options()));
      triplet_like.push_back(at::empty({shape.cols * shape.rank}, like[i].options()));
    }
    vectors_ = TensorBuffer(pick(like, vector_ids_));
    triplets_ = TensorBuffer(triplet_like);
    initialized_ = true;
  }

  // u diag(s) v^T of matrix k, read from a message laid out as triplets_.
  at::Tensor approximation(const at::Tensor& message, size_t k) const {
    const MatrixShape& shape = shapes_[k];
    int64_t offset = offsets_[k];
    const auto u = message.narrow(0, offset, shape.rows * shape.rank).view({shape.rows, shape.rank});
    offset += shape.rows * shape.rank;
    const auto s = message.narrow(0, offset, shape.rank);
    offset += shape.rank;
    const auto v = message.narrow(0, offset, shape.cols * shape.rank).view({shape.cols, shape.rank});
    return at::matmul(u * s, v.t());
  }

  at::Tensor matrixView(const std::vector<at::Tensor>& tensors, size_t k) const {
    return tensors[matrix_ids_[k]].view({shapes_[k].rows, shapes_[k].cols});
  }

  Communicator& comm_;
  const int64_t rank_;
  bool initialized_ = false;
  std::vector<size_t> vector_ids_, matrix_ids_;
  std::vector<MatrixShape> shapes_;
  std::vector<int64_t> offsets_;  // where matrix k's triplet starts in a message
  TensorBuffer vectors_;
  TensorBuffer triplets_;  // u, s, v of each matrix in turn: this worker's message
};

}  // namespace

std::unique_ptr<Reducer> makeSvdReducer(const ReducerContext& context) {
  return std::make_unique<SvdReducer>(context);
}

}  // namespace gcrun::reducers
