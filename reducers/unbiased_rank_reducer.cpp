#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>

#include <stdexcept>
#include <string>

#include "reducers/builtin_reducers.h"
#include "reducers/low_rank.h"
#include "reducers/shared_settings.h"
#include "reducers/tensor_buffer.h"

namespace gcrun::reducers {
namespace {

struct UnbiasedRankOptions {
  int64_t rank = 4;
  double orthogonalization_epsilon = 1e-8;
};

const hyperparams::SettingsSchema<UnbiasedRankOptions>& unbiasedRankSettings() {
  using O = UnbiasedRankOptions;
  static const auto schema =
      withOrthogonalizationEpsilon(withRank(hyperparams::SettingsSchema<O>(), &O::rank), &O::orthogonalization_epsilon);
  return schema;
}

// The reference's HalfRankKReducer (powersgd.md 1.6): the paper's "Unbiased Rank r" (memory off)
// and "Half Rank r (EF)". Half a power iteration per call, alternating:
//  - P call: orthogonalise Q, P = M Q, memory = M - P Q^T, all-reduce P, / W;
//  - Q call: orthogonalise P, Q = M^T P, memory = M - P Q^T, all-reduce Q, / W.
// The first call is a P call on a query drawn from N(0, 1) by a generator seeded identically on
// every worker; later calls reuse the factor the previous call averaged. Every worker applies
// P Q^T with the averaged factor, so the output is the mean of the workers' local approximations
// and memory is the local residual (not the averaged one, unlike powersgd). Nothing is rescaled:
// "unbiased" is the paper's name for it. Matrices and vectors are split as in powersgd (vectors
// all-reduced uncompressed with zero memory). Bits alternate: 32 * sum r*n on P calls,
// 32 * sum r*m on Q calls, plus 32 per vector element on every call.
class UnbiasedRankReducer : public Reducer {
 public:
  UnbiasedRankReducer(const ReducerContext& context, const UnbiasedRankOptions& options)
      : comm_(context.comm),
        rank_(options.rank),
        epsilon_(options.orthogonalization_epsilon),
        generator_(at::detail::createCPUGenerator(context.seed)) {}

  uint64_t reduce(const std::vector<at::Tensor>& send, const std::vector<at::Tensor>& out,
                  const std::vector<at::Tensor>& memory) override {
    if (!initialized_) allocate(send);
    if (restored_.defined()) restoreFactors();

    auto vectors_pending = split_.startVectors(send, comm_);

    const bool p_call = next_is_p_;
    next_is_p_ = !next_is_p_;
    if (!queries_drawn_) drawQueries();
    queries_drawn_ = true;
    for (size_t k = 0; k < split_.matrices(); ++k) {
      const auto m = split_.matrix(send, k);
      if (p_call) {
        orthogonalize(qs_[k], epsilon_);
        at::matmul_out(ps_[k], m, qs_[k]);
      } else {
        orthogonalize(ps_[k], epsilon_);
        at::matmul_out(qs_[k], m.t(), ps_[k]);
      }
      auto error = split_.matrix(memory, k);
      at::sub_out(error, m, at::matmul(ps_[k], qs_[k].t()));
    }
    at::Tensor& sent = p_call ? p_flat_ : q_flat_;
    if (sent.numel() > 0) comm_.allreduceSum(sent);  // Gloo can hang on empty tensors
    sent.div_(comm_.size());
    for (size_t k = 0; k < split_.matrices(); ++k) {
      auto approximation = split_.matrix(out, k);
      at::matmul_out(approximation, ps_[k], qs_[k].t());
    }

    return bitsOf(sent) + split_.finishVectors(std::move(vectors_pending), out, memory, comm_.size());
  }

  // A matrix sends the factor of this call: P [rows, r] and Q [cols, r] alternate.
  std::vector<TensorCost> lastCosts() const override {
    const bool sent_p = !next_is_p_;
    const auto element_bits = static_cast<uint64_t>(8 * p_flat_.element_size());
    return split_.costs(
        [&](size_t k) { return element_bits * static_cast<uint64_t>(sent_p ? ps_[k].numel() : qs_[k].numel()); });
  }

