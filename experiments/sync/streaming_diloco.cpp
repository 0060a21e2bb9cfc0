#include "experiments/sync/streaming_diloco.h"

#include <map>
#include <memory>
#include <stdexcept>
#include <utility>

#include <torch/torch.h>

#include "experiments/sync/background_exchange.h"
#include "experiments/sync/global_model_sync.h"
#include "experiments/sync/global_slice.h"
#include "experiments/sync/gradient_exchange.h"
#include "experiments/sync/outer_sgd.h"
#include "experiments/sync/reducer_state.h"
#include "experiments/sync/replicas.h"
#include "experiments/sync/sync_settings.h"
#include "hyperparams/base/errors.h"
#include "hyperparams/base/sync_schedule.h"
#include "reducers/comm/collective_step.h"

namespace gcrun::experiments {

std::vector<std::vector<size_t>> streamingFragments(const std::vector<std::string>& names, int64_t fragments) {
  std::map<std::string, size_t> module_of;
  std::vector<size_t> module_index;
  for (const auto& name : names) {
    const auto dot = name.rfind('.');
    const std::string module = dot == std::string::npos ? "" : name.substr(0, dot);
    module_index.push_back(module_of.emplace(module, module_of.size()).first->second);
  }
  if (static_cast<int64_t>(module_of.size()) < fragments) {
    throw UserError("sync.fragments = " + std::to_string(fragments) + ": at most the model's " +
                    std::to_string(module_of.size()) +
                    " modules (parameters grouped by their name up to the last '.')");
  }
  std::vector<std::vector<size_t>> groups(static_cast<size_t>(fragments));
  for (size_t i = 0; i < names.size(); ++i) groups[module_index[i] % groups.size()].push_back(i);
  return groups;
}

std::optional<size_t> streamingSender(int64_t step, int64_t every, int64_t fragments) {
  for (int64_t p = 0; p < fragments; ++p) {
    if (step % every == sendOffset(p, fragments, every)) return static_cast<size_t>(p);
  }
  return std::nullopt;
}

namespace {

struct StreamingOptions {
  int64_t every = 32;
  int64_t fragments = 4;
  int64_t delay = 1;
  double mix_alpha = 0.5;
  double outer_learning_rate = 0.7;
  double outer_momentum = 0.9;
  bool outer_nesterov = true;
  bool drift = true;
};

const hyperparams::SettingsSchema<StreamingOptions>& streamingSchema() {
  using hyperparams::SettingsSchema;
  static const auto schema =
      withOuterSgd(
          withDrift(withPeriod(SettingsSchema<StreamingOptions>(), &StreamingOptions::every), &StreamingOptions::drift))
          .add(&StreamingOptions::fragments, "fragments", hyperparams::integerAtLeast(1),
               "streaming-diloco: F, the fragments the model is split into (modules strided), each synced once "
               "per sync.every steps at a step of its own.")
          .add(&StreamingOptions::delay, "delay", hyperparams::integerAtLeast(0),
               "streaming-diloco: τ, the steps between a fragment's send and the application of its result "
               "(below sync.every / sync.fragments).")
          .add(&StreamingOptions::mix_alpha, "mix_alpha", hyperparams::numberFromTo(0, 1),
               "streaming-diloco: α; an applied fragment becomes α·local + (1 − α)·global.");
  return schema;
}

// The schedule's limits beyond each key's own range: every fragment sends at a step of its own,
// and its result lands before its next send.
void checkSchedule(const StreamingOptions& options) {
  if (options.fragments > options.every) {
    throw UserError("sync.fragments = " + std::to_string(options.fragments) + ": at most sync.every (" +
                    std::to_string(options.every) + "), so that each fragment sends at a step of its own");
  }
  const int64_t spacing = options.every / options.fragments;
  if (options.delay >= spacing) {
    throw UserError("sync.delay = " + std::to_string(options.delay) + ": below sync.every / sync.fragments (" +
                    std::to_string(spacing) + "), so that a fragment's result lands before its next send");
  }
}

// Fragment p of F every H steps at its sendOffset, applied tau steps later; at tau >= 1 its sends
// run behind the steps in between.
SyncSchedule streamingSchedule(const StreamingOptions& options) {
  auto schedule = periodicSchedule("streaming-diloco", options.every);
  schedule.fragments = options.fragments;
  schedule.delay = options.delay;
  schedule.overlapped = true;
  return schedule;
}

template <class T>
std::vector<T> pick(const std::vector<T>& all, const std::vector<size_t>& indices) {
  std::vector<T> picked;
  for (size_t i : indices) picked.push_back(all[i]);
  return picked;
}

// Zeroed tensors laid out in storage as `tensors` are (the same sizes, strides and offsets, in a
// storage of their own per storage of theirs): a reducer that all-reduces tensors lying back to
// back in place does so for these exactly when it does for `tensors`, so the sums run alike.
std::vector<at::Tensor> zerosLaidOutAs(const std::vector<at::Tensor>& tensors) {
  std::map<const void*, at::Tensor> storages;
  std::vector<at::Tensor> zeros;
  for (const auto& t : tensors) {
    auto& storage = storages[t.storage().unsafeGetStorageImpl()];
    if (!storage.defined()) {
      storage = torch::zeros({static_cast<int64_t>(t.storage().nbytes()) / t.element_size()}, t.options());
    }
    zeros.push_back(storage.as_strided(t.sizes(), t.strides(), t.storage_offset()));
  }
  return zeros;
}

std::vector<reducers::ParameterInfo> parameterInfos(const SyncContext& context, const std::vector<size_t>& indices) {
  std::vector<reducers::ParameterInfo> parameters;
  for (size_t i : indices) parameters.push_back({context.names[i], context.params[i].sizes().vec()});
  return parameters;
}

// A fragment's reducer: over `channel` (a second group, for exchanges on a thread of their own)
// when there is one, over the worker's communicator otherwise.
std::unique_ptr<reducers::Reducer> fragmentReducer(const SyncContext& context, const std::vector<size_t>& indices,
                                                   comm::Communicator* channel) {
  if (channel) return context.make_reducer_over(*channel, parameterInfos(context, indices));
  return context.make_reducer(parameterInfos(context, indices));
}

// One fragment: a slice of the model synced as diloco syncs the whole model, through a reducer of
// its own (reducers keep per-tensor state by position), and the averaged Δ of its last send held
// back until it is applied. Its send goes from, and its average comes back into, buffers of its own
// (in_flight): the trainer's gradient buffers are overwritten by the steps its exchange overlaps.
struct Fragment {
  Fragment(const SyncContext& context, const std::vector<size_t>& indices, const std::vector<at::Tensor>& global,
           const OuterSgdOptions& outer, std::string prefix, comm::Communicator* channel,
           const std::vector<at::Tensor>& in_flight_all)
      : indices(indices),
        prefix(std::move(prefix)),
        reducer(fragmentReducer(context, indices, channel)),
        slice(pick(context.names, indices), pick(context.params, indices), pick(global, indices),
              pick(context.buffers.gradients, indices), pick(context.buffers.memories, indices), *reducer, outer),
        in_flight(pick(in_flight_all, indices)) {}

