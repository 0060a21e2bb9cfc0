#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>

#include <algorithm>
#include <cstdint>
#include <map>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "hyperparams/base/errors.h"
#include "reducers/builtin_reducers.h"
#include "reducers/powersgd_ddp_parts.h"
#include "reducers/shared_settings.h"

namespace gcrun::reducers {
namespace {

// PowerSGDState's arguments, with its defaults (torch 1.13), named as gcrun's powersgd names them.
struct PowerSgdDdpOptions {
  int64_t rank = 1;                      // matrix_approximation_rank
  int64_t start_iter = 1000;             // start_powerSGD_iter
  double min_compression_rate = 2;       // min_compression_rate
  bool error_feedback = true;            // use_error_feedback
  bool warm_start = true;                // warm_start
  double orthogonalization_epsilon = 0;  // orthogonalization_epsilon
  int64_t random_seed = 0;               // random_seed
};

const hyperparams::SettingsSchema<PowerSgdDdpOptions>& powerSgdDdpSettings() {
  using hyperparams::boolean;
  using hyperparams::integerAtLeast;
  using O = PowerSgdDdpOptions;
  static const auto schema =
      withOrthogonalizationEpsilon(withRank(hyperparams::SettingsSchema<O>(), &O::rank), &O::orthogonalization_epsilon)
          .add(&O::start_iter, "start_iter", integerAtLeast(0),
               "Steps of plain all-reduce before compression starts (PyTorch's start_powerSGD_iter).")
          .add(&O::min_compression_rate, "min_compression_rate", hyperparams::numberAtLeast(0),
               "Compress a matrix only if n*m > rate*rank*(n+m) (PyTorch's rule; 0: every matrix).")
          .add(&O::error_feedback, "error_feedback", boolean(),
               "powersgd-ddp: the hook's use_error_feedback, kept by the reducer (optimizer.memory must be false).")
          .add(&O::warm_start, "warm_start", boolean(),
               "powersgd-ddp: reuse the previous step's Q (the hook's warm_start).")
          .add(&O::random_seed, "random_seed", integerAtLeast(0),
               "powersgd-ddp: the hook's random_seed (numpy RandomState), < 2^32; gcrun's seed is not used.");
  return schema;
}

// How the hook sees a tensor: as [n, m] (n its first dimension), compressed at
// r = min(n, m, rank) when (n + m) r min_compression_rate < n m; r = 0 (sent whole) for a scalar,
// an empty tensor or a matrix not worth compressing.
struct PowerSgdDdpMatrix {
  int64_t n = 0, m = 0, r = 0;
};
PowerSgdDdpMatrix powerSgdDdpMatrixOf(const std::vector<int64_t>& sizes, int64_t rank, double min_compression_rate) {
  PowerSgdDdpMatrix matrix;
  matrix.n = sizes.empty() ? 1 : sizes.front();
  matrix.m = matrix.n == 0 ? 0 : c10::multiply_integers(sizes) / matrix.n;
  const int64_t r = std::min({matrix.n, matrix.m, rank});
  const bool worth =
      static_cast<double>((matrix.n + matrix.m) * r) * min_compression_rate < static_cast<double>(matrix.n * matrix.m);
  matrix.r = !sizes.empty() && matrix.n != 0 && worth ? r : 0;
  return matrix;
}

// PyTorch DDP's powerSGD_hook (torch 1.13, ddp_comm_hooks/powerSGD_hook.py) with the default
// batch_tensors_with_same_shape=False, as it runs on ONE bucket holding every parameter, op for op,
// so that it returns the hook's bits exactly (tests/reducers/powersgd_ddp_reducer_test.cpp runs the
// hook under DDP over Gloo as the peer). Per call (one call = one bucket = one DDP iteration):
//  - before start_iter: bucket / W, then all-reduced (the hook's vanilla allreduce divides first);
//  - then: the error of the last compressed call is added (not at the first one: the hook creates it
//    as zeros and adds nothing); each tensor is viewed as [shape0, rest]; one with
//    (n+m)*r*min_compression_rate < n*m (r = min(n, m, rank)) is compressed, the others (biases,
//    small matrices) are concatenated in bucket order, all-reduced, divided by W;
//  - compressed matrices are handled grouped by shape, groups in order of their first member in the
//    bucket, and their P [1, n, r] and Q [1, m, r] are views into two flat buffers in that order;
//  - Q: without warm start (or at the first compressed call) torch.manual_seed(seed) with the next
//    seed numpy's RandomState(random_seed).randint(1_000_000_000) gives, then per Q: randn, then
//    orthogonalise; with warm start the last call's averaged Q, orthogonalised;
//  - P = M Q, all-reduced (a sum, not divided), orthogonalised; Q = M^T P, all-reduced, divided by W;
//    M = P Q^T in place in the bucket;
//  - error feedback keeps (bucket after the error was added) - (bucket after the hook), over the
//    whole bucket: the uncompressed tensors keep their local value minus the average too.
// Bucket layout assumed: DDP (torch 1.13, find_unused_parameters=False) with ONE bucket, i.e.
// bucket_cap_mb and dist._DEFAULT_FIRST_BUCKET_BYTES (set before DDP is built: its rebuild reads it)
// above the model's size. The bucket is a flat buffer holding the tensors back to back: for the
// first call in registration order (DDP's construction puts every parameter in one bucket); from
// the second on in the order rank 0's gradients became ready during the first backward, which DDP
// rebuilds its bucket in before its second forward and broadcasts from rank 0. Here that is the
// order of rank 0's ready() calls during the first call (the trainer makes them from the same
// autograd post-hooks DDP uses; under a task that clips gradients, in reverse order), broadcast at the
// second call (a control message, not counted in the bits), or reverse registration order when
// ready() did not come for every tensor. With find_unused_parameters=True DDP would keep its first
// bucket, but on Gloo its used-parameter all-reduce then races the hook's chained all-reduces and
// Gloo aborts. The order decides the order of the Q draws and the layout of the flat buffers;
// everything else is elementwise or per matrix.
// The hook's error feedback is its own: the trainer's (optimizer.memory) must be off; memory[i] gets
// send[i] - out[i] as the contract asks. Only reducer.granularity layer: the tensors are the
// parameters.
class PowerSgdDdpReducer : public Reducer {
 public:
  PowerSgdDdpReducer(const ReducerContext& context, const PowerSgdDdpOptions& options)
      : comm_(context.comm),
        options_(options),
        tensors_(context.parameters.size()),
        seeds_(static_cast<uint32_t>(options.random_seed)) {}

