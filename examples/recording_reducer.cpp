// A reducer that wraps another one: `recording` delegates every call to the reducer named by
// reducer.inner (any registered one, looked up in the registry like reducer.name) and records,
// per parameter, what passes through it. Build it against an installed gcrun (examples/CMakeLists.txt)
// and run
//     gcrun experiment fashion-powersgd-rank2 --plugin libgcrun_recording_plugin.so \
//         --set reducer.name=recording --set reducer.inner=powersgd --set reducer.record_to=runs
// Each rank writes <reducer.record_to>/recording-rank<r>.tsv when the reducer is destroyed: per
// parameter (by its name in the model) the calls, the bytes of its float gradient and the mean
// norm of what this worker sent; then the bytes the inner reducer actually put on the wire.
//
// The aliasing rule (reducers/reducer.h) is what a wrapper must get right:
//  - memory[i] may be send[i] itself, and the inner reducer may use send[i] as scratch space, so
//    whatever the wrapper wants of send[i] it measures BEFORE handing the list on; after the
//    inner reduce(), send[i] may hold scratch or this worker's new memory.
//  - ready(i, send) may start the inner reducer's collectives on send[i] during backward (exact
//    averaging all-reduces it in place), so send[i] is measured in ready() before forwarding it,
//    and reduce() measures only the tensors that no ready() call announced.
//  - out, memory and the returned bits are the inner reducer's, untouched, so training with
//    `recording` around a reducer is training with that reducer.
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include <ATen/ATen.h>

#include "hyperparams/base/errors.h"
#include "hyperparams/settings.h"
#include "reducers/reducer.h"

namespace {

using gcrun::reducers::Reducer;
using gcrun::reducers::ReducerContext;

struct RecordingOptions {
  std::string inner = "exact";
  std::string record_to = ".";
};

const gcrun::hyperparams::SettingsSchema<RecordingOptions>& settings() {
  static const auto schema =
      gcrun::hyperparams::SettingsSchema<RecordingOptions>()
          .add(&RecordingOptions::inner, "inner", gcrun::hyperparams::name(),
               "recording plugin: the reducer it delegates to (a name from `gcrun list reducers`).")
          .add(&RecordingOptions::record_to, "record_to", gcrun::hyperparams::name(),
               "recording plugin: folder of the per-rank tables recording-rank<r>.tsv.");
  return schema;
}

// The inner reducer's registry entry; a bad name is the user's, reported with the key.
const gcrun::Registry<gcrun::reducers::ReducerSpec>::Entry& innerEntry(const std::string& name) {
  auto& registry = gcrun::reducers::reducerRegistry();
  if (name == "recording" || !registry.contains(name)) {
    throw gcrun::UserError("reducer.inner: '" + name + "' is not a reducer it can wrap; use one of " +
                           registry.knownNames() + " except recording");
  }
  const auto& entry = registry.at(name);
  if (!entry.factory.supports_memory) {
    throw gcrun::UserError("reducer.inner: '" + name +
                           "' takes no error feedback, which recording cannot check; wrap another reducer");
  }
  return entry;
}

class RecordingReducer : public Reducer {
 public:
  RecordingReducer(const ReducerContext& context, const RecordingOptions& options)
      : inner_name_(options.inner),
        record_to_(options.record_to),
        rank_(context.comm.rank()),
        parameters_(context.parameters),
        inner_options_(context.options) {
    inner_options_.name = inner_name_;
    // The inner reducer keeps a reference to its options: they live as long as this wrapper.
    inner_ = innerEntry(inner_name_)
                 .factory.make(ReducerContext{context.comm, inner_options_, context.seed, context.parameters});
  }

  ~RecordingReducer() override {
    std::error_code ignored;
    std::filesystem::create_directories(record_to_, ignored);
    std::ofstream out(record_to_ + "/recording-rank" + std::to_string(rank_) + ".tsv");
    out << "parameter\tshape\tcalls\tgradient_bytes\tmean_send_norm\n";
    for (size_t i = 0; i < records_.size(); ++i) {
      const auto& r = records_[i];
      out << nameOf(i) << "\t" << shapeOf(i) << "\t" << r.calls << "\t" << r.bytes << "\t"
          << (r.calls ? r.norm_sum / static_cast<double>(r.calls) : 0.0) << "\n";
    }
    out << "# " << inner_name_ << " sent " << bits_ / 8 << " bytes in " << steps_ << " calls\n";
  }

  void ready(size_t index, const std::vector<at::Tensor>& send) override {
    prepare(send.size());
    measure(index, send[index]);
    inner_->ready(index, send);
  }

  uint64_t reduce(const std::vector<at::Tensor>& send, const std::vector<at::Tensor>& out,
                  const std::vector<at::Tensor>& memory) override {
    prepare(send.size());
    for (size_t i = 0; i < send.size(); ++i) {
      if (!measured_[i]) measure(i, send[i]);
    }
    std::fill(measured_.begin(), measured_.end(), 0);
    const uint64_t bits = inner_->reduce(send, out, memory);
    bits_ += bits;
    ++steps_;
    return bits;
  }

  // What the inner reducer's messages cost, as it counts them.
  std::vector<TensorCost> lastCosts() const override { return inner_->lastCosts(); }

  // Checkpoints hold the inner reducer's state; the records start afresh after a resume.
  void saveState(State& state) const override { inner_->saveState(state); }
  void loadState(const State& state) override { inner_->loadState(state); }

 private:
  struct Record {
    int64_t calls = 0;
    uint64_t bytes = 0;
    double norm_sum = 0;
  };

  void prepare(size_t tensors) {
    if (records_.size() == tensors) return;
    records_.assign(tensors, Record{});
    measured_.assign(tensors, 0);
  }

  void measure(size_t i, const at::Tensor& send) {
    auto& r = records_[i];
    ++r.calls;
    r.bytes += gcrun::reducers::bitsOf(send) / 8;
    r.norm_sum += send.norm().item<double>();
    measured_[i] = 1;
  }

  // The model's name for tensor i; the list matches reduce()'s only at granularity layer.
  std::string nameOf(size_t i) const {
    return parameters_.size() == records_.size() ? parameters_[i].name : "tensor" + std::to_string(i);
  }

  std::string shapeOf(size_t i) const {
    if (parameters_.size() != records_.size()) return "?";
    std::string shape;
    for (auto size : parameters_[i].shape) shape += (shape.empty() ? "" : "x") + std::to_string(size);
    return shape.empty() ? "scalar" : shape;
  }

  const std::string inner_name_, record_to_;
  const int rank_;
  const std::vector<gcrun::reducers::ParameterInfo> parameters_;
  gcrun::ReducerOptions inner_options_;
  std::unique_ptr<Reducer> inner_;
  std::vector<Record> records_;
  std::vector<char> measured_;  // this step's tensors already measured by ready()
  uint64_t bits_ = 0;
  int64_t steps_ = 0;
};

}  // namespace

extern "C" void gcrun_register(void) {
  gcrun::reducers::reducerRegistry().add(
      "recording", "delegates to reducer.inner and records per parameter what passes through (example plugin)",
      gcrun::reducers::ReducerSpec{[](const ReducerContext& context) -> std::unique_ptr<Reducer> {
                                     return std::make_unique<RecordingReducer>(
                                         context, settings().read(context.options.settings));
                                   },
                                   std::nullopt,  // reducer.inner's
                                   settings().specs(),
                                   true,
                                   // Names need the model's tensors as they are.
                                   {gcrun::Granularity::layer},
                                   ""});
}
