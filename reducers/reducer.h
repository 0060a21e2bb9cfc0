#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <ATen/core/Tensor.h>

#include "hyperparams/base/baseline.h"
#include "hyperparams/base/collective.h"
#include "hyperparams/base/registry.h"
#include "hyperparams/base/tensor_map.h"
#include "hyperparams/config.h"
#include "hyperparams/settings.h"
#include "reducers/comm/communicator.h"

namespace torch::nn {
class Module;
}

namespace gcrun::reducers {

// Reducers talk to the other workers through the communicator.
using comm::Communicator;
using comm::PendingCollective;

// A Reducer turns every worker's gradients into one shared update: exact averaging, or a compressor
// with its collectives. It follows the reference's reduce(grad_in, grad_out, memory_out) -> bits.
//
// Contract:
//  - Every rank calls reduce() at the same steps with tensors of the same shapes, dtypes and order
//    (the model's parameters in registration order); the list is the same at every call.
//  - send[i] is what this worker contributes (gradient, plus error-feedback memory when that is
//    on). The reducer may use it as scratch space. memory[i] may be send[i] itself (the trainer
//    accumulates error feedback in place), so a reducer reads what it needs of send[i] before it
//    writes memory[i]. So does a wrapper that hands its arguments on to another reducer: what it
//    wants of send[i] it copies or measures before forwarding ready(i) or reduce(), which may
//    overwrite send[i] in place (scratch, collectives, memory): examples/recording_reducer.cpp.
//  - out[i] receives the update every worker applies: identical on every rank. For a lossless
//    reducer (ReducerSpec::lossless) out[i] may be send[i] itself: the trainer sends its gradients
//    and takes the average in place. The memory it then passes is zero, and the reducer need not
//    write it.
//  - memory[i] receives what this worker's contribution lost: send[i] minus what the reducer
//    delivered for it (for exact averaging, zero). The trainer owns these buffers and adds them to
//    the next step's gradient when error feedback is on; a reducer must write every element.
//  - Returns the bits this worker sent in this call, counted from the messages it put on the wire.
// Reducers are stateful (warm-start queries, random generators) and not thread-safe.
class Reducer {
 public:
  virtual ~Reducer() = default;
  virtual uint64_t reduce(const std::vector<at::Tensor>& send, const std::vector<at::Tensor>& out,
                          const std::vector<at::Tensor>& memory) = 0;

  // Overlap with backward, optional. Before a reduce() the caller may call ready(i, send), at most
  // once per i, as soon as send[i] holds its final value (the trainer does so during backward),
  // with the list reduce() will get. A reducer may start collectives here, in an order that does not depend on
  // the order of the calls (it can differ between ranks); reduce() still delivers the whole
  // contract. The default leaves everything to reduce().
  virtual void ready(size_t /*index*/, const std::vector<at::Tensor>& /*send*/) {}

  // Checkpoints: whatever reduce() reads besides its arguments (warm-start queries, random
  // generators, step counters), as named tensors; each rank saves and restores its own. After
  // loadState() the next reduce() must return what it would have returned in the saved run.
  // Stateless reducers keep these defaults; loadState() throws std::invalid_argument naming a
  // missing or mis-shaped entry.
  using State = TensorMap;
  virtual void saveState(State& /*state*/) const {}
  virtual void loadState(const State& /*state*/) {}

