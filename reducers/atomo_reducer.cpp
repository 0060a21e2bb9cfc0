#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>

#include <limits>
#include <stdexcept>
#include <string>
#include <tuple>

#include "reducers/builtin_reducers.h"
#include "reducers/shared_settings.h"
#include "reducers/tensor_buffer.h"

namespace gcrun::reducers {
namespace {

struct AtomoOptions {
  int64_t rank = 4;
};

const hyperparams::SettingsSchema<AtomoOptions>& atomoSettings() {
  static const auto schema = withRank(hyperparams::SettingsSchema<AtomoOptions>(), &AtomoOptions::rank);
  return schema;
}

constexpr int kMaxSamplingAttempts = 1000;

struct AtomShape {
  int64_t rows = 0, cols = 0, atoms = 0;
};

// The reference's reshape_to_2d, made total: an even-length vector is [n/2, 2]; a matrix, or a
// kernel whose trailing dims are all 1, is [shape0, shape1]; other kernels are
// [shape0 * shape1 / 2, rest]. Where the reference's view fails or squeezes below two dims
// (scalars, odd-length vectors, [1, 1] kernels, kernels with an odd shape0 * shape1), gcrun uses
// [shape0, rest], and [numel, 1] for a scalar or a vector.
AtomShape atomShape(const std::vector<int64_t>& sizes, int64_t rank) {
  AtomShape a;
  const int64_t numel = c10::multiply_integers(sizes);
  if (sizes.size() <= 1) {
    a.rows = numel % 2 == 0 ? numel / 2 : numel;
  } else {
    bool trailing_ones = true;
    for (size_t d = 2; d < sizes.size(); ++d) trailing_ones = trailing_ones && sizes[d] == 1;
    const int64_t leading = sizes[0] * sizes[1];
    a.rows = !trailing_ones && leading % 2 == 0 ? leading / 2 : sizes[0];
  }
  a.cols = numel / a.rows;
  a.atoms = std::min({rank, a.rows, a.cols});
  return a;
}

// A tensor's slot of the message: k atoms of u [rows], s and v [cols], whichever atoms the draws
// kept (the unused slots of a matrix of too few nonzero singular values carry zero atoms).
int64_t atomoSlotElements(const AtomShape& a) { return a.atoms * (a.rows + a.cols + 1); }

// The reference's AtomoReducer (powersgd.md 1.6; Wang et al.'s spectral Atomo), memory-off only
// (the reference fills memory with -1e7 to make that clear):
//  - each tensor is seen as a matrix (atomShape) and decomposed by SVD on the CPU;
//  - atom i is kept with probability p_i = min(1, rank * |s_i| / sum |s|); the whole vector of
//    independent Bernoulli draws is redrawn until exactly k = min(rank, n, m) atoms are kept (at most
//    1000 tries, then an error), so every message has the same size; kept atoms are rescaled to
//    s_i / p_i;
//  - one all-gather of every worker's packed (u [n, k], s [k], v [m, k]); every worker rebuilds all
//    the workers' matrices and averages them in rank order.
// Message: 32 * sum over tensors of k * (n + m + 1) bits (for ResNet-18 at rank 2, 1,235,042
// floats per step, as the reference).
// Each worker draws its own atoms, from a generator seeded with seed + worker rank, as the
// reference's torch.rand under train.py's per-worker seed. Cases where the reference crashes are
// defined instead: singular values below the SVD's numerical-rank tolerance
// (max s * max(n, m) * float eps) get p = 0 and k is capped at the count of the others, the unused
// slots carrying zero atoms; an all-zero matrix sends k zero atoms.
// Conditioning the draws on exactly k atoms keeps the estimate unbiased only when that does not
// change the inclusion probabilities (e.g. equal singular values); in general the kept atoms are
// rescaled by p_i rather than by their conditional inclusion probability, as in the reference.
// memory = send - this worker's own rescaled reconstruction, what its message stood for.
class AtomoReducer : public Reducer {
 public:
  AtomoReducer(const ReducerContext& context, const AtomoOptions& options)
      : comm_(context.comm),
        rank_(options.rank),
        generator_(at::detail::createCPUGenerator(context.seed + static_cast<uint64_t>(context.comm.rank()))) {}

  uint64_t reduce(const std::vector<at::Tensor>& send, const std::vector<at::Tensor>& out,
                  const std::vector<at::Tensor>& memory) override {
    if (!initialized_) allocate(send);

    for (size_t i = 0; i < send.size(); ++i) encode(send[i], i);
    for (size_t i = 0; i < send.size(); ++i) {
      auto error = memory[i];
      at::sub_out(error, send[i], decode(message_.flat(), i).view_as(send[i]));
    }

    const auto messages = comm_.allgather(message_.flat());
    for (size_t i = 0; i < out.size(); ++i) {
      out[i].zero_();
      for (const auto& m : messages) out[i].add_(decode(m, i).view_as(out[i]));
      out[i].div_(comm_.size());
    }
    return bitsOf(message_.flat());
  }

  // A tensor sends its own slot of the message: its atoms, the rank it is sent at.
  std::vector<TensorCost> lastCosts() const override {
    const auto element_bits = static_cast<uint64_t>(8 * message_.flat().element_size());
    std::vector<TensorCost> costs;
    for (size_t i = 0; i < message_.count(); ++i) {
      costs.push_back({element_bits * static_cast<uint64_t>(message_.slice(i).numel()), shapes_[i].atoms});
    }
    return costs;
  }

