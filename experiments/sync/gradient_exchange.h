#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include <ATen/core/Tensor.h>

#include "reducers/reducer.h"

namespace gcrun::experiments {

class GradientReadyHooks;

// A gradient with a nan or inf; what() names it ("the local gradient of 'w' is not finite ...").
class NonFiniteGradient : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// The parameters' gradients and error feedback (memories), zeroed, as views of two flat buffers in
// reverse parameter order (the order backward produces gradients), so that the exact reducer's
// buckets are contiguous ranges it all-reduces in place. Parameters of mixed types get one tensor
// each and undefined flat buffers. Made first, then handed to the exchange and the optimizer.
struct GradientBuffers {
  explicit GradientBuffers(const std::vector<at::Tensor>& params);

  at::Tensor gradient_flat, memory_flat;
  std::vector<at::Tensor> gradients, memories;
};

// One worker's side of the reduce, overlapped with backward where it can be, over `buffers`: the
// parameters' .grad become its gradients. The error feedback is also what this worker sends: each
// gradient is added into it in place, and the reducer overwrites it with what the send lost. A
// lossless reducer (exact averaging) loses nothing, so its memory stays zero and the gradient
// itself is sent and all-reduced in place into the update, as DDP with gradient_as_bucket_view
// does: adding it to a zero memory first would cost a pass over every gradient for the same
// values. As soon as backward has a parameter's final gradient, a hook prepares its send and
// calls the reducer's ready().
class GradientExchange {
 public:
  struct Options {
    bool error_feedback = true;  // false: the send is the gradient alone
    // Above 0: the whole local gradient is first clipped to this norm, so sends wait for backward.
    double clip_norm = 0;
    // The reducer delivers the exact average (ReducerSpec::lossless): the gradient is the send.
    bool lossless = false;
  };

  // Sets each parameter's .grad to its gradient in `buffers` (which outlive the exchange) and hooks
  // backward. before_send(i) runs on parameter i's final gradient before its send is made (weight
  // decay and momentum, when they precede the reduce).
  GradientExchange(std::vector<at::Tensor> params, std::vector<std::string> names, GradientBuffers& buffers,
                   reducers::Reducer& reducer, Options options, std::function<void(size_t)> before_send);
  ~GradientExchange();

  // Before each backward; with `sample`, reduce() (or keepLocal()) also records the norms
  // (sampledNorms()). With `exchange` false the step's gradients stay this worker's: backward's
  // hooks prepare them but send nothing, and keepLocal() takes reduce()'s place.
  void startStep(bool sample, bool exchange = true);
  // After backward: finishes the sends, checks them, reduces. The update is then in the buffers'
  // gradients, what the sends lost in their memories. Returns the bits this worker sent. Throws
  // NonFiniteGradient when a local or reduced gradient is not finite: a local one, because sign
  // and top-k compressors would hide it (a lossless reducer cannot, so its sends go unchecked);
  // a reduced one is the same on every rank, so all stop.
  uint64_t reduce();
  // After backward of a step started without exchange: the local gradient clipped, with what
  // before_send adds, is what the optimizer steps along. Throws NonFiniteGradient as reduce() does.
  void keepLocal();

  // ||gradient|| and ||send|| over all parameters before the last reduce, if it was sampled.
  struct Norms {
    double gradient = 0;
    double send = 0;
  };
  const std::optional<Norms>& sampledNorms() const { return sampled_; }
  // The same norms per parameter, in parameter order (layers.csv); empty unless it was sampled.
  struct LayerNorms {
    std::vector<double> gradient, send;
  };
  LayerNorms sampledLayerNorms() const;

 private:
  void prepareSend(size_t i);
  void clip();
  // What this worker sends: the memories, or the gradients themselves for a lossless reducer.
  const std::vector<at::Tensor>& sends() const { return options_.lossless ? grads_ : memories_; }

  std::vector<at::Tensor> params_;
  std::vector<std::string> names_;
  reducers::Reducer& reducer_;
  Options options_;
  std::function<void(size_t)> before_send_;
  at::Tensor& grad_flat_;
  std::vector<at::Tensor>& grads_;
  std::vector<at::Tensor>& memories_;
  std::vector<char> prepared_;
  std::vector<at::Tensor> send_sums_;                // for the local finiteness check
  std::vector<at::Tensor> grad_norms_, send_norms_;  // on sampled steps
  bool sampling_ = false;
  bool exchanging_ = true;
  std::optional<Norms> sampled_;
  std::unique_ptr<GradientReadyHooks> hooks_;
};

}  // namespace gcrun::experiments