  const std::vector<size_t> indices;
  const std::string prefix;  // of its checkpoint entries
  const std::unique_ptr<reducers::Reducer> reducer;
  GlobalSlice slice;
  const std::vector<at::Tensor> in_flight;  // the averaged Δ of its last send, until applied
  int64_t applies_at = kNone;               // the step after which in_flight is applied
  uint64_t bits = 0;                        // what its last exchange sent, once it is done
  // What every exchange of it sent so far, learnt from its first one in this process; an
  // exchange in the background reports these at its sending step.
  std::optional<uint64_t> known_bits;

  static constexpr int64_t kNone = -1;
};

class StreamingDiloco : public GlobalModelSync {
 public:
  explicit StreamingDiloco(const SyncContext& context)
      : StreamingDiloco(context, streamingSchema().read(context.config.sync.settings)) {}

  // A sample reads the memories and the reducer's costs, which an exchange in flight writes.
  std::optional<SyncSample> sample() const override {
    settle();
    return sampleOf(exchange_, memories_, lossless_, error_feedback_);
  }
  LayerSample layerSample() const override {
    settle();
    return layerSampleOf(exchange_, memories_, lossless_, lastCosts());
  }

  void saveState(TensorMap& state) const override;
  bool checksEntry(const std::string& name) const override {
    for (const auto& f : fragments_) {
      if (isReducerEntry(name, f->prefix)) return true;
    }
    return false;
  }
  // θ_g and each fragment's outer SGD, what it has in flight (an average) and when it lands; the
  // fragments' error feedback and reducers are each worker's own.
  bool sharedEntry(const std::string& name) const override {
    if (name.rfind(kPrefix, 0) != 0 || checksEntry(name)) return false;
    for (const auto& f : fragments_) {
      if (name.rfind(f->prefix + "memory/", 0) == 0) return false;
    }
    return true;
  }
  void loadState(const TensorMap& state) override;