  void saveState(State& state) const override { state["generator"] = generator_.get_state().clone(); }

  void loadState(const State& state) override { generator_.set_state(stateEntry(state, "atomo", "generator")); }

 private:
  void allocate(const std::vector<at::Tensor>& like) {
    std::vector<at::Tensor> parts;
    int64_t total = 0;
    for (const auto& t : like) {
      const AtomShape a = atomShape(t.sizes().vec(), rank_);
      shapes_.push_back(a);
      offsets_.push_back(total);
      total += atomoSlotElements(a);
      parts.push_back(at::empty({atomoSlotElements(a)}, t.options()));
    }
    message_ = TensorBuffer(parts);
    initialized_ = true;
  }

  void encode(const at::Tensor& tensor, size_t i) {
    const AtomShape& a = shapes_[i];
    auto slot = message_.slice(i);
    slot.zero_();
    at::Tensor u, s, vh;
    std::tie(u, s, vh) = at::linalg_svd(tensor.reshape({a.rows, a.cols}).cpu(), /*full_matrices=*/false);
    const auto abs_s = s.abs();
    const double largest = abs_s.max().item<double>();
    if (largest == 0.0) return;  // an all-zero matrix: k zero atoms
    const double tolerance = largest * static_cast<double>(std::max(a.rows, a.cols)) *
                             static_cast<double>(std::numeric_limits<float>::epsilon());
    const auto significant = abs_s.gt(tolerance);
    const auto weights = abs_s * significant;
    const auto probabilities = (weights * (static_cast<double>(rank_) / weights.sum().item<double>())).clamp_max_(1.0);
    const int64_t wanted = std::min(a.atoms, significant.sum().item<int64_t>());

    at::Tensor kept;
    for (int attempt = 0;; ++attempt) {
      if (attempt == kMaxSamplingAttempts) {
        throw std::runtime_error("atomo: no draw kept exactly " + std::to_string(wanted) + " of the " +
                                 std::to_string(s.numel()) + " singular values of a " + std::to_string(a.rows) + "x" +
                                 std::to_string(a.cols) + " gradient in " + std::to_string(kMaxSamplingAttempts) +
                                 " tries; lower reducer.rank");
      }
      const auto noise = at::rand({s.numel()}, generator_, at::TensorOptions().dtype(probabilities.scalar_type()));
      kept = probabilities.gt(noise).nonzero().view({-1});
      if (kept.numel() == wanted) break;
    }
    const auto scaled = s.index_select(0, kept) / probabilities.index_select(0, kept);
    const auto device = slot.device();
    int64_t offset = 0;
    slot.narrow(0, offset, a.rows * a.atoms)
        .view({a.rows, a.atoms})
        .narrow(1, 0, wanted)
        .copy_(u.index_select(1, kept).to(device));
    offset += a.rows * a.atoms;
    slot.narrow(0, offset, a.atoms).narrow(0, 0, wanted).copy_(scaled.to(device));
    offset += a.atoms;
    slot.narrow(0, offset, a.cols * a.atoms)
        .view({a.cols, a.atoms})
        .narrow(1, 0, wanted)
        .copy_(vh.index_select(0, kept).t().to(device));
  }

  // Tensor i as message `m` stands for it: u diag(s) v^T, as an [n, m] matrix.
  at::Tensor decode(const at::Tensor& m, size_t i) const {
    const AtomShape& a = shapes_[i];
    const auto slot = m.narrow(0, offsets_[i], atomoSlotElements(a));
    const auto u = slot.narrow(0, 0, a.rows * a.atoms).view({a.rows, a.atoms});
    const auto s = slot.narrow(0, a.rows * a.atoms, a.atoms);
    const auto v = slot.narrow(0, a.rows * a.atoms + a.atoms, a.cols * a.atoms).view({a.cols, a.atoms});
    return at::matmul(u * s, v.t());
  }

  Communicator& comm_;
  const int64_t rank_;
  at::Generator generator_;
  bool initialized_ = false;
  std::vector<AtomShape> shapes_;
  std::vector<int64_t> offsets_;  // where tensor i's atoms start in a message
  TensorBuffer message_;          // this worker's packed atoms, tensor after tensor
};

}  // namespace

ReducerSpec atomoSpec() {
  const auto make = [](const ReducerContext& context) -> std::unique_ptr<Reducer> {
    return std::make_unique<AtomoReducer>(context, atomoSettings().read(context.options.settings));
  };
  ReducerSpec spec{make,
                   CollectiveKind::all_gather,
                   atomoSettings().specs(),
                   false,
                   {Granularity::layer, Granularity::model},
                   "AtomoReducer"};
  // The atoms are sampled, their count is not: every slot travels, in float32.
  spec.planned_bits = [](const ReducerOptions& options, const TensorShapes& shapes) {
    const int64_t rank = atomoSettings().read(options.settings).rank;
    uint64_t bits = 0;
    for (const auto& shape : shapes)
      bits += 8 * sizeof(float) * static_cast<uint64_t>(atomoSlotElements(atomShape(shape, rank)));
    return bits;
  };
  return spec;
}

}  // namespace gcrun::reducers