  // The generator, which half comes next, and both factors once drawn.
  void saveState(State& state) const override {
    state["generator"] = generator_.get_state().clone();
    state["next_is_p"] = at::scalar_tensor(next_is_p_ ? 1 : 0, at::kLong);
    state["queries_drawn"] = at::scalar_tensor(queries_drawn_ ? 1 : 0, at::kLong);
    // Loaded factors wait in restored_ until a reduce() has the buffers to copy them into.
    if (queries_drawn_)
      state["factors"] = restored_.defined() ? restored_.clone() : at::cat({p_flat_.cpu(), q_flat_.cpu()});
  }

  void loadState(const State& state) override {
    const auto entry = [&](const std::string& name) { return stateEntry(state, "unbiased-rank", name); };
    generator_.set_state(entry("generator"));
    next_is_p_ = entry("next_is_p").item<int64_t>() != 0;
    queries_drawn_ = entry("queries_drawn").item<int64_t>() != 0;
    if (queries_drawn_) restored_ = entry("factors");
  }

 private:
  void allocate(const std::vector<at::Tensor>& like) {
    split_ = MatrixSplit(like, rank_);
    int64_t p_total = 0, q_total = 0;
    for (const auto& shape : split_.shapes()) {
      p_total += shape.rows * shape.rank;
      q_total += shape.cols * shape.rank;
    }
    const auto options = like.empty() ? at::TensorOptions() : like.front().options();
    p_flat_ = at::empty({p_total}, options);
    q_flat_ = at::empty({q_total}, options);
    int64_t p_offset = 0, q_offset = 0;
    for (const auto& s : split_.shapes()) {
      ps_.push_back(p_flat_.narrow(0, p_offset, s.rows * s.rank).view({s.rows, s.rank}));
      qs_.push_back(q_flat_.narrow(0, q_offset, s.cols * s.rank).view({s.cols, s.rank}));
      p_offset += s.rows * s.rank;
      q_offset += s.cols * s.rank;
    }
    initialized_ = true;
  }

  void restoreFactors() {
    if (restored_.numel() != p_flat_.numel() + q_flat_.numel()) {
      throw std::invalid_argument("unbiased-rank state: saved factors have " + std::to_string(restored_.numel()) +
                                  " elements, this model needs " + std::to_string(p_flat_.numel() + q_flat_.numel()));
    }
    p_flat_.copy_(restored_.narrow(0, 0, p_flat_.numel()));
    q_flat_.copy_(restored_.narrow(0, p_flat_.numel(), q_flat_.numel()));
    restored_ = at::Tensor();
  }

  void drawQueries() {
    for (auto& q : qs_) {
      q.copy_(at::randn(q.sizes(), generator_, at::TensorOptions().dtype(q.scalar_type())));
    }
  }

  Communicator& comm_;
  const int64_t rank_;
  const double epsilon_;
  at::Generator generator_;
  bool initialized_ = false;
  bool queries_drawn_ = false;
  bool next_is_p_ = true;
  MatrixSplit split_;
  at::Tensor p_flat_, q_flat_;       // what goes on the wire, matrix after matrix
  std::vector<at::Tensor> ps_, qs_;  // views into p_flat_ and q_flat_
  at::Tensor restored_;              // from loadState(), copied in once the buffers exist
};

}  // namespace

ReducerSpec unbiasedRankSpec() {
  const auto make = [](const ReducerContext& context) -> std::unique_ptr<Reducer> {
    return std::make_unique<UnbiasedRankReducer>(context, unbiasedRankSettings().read(context.options.settings));
  };
  ReducerSpec spec{make,
                   CollectiveKind::all_reduce,
                   unbiasedRankSettings().specs(),
                   true,
                   {Granularity::layer, Granularity::model},
                   "HalfRankKReducer"};
  // A call sends P (rows x r) or Q (cols x r) of each matrix in turn: half of both a call, over a
  // pair of calls; the other tensors whole.
  spec.planned_bits = [](const ReducerOptions& options, const TensorShapes& shapes) {
    return plannedSplitBits(shapes, unbiasedRankSettings().read(options.settings).rank,
                            [](const MatrixShape& matrix) { return lowRankBits(matrix, 32) / 2; });
  };
  return spec;
}

}  // namespace gcrun::reducers