 private:
  static constexpr const char* kPrefix = "streaming-diloco/";

  StreamingDiloco(const SyncContext& context, const StreamingOptions& options)
      : GlobalModelSync(context, reducerExchangeOptions(context), options.every, options.drift),
        options_(options),
        error_feedback_(context.config.optimizer.memory),
        lossless_(context.lossless_reducer),
        names_(context.names),
        memories_(context.buffers.memories),
        reducer_name_(context.config.reducer.name),
        channel_(channelOf(context, options)) {
    const auto groups = streamingFragments(names_, options_.fragments);
    checkSchedule(options_);
    const auto in_flight_all = zerosLaidOutAs(context.buffers.gradients);
    for (size_t p = 0; p < groups.size(); ++p) {
      fragments_.push_back(std::make_unique<Fragment>(context, groups[p], global_, outerSgdOf(options_),
                                                      kPrefix + std::string("fragment") + std::to_string(p) + "/",
                                                      channel_.get(), in_flight_all));
    }
    if (channel_) background_ = std::make_unique<BackgroundExchange>();
  }

  // The second group the fragments' exchanges run on, in the background, while the worker computes
  // its next τ steps; none at τ = 0 (nothing to hide) or where the worker cannot make one.
  static std::unique_ptr<comm::Communicator> channelOf(const SyncContext& context, const StreamingOptions& options) {
    if (options.delay == 0 || !context.make_reducer_over) return nullptr;
    return context.comm.sibling("streaming-diloco");
  }

  bool sendsAfter(int64_t step) const override {
    return streamingSender(step, options_.every, options_.fragments).has_value();
  }

  // The sending fragment's pseudo-gradients through its reducer, as diloco sends the whole model,
  // their average kept in flight until step + τ. The exchange runs in the background until then
  // when the fragment's bits are known (after its first exchange, which blocks, as do all at
  // τ = 0 and without a second group). Returns the bits sent.
  uint64_t outerStep(int64_t step) override {
    last_sender_ = streamingSender(step, options_.every, options_.fragments);
    Fragment& f = *fragments_[*last_sender_];
    f.applies_at = step + options_.delay;
    const auto* sends = &f.slice.preparePseudoGradients(lossless_, error_feedback_, f.in_flight);
    auto exchange = [&f, sends] {
      torch::NoGradGuard no_grad;  // a thread's own setting
      f.bits = f.reducer->reduce(*sends, f.in_flight, f.slice.memories);
    };
    if (!background_ || !f.known_bits) {
      exchange();
      finish(f);
      return f.bits;
    }
    background_->start([exchange, step] {
      const comm::CollectiveStepScope traced_as(step);  // a trace's background collectives of `step`
      exchange();
    });
    in_background_ = &f;
    return *f.known_bits;
  }

  // Waits for the exchange in the background, if any; its failure is rethrown here.
  void settle() const {
    if (background_) background_->wait();
  }

  // After a fragment's exchange: its average checked, and its bits the same as every earlier one's
  // (those its sending step reported).
  void finish(Fragment& f) const {
    f.slice.checkAveraged(f.in_flight);
    if (f.known_bits && *f.known_bits != f.bits) {
      throw std::runtime_error("streaming-diloco: reducer " + reducer_name_ + " sent " + std::to_string(f.bits) +
                               " bits for a fragment whose earlier sends were " + std::to_string(*f.known_bits) +
                               " bits; an exchange in the background reports its bits as it starts, so it needs "
                               "them the same at every send (sync.delay: 0 exchanges without overlap)");
    }
    f.known_bits = f.bits;
  }

  // The fragments whose result lands at `step`: the outer step on their part of θ_g, and the
  // worker's part mixed with it: θ + (1 − α)(θ_g − θ) = α·θ + (1 − α)·θ_g, exactly θ_g at α = 0.
  void afterSync(int64_t step) override {
    torch::NoGradGuard no_grad;
    for (auto& f : fragments_) {
      if (f->applies_at != step) continue;
      if (in_background_ == f.get()) {
        settle();
        finish(*std::exchange(in_background_, nullptr));
      }
      f->slice.outerStep(f->in_flight);
      for (size_t k = 0; k < f->slice.params.size(); ++k) {
        f->slice.params[k].detach().lerp_(f->slice.global[k], 1.0 - options_.mix_alpha);
      }
      f->applies_at = Fragment::kNone;
    }
  }