  // During the first call: DDP's rebuilt bucket follows the order the gradients become ready.
  void ready(size_t index, const std::vector<at::Tensor>& send) override {
    if (iter_ == 0 && ready_order_.size() < send.size()) ready_order_.push_back(index);
  }

  uint64_t reduce(const std::vector<at::Tensor>& send, const std::vector<at::Tensor>& out,
                  const std::vector<at::Tensor>& memory) override {
    // DDP rebuilds its bucket before its second forward (see the class comment).
    const bool rebuilt = iter_ >= 1;
    if (rebuilt && rebuilt_order_.empty()) rebuilt_order_ = rankZerosReadyOrder(send.size());
    if (!bucket_.defined() || rebuilt != rebuilt_layout_) layOut(send, rebuilt);
    for (size_t i = 0; i < send.size(); ++i) views_[i].copy_(send[i]);
    last_compressed_ = iter_ >= options_.start_iter;
    ++iter_;
    if (!last_compressed_) return allreduceBucket(out, memory);
    const uint64_t bits = compress();
    for (size_t i = 0; i < send.size(); ++i) {
      out[i].copy_(views_[i]);
      at::Tensor lost = memory[i];
      at::sub_out(lost, send[i], out[i]);
    }
    return bits;
  }

  std::vector<TensorCost> lastCosts() const override {
    std::vector<TensorCost> costs;
    for (const auto& view : views_) costs.push_back({bitsOf(view), 0});
    if (!last_compressed_) return costs;
    const auto element_bits = static_cast<uint64_t>(8 * bucket_.element_size());
    for (const auto& matrix : matrices_) {
      costs[matrix.tensor] = {element_bits * static_cast<uint64_t>(matrix.p.numel() + matrix.q.numel()),
                              matrix.p.size(2)};
    }
    return costs;
  }

  // The iteration, the rebuilt bucket's order, numpy's generator, the error and the warm-start Q.
  void saveState(State& state) const override {
    state["iter"] = at::scalar_tensor(iter_, at::kLong);
    std::vector<int64_t> order(rebuilt_order_.begin(), rebuilt_order_.end());
    state["bucket_order"] = at::tensor(order, at::kLong);
    state["seed_generator"] = at::tensor(seeds_.state(), at::kLong);
    state["queries_drawn"] = at::scalar_tensor(queries_drawn_ ? 1 : 0, at::kLong);
    // Restored tensors wait in restored_* until the next reduce() lays the bucket out.
    const at::Tensor& error = restored_error_.defined() ? restored_error_ : error_;
    if (error.defined()) state["error"] = error.cpu().clone();
    if (queries_drawn_) state["queries"] = (restored_queries_.defined() ? restored_queries_ : q_memory_).cpu().clone();
  }