  // Per-layer statistics (output.layer_stats_every_steps, layers.csv), optional. After a reduce(),
  // what each of its tensors cost: one entry per tensor, in order, whose bits add up to exactly what
  // that reduce() returned (a message shared by several tensors is split between them, e.g. by
  // their elements). Called only on the steps that log layer statistics, so a reducer may work it
  // out then from what it kept of the last call. The default, empty, means unknown: layers.csv
  // leaves those cells blank.
  struct TensorCost {
    uint64_t bits = 0;
    int64_t rank = 0;  // the rank of a low-rank approximation; 0 when the tensor was not factorised
  };
  virtual std::vector<TensorCost> lastCosts() const { return {}; }
};

// Tensor shapes, for what a reducer sends without its tensors (ReducerSpec::planned_bits).
using TensorShapes = std::vector<std::vector<int64_t>>;

// One of the model's parameters as a reducer sees it: named as torch::nn::Module::named_parameters()
// names it ("layer1.0.conv1.weight"), and its shape.
struct ParameterInfo {
  std::string name;
  std::vector<int64_t> shape;
};

// What a factory gets. options.settings holds the values given for the reducer.* settings (those a
// reducer declares in its ReducerSpec: it reads them with its SettingsSchema, whose defaults fill
// in the rest). The seed is the same on every worker, so random choices (PowerSGD's initial query,
// random-k indices) agree without communication.
// `parameters` lists the model's parameters in registration order: at reducer.granularity layer,
// reduce()'s tensor i is parameters[i], so a layer-aware reducer can treat tensors by name (skip
// the first conv, say). At model and bucket granularity reduce() gets one padded square per group
// instead (reducers/granularity.h); a reducer that needs names accepts only layer. Training and
// `gcrun bench` fill it in; unit tests that build a reducer without a model may leave it empty.
struct ReducerContext {
  Communicator& comm;
  const ReducerOptions& options;
  uint64_t seed;
  std::vector<ParameterInfo> parameters;
};

// `model`'s parameters, for ReducerContext::parameters.
std::vector<ParameterInfo> parametersOf(const torch::nn::Module& model);

// How a reducer is registered: its factory and what gcrun must know about it without building one.
struct ReducerSpec {
  std::function<std::unique_ptr<Reducer>(const ReducerContext&)> make;
  // all_reduce (summable messages) or all_gather (each worker decompresses every message); nothing
  // when it depends on the settings (a wrapper of another reducer).
  std::optional<CollectiveKind> collective = CollectiveKind::all_reduce;
  // The settings it reads, keys reducer.<name> once the spec is registered (the key table is
  // computed from the registries: experiments::configKeys()): `--set`, `gcrun show`,
  // `gcrun list keys|reducers` and the reference's aliases come from here.
  std::vector<hyperparams::SettingSpec> settings;
  // False for reducers that are only meaningful without error feedback (the reference's signum
  // and atomo) or keep their own (powersgd-ddp): a config with optimizer.memory on is refused.
  bool supports_memory = true;
  // The reducer.granularity values it accepts; others are refused before training.
  std::vector<Granularity> granularities = {Granularity::layer};
  // The reference's class name (optimizer_reducer: RankKReducer), if it has one.
  std::string reference_name;
  // Delivers the exact average, so the memory it leaves is always zero (not worth logging), and
  // the trainer hands it the gradients as both send and out (see Reducer's contract).
  bool lossless = false;
  // Whether the report and gcrun predict compare the other reducers with this one, and as what.
  Baseline baseline = Baseline::none;
  // False for unbiased stochastic quantizers whose error ||C(x) - x|| may exceed ||x|| (QSGD at few
  // levels, TernGrad): error feedback assumes a contractive compressor, and with one that is not the
  // memory can grow without bound (QSGD at 15 levels diverged within a few syncs on the GPT:
  // bench/qsgd-finding.md). A run with optimizer.memory on is warned, not refused: at many levels
  // QSGD's error is small.
  bool contractive = true;
  // What one worker's reduce() sends per call, in bits, for float32 tensors of these shapes at
  // reducer.granularity layer, nothing allocated: after any warm-up (powersgd's start_iter), and
  // averaged over a cycle of calls whose messages alternate (unbiased-rank's P and Q). It must come
  // from the function the reducer's reduce() or lastCosts() counts with, so that `gcrun plan`
  // (reducers/planned_bits.h) cannot drift from what a run sends. Empty: the reducer cannot be
  // planned; its spec says why.
  std::function<uint64_t(const ReducerOptions&, const TensorShapes&)> planned_bits = nullptr;
  // The type its summed messages travel in (fp16: float16); float32 for the others, whose
  // messages are float32 sums or gathered bytes.
  DataType summed_in = DataType::float32;
  // True when planned_bits is not the sum of its parts over tensors (one message for the whole
  // gradient: global-topk's k of all elements, a message packed and padded as a whole): a plan of
  // a step the run reduces in one call sizes all the step's tensors at once.
  bool whole_step = false;
};

// The reducers gcrun knows; the built-ins are registered on first use. User code adds its own with
// reducerRegistry().add(...) before the experiment starts (plugins: when they are loaded).
Registry<ReducerSpec>& reducerRegistry();

// 8 * numel * element size: what a tensor costs on the wire.
inline uint64_t bitsOf(const at::Tensor& t) {
  return 8ull * static_cast<uint64_t>(t.numel()) * static_cast<uint64_t>(t.element_size());
}

}  // namespace gcrun::reducers