  // A fragment in flight at the saved step was sent at most τ steps before it and is applied after
  // it: its step of application lies in (step, step + τ]; kNone when none is in flight.
  int64_t savedApplication(const TensorMap& state, const std::string& name) const {
    if (stateEntry(state, "checkpoint", name).item<int64_t>() == Fragment::kNone) return Fragment::kNone;
    const int64_t step = savedStep(state);
    return checkpointCount(state, name, step + 1, step + options_.delay);
  }

  // Per parameter, what the last step's send cost: the sending fragment's reducer's, nothing for
  // the other parameters; empty when no fragment sent or its reducer does not say.
  std::vector<reducers::Reducer::TensorCost> lastCosts() const {
    if (!lastSync()) return {};
    const auto& f = *fragments_[*last_sender_];
    const auto costs = f.reducer->lastCosts();
    if (costs.empty()) return {};
    std::vector<reducers::Reducer::TensorCost> all(params_.size());
    for (size_t k = 0; k < f.indices.size(); ++k) all[f.indices[k]] = costs[k];
    return all;
  }

  const StreamingOptions options_;
  const bool error_feedback_;
  const bool lossless_;
  const std::vector<std::string>& names_;
  const std::vector<at::Tensor>& memories_;
  const std::string reducer_name_;
  // Declared in the order they depend on each other: the fragments' reducers talk over the
  // channel, and the background thread, which runs their exchanges, goes first.
  std::unique_ptr<comm::Communicator> channel_;
  std::vector<std::unique_ptr<Fragment>> fragments_;
  std::unique_ptr<BackgroundExchange> background_;  // with a channel
  Fragment* in_background_ = nullptr;               // whose exchange runs there, until applied
  std::optional<size_t> last_sender_;               // the fragment that sent at the last sync
};

void StreamingDiloco::saveState(TensorMap& state) const {
  settle();  // what is in flight is saved once it is done
  for (size_t i = 0; i < names_.size(); ++i) state[kPrefix + std::string("global/") + names_[i]] = global_[i];
  for (const auto& f : fragments_) {
    const GlobalSlice& slice = f->slice;
    saveReducerState(state, slice.names, slice.memories, *f->reducer, f->prefix);
    slice.outer_sgd.saveState(state, f->prefix);
    for (size_t k = 0; k < slice.names.size(); ++k) state[f->prefix + "in_flight/" + slice.names[k]] = f->in_flight[k];
    state[f->prefix + "applies_at"] = torch::tensor(f->applies_at, torch::kInt64);
  }
}

void StreamingDiloco::loadState(const TensorMap& state) {
  torch::NoGradGuard no_grad;
  for (size_t i = 0; i < names_.size(); ++i) global_[i].copy_(state.at(kPrefix + std::string("global/") + names_[i]));
  for (auto& f : fragments_) {
    GlobalSlice& slice = f->slice;
    loadReducerState(state, slice.names, slice.memories, *f->reducer, f->prefix);
    slice.outer_sgd.loadState(state, f->prefix);
    for (size_t k = 0; k < slice.names.size(); ++k) {
      f->in_flight[k].copy_(state.at(f->prefix + "in_flight/" + slice.names[k]));
    }
    f->applies_at = savedApplication(state, f->prefix + "applies_at");
  }
}

}  // namespace

SynchronizerSpec streamingDilocoSpec() {
  // The schedule's limits refuse a run when it is resolved, before anything is written; the
  // model's (its modules) when the strategy is built.
  return {
      [](const SyncContext& c) { return std::make_unique<StreamingDiloco>(c); }, streamingSchema().specs(), true,
      [](const ExperimentConfig& config) { checkSchedule(streamingSchema().read(config.sync.settings)); },
      // θ_g, the outer momentum, the fragments' averaged deltas in flight, the replicas' mean.
      [](const ExperimentConfig&, const tasks::ModelSize& model) { return parameterCopies(4, model); },
      [](const ExperimentConfig& config) { return streamingSchedule(streamingSchema().read(config.sync.settings)); },
      // Each fragment's pseudo-gradient through a reducer like the trainer's, the modules strided.
      [](const ExperimentConfig&) {
        return SyncPlan{SyncPlan::Exchange::reducer, true, streamingFragments};
      }};
}

}  // namespace gcrun::experiments