  // Every entry is checked against what a run could have saved: the bucket order is empty before
  // the second call (DDP's rebuild) and a permutation of this model's tensors from it on, since
  // layOut() indexes with it.
  void loadState(const State& state) override {
    iter_ = stateCount(state, kOwner, "iter", 0, kMostCalls);
    rebuilt_order_ = savedBucketOrder(stateEntry(state, kOwner, "bucket_order"), iter_ >= 2, tensors_);
    ready_order_.clear();
    seeds_ = savedSeeds(state);
    queries_drawn_ = stateCount(state, kOwner, "queries_drawn", 0, 1) != 0;
    restored_error_ = state.count("error") ? stateEntry(state, kOwner, "error") : at::Tensor();
    restored_queries_ = queries_drawn_ ? stateEntry(state, kOwner, "queries") : at::Tensor();
    error_ = at::Tensor();
    bucket_ = at::Tensor();  // the next reduce() lays the bucket out for iter_ and restores these
  }

 private:
  // A compressed tensor: M, P and Q as the hook's [1, n, m], [1, n, r] and [1, m, r] views.
  struct Matrix {
    size_t tensor;
    at::Tensor m, p, q;
  };

  static constexpr const char* kOwner = "powersgd-ddp";
  // More calls than any run makes: iter_ + 1 never overflows.
  static constexpr int64_t kMostCalls = int64_t{1} << 62;
  // Checkpoints written before the generator's state was saved counted its draws instead; that
  // many are replayed, at most one per compressed call and at most this many (a fraction of a
  // second).
  static constexpr int64_t kMostReplayedSeeds = int64_t{1} << 24;

  NumpyLegacyRandint savedSeeds(const State& state) const {
    NumpyLegacyRandint seeds(static_cast<uint32_t>(options_.random_seed));
    if (state.count("seed_generator") == 0) {
      const int64_t compressed_calls = std::max<int64_t>(0, iter_ - options_.start_iter);
      const int64_t drawn = stateCount(state, kOwner, "seeds_drawn", 0, std::min(compressed_calls, kMostReplayedSeeds));
      for (int64_t k = 0; k < drawn; ++k) seeds.next();
      return seeds;
    }
    const at::Tensor& saved = stateEntry(state, kOwner, "seed_generator");
    if (saved.dim() != 1 || saved.scalar_type() != at::kLong) {
      throw std::invalid_argument(std::string(kOwner) + " state: 'seed_generator' is not a list of 64-bit integers");
    }
    const auto values = saved.contiguous();
    try {
      seeds.setState({values.data_ptr<int64_t>(), values.data_ptr<int64_t>() + values.numel()});
    } catch (const std::invalid_argument& e) {
      throw std::invalid_argument(std::string(kOwner) + " state: 'seed_generator' " + e.what());
    }
    return seeds;
  }

  // DDP's sync_bucket_indices: every rank takes rank 0's order.
  std::vector<size_t> rankZerosReadyOrder(size_t count) {
    std::vector<int64_t> order(count);
    for (size_t k = 0; k < count; ++k) {
      order[k] = static_cast<int64_t>(ready_order_.size() == count ? ready_order_[k] : count - 1 - k);
    }
    at::Tensor agreed = at::tensor(order, at::kLong).to(comm_.device());
    if (comm_.size() > 1) comm_.broadcast(agreed, 0);
    agreed = agreed.cpu();
    return {agreed.data_ptr<int64_t>(), agreed.data_ptr<int64_t>() + count};
  }

