#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>

#include "reducers/builtin_reducers.h"
#include "reducers/tensor_buffer.h"

namespace gcrun::reducers {
namespace {

constexpr double kOrthogonalizationEpsilon = 1e-8;

// Gram-Schmidt on the columns of p, in place; eps in the denominator keeps all-zero columns finite.
void orthogonalize(at::Tensor& p) {
  const int64_t cols = p.size(1);
  for (int64_t i = 0; i < cols; ++i) {
    auto col = p.narrow(1, i, 1);
    col.div_(col.pow(2).sum().sqrt().add_(kOrthogonalizationEpsilon));
    if (i + 1 < cols) {
      auto rest = p.narrow(1, i + 1, cols - i - 1);
      rest.sub_((col * rest).sum(0, /*keepdim=*/true) * col);
    }
  }
}

// The reference's RankKReducer (powersgd.md 1.6), step by step:
//  - tensors with ndim <= 1 (biases, norm scales) travel uncompressed, flat-packed, and keep zero
//    memory; every other tensor is viewed as M = [shape0, rest] and compressed at rank
//    min(n, m, r);
//  - P = M Q is all-reduced as a sum (not divided: it is normalised next), orthogonalised, then
//    Q = M^T P is all-reduced and divided by the number of workers;
//  - every worker applies P Q^T and keeps memory = M - P Q^T (the averaged approximation);
//  - warm start reuses last step's averaged Q as is; otherwise Q is drawn from N(0, 1) by a
//    generator seeded identically on every worker, so no worker has to send it.
class PowerSgdReducer : public Reducer {
 public:
  PowerSgdReducer(Communicator& comm, const ReducerOptions& options, uint64_t seed)
      : comm_(comm),
        rank_(options.rank),
        reuse_query_(options.reuse_query),
        generator_(at::detail::createCPUGenerator(seed)) {}

  uint64_t reduce(const std::vector<at::Tensor>& send, const std::vector<at::Tensor>& out,
                  const std::vector<at::Tensor>& memory) override {
    if (!initialized_) allocate(send);

    vectors_.pack(pick(send, vector_ids_));
    if (!reuse_query_ || !queries_drawn_) drawQueries();
    queries_drawn_ = true;

    for (size_t k = 0; k < matrix_ids_.size(); ++k) {
      at::matmul_out(ps_[k], matrixView(send, k), qs_[k]);
    }
    allreduceUnlessEmpty(p_buffer_);
    // The uncompressed tensors travel while this worker orthogonalises, as in the reference.
    std::unique_ptr<PendingCollective> vectors_pending;
    if (vectors_.numel() > 0) vectors_pending = comm_.allreduceSumAsync(vectors_.flat());

    for (size_t k = 0; k < matrix_ids_.size(); ++k) {
      orthogonalize(ps_[k]);
      at::matmul_out(qs_[k], matrixView(send, k).t(), ps_[k]);
    }
    allreduceUnlessEmpty(q_buffer_);
    q_buffer_.flat().div_(comm_.size());

    for (size_t k = 0; k < matrix_ids_.size(); ++k) {
      auto approximation = matrixView(out, k);
      auto error = matrixView(memory, k);
      at::matmul_out(approximation, ps_[k], qs_[k].t());
      at::sub_out(error, matrixView(send, k), approximation);
    }

    if (vectors_pending) vectors_pending->wait();
    vectors_.unpack(pick(out, vector_ids_), 1.0 / comm_.size());
    for (size_t i : vector_ids_) memory[i].zero_();
    return bitsOf(p_buffer_.flat()) + bitsOf(q_buffer_.flat()) + bitsOf(vectors_.flat());
  }

 private:
  void allocate(const std::vector<at::Tensor>& like) {
    std::vector<at::Tensor> p_like, q_like;
    for (size_t i = 0; i < like.size(); ++i) {
      if (like[i].dim() <= 1) {
        vector_ids_.push_back(i);
        continue;
      }
      const int64_t n = like[i].size(0);
      const int64_t m = like[i].numel() / n;
      const int64_t r = std::min({n, m, rank_});
      matrix_ids_.push_back(i);
      shapes_.push_back({n, m});
      p_like.push_back(at::empty({n, r}, like[i].options()));
      q_like.push_back(at::empty({m, r}, like[i].options()));
    }
    vectors_ = TensorBuffer(pick(like, vector_ids_));
    p_buffer_ = TensorBuffer(p_like);
    q_buffer_ = TensorBuffer(q_like);
    for (size_t k = 0; k < matrix_ids_.size(); ++k) {
      ps_.push_back(p_buffer_.slice(k).view(p_like[k].sizes()));
      qs_.push_back(q_buffer_.slice(k).view(q_like[k].sizes()));
    }
    initialized_ = true;
  }

  // Gloo can hang on empty tensors, and a model without matrices has nothing to send here.
  void allreduceUnlessEmpty(TensorBuffer& buffer) {
    if (buffer.numel() > 0) comm_.allreduceSum(buffer.flat());
  }

  void drawQueries() {
    for (auto& q : qs_) {
      q.copy_(at::randn(q.sizes(), generator_, at::TensorOptions().dtype(q.scalar_type())));
    }
  }

  at::Tensor matrixView(const std::vector<at::Tensor>& tensors, size_t k) const {
    return tensors[matrix_ids_[k]].view(shapes_[k]);
  }

  static std::vector<at::Tensor> pick(const std::vector<at::Tensor>& tensors,
                                      const std::vector<size_t>& ids) {
    std::vector<at::Tensor> picked;
    picked.reserve(ids.size());
    for (size_t i : ids) picked.push_back(tensors[i]);
    return picked;
  }

  Communicator& comm_;
  const int64_t rank_;
  const bool reuse_query_;
  at::Generator generator_;
  bool initialized_ = false;
  bool queries_drawn_ = false;
  std::vector<size_t> vector_ids_, matrix_ids_;
  std::vector<std::vector<int64_t>> shapes_;
  TensorBuffer vectors_, p_buffer_, q_buffer_;
  std::vector<at::Tensor> ps_, qs_;  // views into p_buffer_ and q_buffer_
};

}  // namespace

std::unique_ptr<Reducer> makePowerSgdReducer(const ReducerContext& context) {
  return std::make_unique<PowerSgdReducer>(context.comm, context.options, context.seed);
}

}  // namespace gcrun::reducers
