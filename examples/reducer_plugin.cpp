// A user's own reducer, added to gcrun as a plugin: build this file as a shared library against
// an installed gcrun (examples/CMakeLists.txt does) and run
//     gcrun experiment fashion-sgd --plugin libgcrun_int8_plugin.so --set reducer.name=int8-sum
// gcrun loads the library and calls gcrun_register() below, which adds "int8-sum" to the reducer
// registry like any built-in: `gcrun list reducers --plugin ...` shows it, and every key, granularity
// and error-feedback setting applies to it. It declares a setting of its own, reducer.int8_levels,
// which --set, --config, `gcrun show` and `gcrun list keys` then treat like a built-in key.
//
// int8-sum: 8-bit all-reduce with a scale shared by all workers, 4x less traffic than exact averaging.
// Per tensor, the workers first add up their max |g|, s = sum_r max|g_r| (one float per tensor),
// then each sends q_r = round(c g_r / s) as int8 with c = reducer.int8_levels, by default 127 - W. Since |g_r| <=
// max|g_r|, |sum_r c g_r / s| <= c, and rounding adds at most W/2, so the int8 sum cannot overflow for fewer than 127
// workers. Every worker applies s / c * sum_r q_r / W, and keeps its own rounding error g_r - s / c * q_r as memory.
#include <cstdint>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include <ATen/ATen.h>

#include "hyperparams/base/errors.h"
#include "hyperparams/settings.h"
#include "reducers/reducer.h"
#include "reducers/tensor_buffer.h"

namespace {

using gcrun::comm::Communicator;
using gcrun::reducers::Reducer;

// int8 holds sums up to 127; each worker's rounding can add 1/2 to it.
constexpr int kInt8Max = std::numeric_limits<int8_t>::max();
// A scale of zero means every worker's tensor is zero; this keeps c / s finite there.
constexpr double kSmallestScale = 1e-30;

struct Int8Options {
  int64_t int8_levels = 0;  // 0: 127 - workers
};

const gcrun::hyperparams::SettingsSchema<Int8Options>& settings() {
  static const auto schema = gcrun::hyperparams::SettingsSchema<Int8Options>().add(
      &Int8Options::int8_levels, "int8_levels", gcrun::hyperparams::integerAtLeast(0, " (0: 127 - workers)"),
      "int8 plugin: largest code a worker sends; at most 127 - workers, so that the sum cannot overflow.");
  return schema;
}

class Int8Reducer : public Reducer {
 public:
  Int8Reducer(Communicator& comm, const Int8Options& options)
      : comm_(comm), levels_(options.int8_levels > 0 ? options.int8_levels : kInt8Max - comm.size()) {
    if (levels_ < 1 || levels_ > kInt8Max - comm.size()) {
      throw gcrun::UserError("reducer.int8_levels: " + std::to_string(levels_) + " with " +
                             std::to_string(comm.size()) + " workers could overflow int8; use 1 to " +
                             std::to_string(kInt8Max - comm.size()) + " (fewer than 127 workers), or fp16");
    }
  }

  uint64_t reduce(const std::vector<at::Tensor>& send, const std::vector<at::Tensor>& out,
                  const std::vector<at::Tensor>& memory) override {
    if (send.empty()) return 0;
    if (scales_.numel() == 0) allocate(send);
    for (size_t i = 0; i < send.size(); ++i) scales_[i].copy_(send[i].abs().max());
    comm_.allreduceSum(scales_);
    // c / s per tensor: identical on every worker, since every worker has the same sums.
    const auto factors = (levels_ / scales_.to(at::kDouble).clamp_min(kSmallestScale)).cpu();
    const auto factor = factors.accessor<double, 1>();
    for (size_t i = 0; i < send.size(); ++i) {
      auto quantized = quantized_.slice(i);
      quantized.copy_((send[i].reshape({-1}) * factor[i]).round());
      // What this worker's message stands for, so that memory is its own rounding error.
      auto delivered = quantized.to(send[i].scalar_type()).div_(factor[i]).view(send[i].sizes());
      memory[i].copy_(send[i] - delivered);
    }
    comm_.allreduceSum(quantized_.flat());
    for (size_t i = 0; i < send.size(); ++i) {
      out[i].copy_(quantized_.slice(i).view(out[i].sizes()));
      out[i].div_(factor[i] * comm_.size());
    }
    return gcrun::reducers::bitsOf(scales_) + gcrun::reducers::bitsOf(quantized_.flat());
  }

  // Per-layer statistics: a tensor sends its float scale and a byte per element.
  std::vector<TensorCost> lastCosts() const override {
    std::vector<TensorCost> costs;
    for (size_t i = 0; i < quantized_.count(); ++i) {
      costs.push_back({8 * static_cast<uint64_t>(scales_.element_size() + quantized_.slice(i).numel()), 0});
    }
    return costs;
  }

 private:
  void allocate(const std::vector<at::Tensor>& like) {
    scales_ = at::zeros({static_cast<int64_t>(like.size())}, like.front().options());
    std::vector<at::Tensor> int8_like;
    for (const auto& t : like) int8_like.push_back(at::empty({t.numel()}, t.options().dtype(at::kChar)));
    quantized_ = gcrun::reducers::TensorBuffer(int8_like);
  }

  Communicator& comm_;
  const int64_t levels_;
  at::Tensor scales_;                        // per tensor: sum over workers of max |g|
  gcrun::reducers::TensorBuffer quantized_;  // every tensor's int8 message, one all-reduce
};

}  // namespace

extern "C" void gcrun_register(void) {
  gcrun::reducers::reducerRegistry().add(
      "int8-sum", "8-bit all-reduce with a shared per-tensor scale, 4x smaller messages (example plugin)",
      gcrun::reducers::ReducerSpec{[](const gcrun::reducers::ReducerContext& context) -> std::unique_ptr<Reducer> {
                                     return std::make_unique<Int8Reducer>(context.comm,
                                                                          settings().read(context.options.settings));
                                   },
                                   gcrun::CollectiveKind::all_reduce,
                                   settings().specs(),
                                   true,
                                   {gcrun::Granularity::layer, gcrun::Granularity::model, gcrun::Granularity::bucket},
                                   ""});
}