  // The bucket, its views and the hook's buffers, for DDP's first bucket or its rebuilt one.
  void layOut(const std::vector<at::Tensor>& like, bool rebuilt) {
    rebuilt_layout_ = rebuilt;
    uncompressed_.clear();
    matrices_.clear();
    std::vector<size_t> order = rebuilt_order_;
    if (!rebuilt) {
      order.resize(like.size());
      for (size_t k = 0; k < like.size(); ++k) order[k] = k;
    }
    if (order.size() != like.size()) {
      throw std::invalid_argument("powersgd-ddp: the saved bucket order has " + std::to_string(order.size()) +
                                  " tensors, this model " + std::to_string(like.size()));
    }
    int64_t total = 0;
    for (const auto& t : like) total += t.numel();
    bucket_ = at::empty({total}, like.empty() ? at::TensorOptions() : like.front().options());
    views_.resize(like.size());
    int64_t offset = 0;
    // Shapes in order of first appearance (the hook's defaultdict keyed by matrix shape).
    std::vector<std::pair<int64_t, int64_t>> shapes;
    std::map<std::pair<int64_t, int64_t>, std::vector<size_t>> members;
    for (size_t i : order) {
      views_[i] = bucket_.narrow(0, offset, like[i].numel()).view(like[i].sizes());
      offset += like[i].numel();
      const auto [n, m, r] = powerSgdDdpMatrixOf(like[i].sizes().vec(), options_.rank, options_.min_compression_rate);
      if (r == 0) {
        uncompressed_.push_back(i);
        continue;
      }
      if (members.count({n, m}) == 0) shapes.emplace_back(n, m);
      members[{n, m}].push_back(i);
    }
    int64_t p_total = 0, q_total = 0;
    for (const auto& shape : shapes) {
      const int64_t r = std::min({shape.first, shape.second, options_.rank});
      p_total += shape.first * r * static_cast<int64_t>(members[shape].size());
      q_total += shape.second * r * static_cast<int64_t>(members[shape].size());
    }
    p_memory_ = at::empty({p_total}, bucket_.options());
    q_memory_ = at::empty({q_total}, bucket_.options());
    int64_t uncompressed_total = 0;
    for (size_t i : uncompressed_) uncompressed_total += views_[i].numel();
    uncompressed_memory_ = at::empty({uncompressed_total}, bucket_.options());
    int64_t p_offset = 0, q_offset = 0;
    for (const auto& [n, m] : shapes) {
      const int64_t r = std::min({n, m, options_.rank});
      for (size_t i : members[{n, m}]) {
        matrices_.push_back({i, views_[i].view({1, n, m}), p_memory_.narrow(0, p_offset, n * r).view({1, n, r}),
                             q_memory_.narrow(0, q_offset, m * r).view({1, m, r})});
        p_offset += n * r;
        q_offset += m * r;
      }
    }
    restore();
  }

  // loadState()'s tensors, once the buffers exist.
  void restore() {
    const auto fits = [](const at::Tensor& saved, const at::Tensor& buffer, const std::string& name) {
      if (saved.numel() != buffer.numel()) {
        throw std::invalid_argument("powersgd-ddp state: '" + name + "' has " + std::to_string(saved.numel()) +
                                    " elements, this model needs " + std::to_string(buffer.numel()));
      }
    };
    if (restored_error_.defined()) {
      fits(restored_error_, bucket_, "error");
      error_ = restored_error_.to(bucket_.options()).reshape({-1}).clone();
    }
    if (restored_queries_.defined()) {
      fits(restored_queries_, q_memory_, "queries");
      q_memory_.copy_(restored_queries_.reshape({-1}));
    }
    restored_error_ = restored_queries_ = at::Tensor();
  }

  // The hook before start_iter: default_hooks._allreduce_fut divides, then sums.
  uint64_t allreduceBucket(const std::vector<at::Tensor>& out, const std::vector<at::Tensor>& memory) {
    bucket_.div_(comm_.size());
    allreduceUnlessEmpty(bucket_);
    for (size_t i = 0; i < out.size(); ++i) {
      out[i].copy_(views_[i]);
      memory[i].zero_();
    }
    return bitsOf(bucket_);
  }

  uint64_t compress() {
    at::Tensor before;
    if (options_.error_feedback) {
      if (error_.defined()) {
        bucket_.add_(error_);
      } else {
        error_ = at::zeros_like(bucket_);
      }
      before = bucket_.clone();
    }
    int64_t offset = 0;
    for (size_t i : uncompressed_) {
      uncompressed_memory_.narrow(0, offset, views_[i].numel()).copy_(views_[i].view({-1}));
      offset += views_[i].numel();
    }
    drawOrReuseQueries();
    for (auto& matrix : matrices_) at::bmm_out(matrix.p, matrix.m, matrix.q);

    allreduceUnlessEmpty(uncompressed_memory_);
    uncompressed_memory_.div_(comm_.size());
    offset = 0;
    for (size_t i : uncompressed_) {
      views_[i].copy_(uncompressed_memory_.narrow(0, offset, views_[i].numel()).view_as(views_[i]));
      offset += views_[i].numel();
    }

    allreduceUnlessEmpty(p_memory_);
    for (auto& matrix : matrices_) orthogonalizeAsTheHook(matrix.p, options_.orthogonalization_epsilon);
    for (auto& matrix : matrices_) at::bmm_out(matrix.q, matrix.m.transpose(1, 2), matrix.p);
    allreduceUnlessEmpty(q_memory_);
    q_memory_.div_(comm_.size());
    for (auto& matrix : matrices_) at::bmm_out(matrix.m, matrix.p, matrix.q.transpose(1, 2));

    if (options_.error_feedback) at::sub_out(error_, before, bucket_);
    queries_drawn_ = options_.warm_start;
    return bitsOf(uncompressed_memory_) + bitsOf(p_memory_) + bitsOf(q_memory_);
  }

