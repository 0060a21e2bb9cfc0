#include <ATen/ATen.h>

#include <tuple>

#include "reducers/builtin_reducers.h"
#include "reducers/low_rank.h"
#include "reducers/shared_settings.h"
#include "reducers/tensor_buffer.h"

namespace gcrun::reducers {
namespace {

struct SvdOptions {
  int64_t rank = 4;
};

const hyperparams::SettingsSchema<SvdOptions>& svdSettings() {
  static const auto schema = withRank(hyperparams::SettingsSchema<SvdOptions>(), &SvdOptions::rank);
  return schema;
}

// A matrix's message: u [rows, r], s [r] and v [cols, r].
int64_t svdTripletElements(const MatrixShape& s) { return s.rank * (s.rows + s.cols + 1); }

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
  SvdReducer(const ReducerContext& context, const SvdOptions& options) : comm_(context.comm), rank_(options.rank) {}

  uint64_t reduce(const std::vector<at::Tensor>& send, const std::vector<at::Tensor>& out,
                  const std::vector<at::Tensor>& memory) override {
    if (!initialized_) allocate(send);

    auto vectors_pending = split_.startVectors(send, comm_);
    const auto& shapes = split_.shapes();
    for (size_t k = 0; k < shapes.size(); ++k) {
      const auto m = split_.matrix(send, k);
      const int64_t r = shapes[k].rank;
      at::Tensor u, s, vh;
      std::tie(u, s, vh) = at::linalg_svd(m, /*full_matrices=*/false);
      triplets_.slice(3 * k).view({shapes[k].rows, r}).copy_(u.narrow(1, 0, r));
      triplets_.slice(3 * k + 1).copy_(s.narrow(0, 0, r));
      triplets_.slice(3 * k + 2).view({shapes[k].cols, r}).copy_(vh.narrow(0, 0, r).t());
    }
    for (size_t k = 0; k < shapes.size(); ++k) {
      auto error = split_.matrix(memory, k);
      at::sub_out(error, split_.matrix(send, k), approximation(triplets_.flat(), k));
    }

    if (!shapes.empty()) {
      const auto messages = comm_.allgather(triplets_.flat());
      for (size_t k = 0; k < shapes.size(); ++k) {
        auto average = split_.matrix(out, k);
        average.zero_();
        for (const auto& message : messages) average.add_(approximation(message, k));
        average.div_(comm_.size());
      }
    }

    return bitsOf(triplets_.flat()) + split_.finishVectors(std::move(vectors_pending), out, memory, comm_.size());
  }

  // A matrix sends its triplet: u [rows, r], s [r] and v [cols, r].
  std::vector<TensorCost> lastCosts() const override {
    const auto element_bits = static_cast<uint64_t>(8 * triplets_.flat().element_size());
    return split_.costs([&](size_t k) {
      const MatrixShape& s = split_.shapes()[k];
      return element_bits * static_cast<uint64_t>(svdTripletElements(s));
    });
  }

 private:
  void allocate(const std::vector<at::Tensor>& like) {
    split_ = MatrixSplit(like, rank_);
    std::vector<at::Tensor> triplet_like;
    int64_t total = 0;
    const auto options = like.empty() ? at::TensorOptions() : like.front().options();
    for (const auto& shape : split_.shapes()) {
      offsets_.push_back(total);
      total += svdTripletElements(shape);
      triplet_like.push_back(at::empty({shape.rows * shape.rank}, options));
      triplet_like.push_back(at::empty({shape.rank}, options));
      triplet_like.push_back(at::empty({shape.cols * shape.rank}, options));
    }
    triplets_ = TensorBuffer(triplet_like);
    initialized_ = true;
  }

  // u diag(s) v^T of matrix k, read from a message laid out as triplets_.
  at::Tensor approximation(const at::Tensor& message, size_t k) const {
    const MatrixShape& shape = split_.shapes()[k];
    int64_t offset = offsets_[k];
    const auto u = message.narrow(0, offset, shape.rows * shape.rank).view({shape.rows, shape.rank});
    offset += shape.rows * shape.rank;
    const auto s = message.narrow(0, offset, shape.rank);
    offset += shape.rank;
    const auto v = message.narrow(0, offset, shape.cols * shape.rank).view({shape.cols, shape.rank});
    return at::matmul(u * s, v.t());
  }

  Communicator& comm_;
  const int64_t rank_;
  bool initialized_ = false;
  MatrixSplit split_;
  std::vector<int64_t> offsets_;  // where matrix k's triplet starts in a message
  TensorBuffer triplets_;         // u, s, v of each matrix in turn: this worker's message
};

}  // namespace

ReducerSpec svdSpec() {
  const auto make = [](const ReducerContext& context) -> std::unique_ptr<Reducer> {
    return std::make_unique<SvdReducer>(context, svdSettings().read(context.options.settings));
  };
  ReducerSpec spec{
      make,        CollectiveKind::all_gather, svdSettings().specs(), true, {Granularity::layer, Granularity::model},
      "SVDReducer"};
  // Each matrix's triplet in float32, the other tensors whole (lastCosts()).
  spec.planned_bits = [](const ReducerOptions& options, const TensorShapes& shapes) {
    return plannedSplitBits(shapes, svdSettings().read(options.settings).rank, [](const MatrixShape& matrix) {
      return 8 * sizeof(float) * static_cast<uint64_t>(svdTripletElements(matrix));
    });
  };
  return spec;
}

}  // namespace gcrun::reducers