  // The hook draws its seed in a torch.random.fork_rng block; a generator of our own is the same
  // as the default one after torch.manual_seed(seed).
  void drawOrReuseQueries() {
    if (queries_drawn_) {
      for (auto& matrix : matrices_) orthogonalizeAsTheHook(matrix.q, options_.orthogonalization_epsilon);
      return;
    }
    auto generator = at::detail::createCPUGenerator(seeds_.next());
    for (auto& matrix : matrices_) {
      matrix.q.copy_(at::randn(matrix.q.sizes(), generator, at::TensorOptions().dtype(bucket_.scalar_type())));
      orthogonalizeAsTheHook(matrix.q, options_.orthogonalization_epsilon);
    }
  }

  // Gloo can hang on empty tensors; the hook's all-reduce of nothing changes nothing.
  void allreduceUnlessEmpty(at::Tensor& flat) {
    if (flat.numel() > 0) comm_.allreduceSum(flat);
  }

  Communicator& comm_;
  const PowerSgdDdpOptions options_;
  const size_t tensors_;  // the model's parameters; 0 where the context does not say
  NumpyLegacyRandint seeds_;
  int64_t iter_ = 0;  // the hook's state.iter: one bucket, so one per call
  bool last_compressed_ = false;
  bool rebuilt_layout_ = false;        // the views follow DDP's rebuilt bucket
  std::vector<size_t> ready_order_;    // this rank's ready() calls during the first call
  std::vector<size_t> rebuilt_order_;  // the rebuilt bucket: rank 0's ready order, once agreed
  bool queries_drawn_ = false;         // q_memory_ holds the last averaged Q, for warm start
  at::Tensor bucket_;                  // the DDP bucket: every tensor back to back in bucket order
  std::vector<at::Tensor> views_;      // per tensor, in the caller's order: views into bucket_
  std::vector<size_t> uncompressed_;   // in bucket order
  std::vector<Matrix> matrices_;       // in the hook's order: grouped by shape
  at::Tensor uncompressed_memory_, p_memory_, q_memory_, error_;
  at::Tensor restored_error_, restored_queries_;  // from loadState(), applied once the buffers exist
};

std::unique_ptr<Reducer> makePowerSgdDdp(const ReducerContext& context) {
  const auto options = powerSgdDdpSettings().read(context.options.settings);
  if (options.random_seed > int64_t{0xFFFFFFFF}) {
    throw UserError("reducer.random_seed: " + std::to_string(options.random_seed) +
                    " is out of range; numpy's RandomState takes 0 to 4294967295");
  }
  // PowerSGDState refuses these: DDP rebuilds its bucket before the second step.
  if ((options.error_feedback || options.warm_start) && options.start_iter <= 1) {
    throw UserError("reducer.start_iter: " + std::to_string(options.start_iter) +
                    " is refused with reducer.error_feedback or reducer.warm_start on, as PyTorch's PowerSGDState "
                    "refuses it; give 2 or more");
  }
  return std::make_unique<PowerSgdDdpReducer>(context, options);
}

}  // namespace

ReducerSpec powerSgdDdpSpec() {
  ReducerSpec spec;
  spec.make = makePowerSgdDdp;
  spec.settings = powerSgdDdpSettings().specs();
  spec.supports_memory = false;  // the hook's error feedback is its own (reducer.error_feedback)
  // After start_iter, per call (its one bucket): P and Q of each compressed matrix, the other
  // tensors whole, all in float32. A sum over tensors, so the plan's buckets add up to it.
  spec.planned_bits = [](const ReducerOptions& options, const TensorShapes& shapes) {
    const auto settings = powerSgdDdpSettings().read(options.settings);
    uint64_t bits = 0;
    for (const auto& shape : shapes) {
      const auto [n, m, r] = powerSgdDdpMatrixOf(shape, settings.rank, settings.min_compression_rate);
      const int64_t elements = r == 0 ? c10::multiply_integers(shape) : (n + m) * r;
      bits += 8 * sizeof(float) * static_cast<uint64_t>(elements);
    }
    return bits;
  };
  return spec;
}

}  // namespace gcrun::reducers
