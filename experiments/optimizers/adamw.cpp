#include <algorithm>
#include <cmath>

#include <ATen/ATen.h>

#include "experiments/optimizers/gradient_clipping.h"
#include "experiments/optimizers/optimizer.h"
#include "hyperparams/base/errors.h"

namespace gcrun::experiments {
namespace {

const std::string kExpAvgPrefix = "adamw/exp_avg/";
const std::string kExpAvgSqPrefix = "adamw/exp_avg_sq/";
const std::string kStepEntry = "adamw/step";

// torch 1.13's AdamW, single-tensor form (foreach=False), op for op, so that a PyTorch run gets the
// same bits. After the reduce: the global clip (optimizer.clip_norm), the schedule's rate for the
// step, then per parameter in order, with t = 1, 2, ...:
//   p *= 1 - lr wd;  m = beta1 m + (1 - beta1) g;  v = beta2 v + (1 - beta2) g g;
//   p -= lr / (1 - beta1^t) * m / (sqrt(v) / sqrt(1 - beta2^t) + eps).
// Two groups: a parameter decays (wd = optimizer.weight_decay) iff it has 2 or more dims and is no
// embedding table (Task::embeddingParameters()) unless optimizer.decay_embeddings; the others have
// wd = 0. Checkpoint entries: adamw/exp_avg/<parameter> (m), adamw/exp_avg_sq/<parameter> (v) and
// adamw/step (t, an int64 scalar).
class AdamW final : public Optimizer {
 public:
  explicit AdamW(const OptimizerContext& context)
      : options_(context.options),
        params_(context.params),
        names_(context.names),
        grads_(context.grads),
        schedule_(makeSchedule(context)) {
    const auto& embeddings = context.embeddings;
    for (size_t i = 0; i < params_.size(); ++i) {
      const bool embedding = std::find(embeddings.begin(), embeddings.end(), names_[i]) != embeddings.end();
      const bool decays = params_[i].dim() >= 2 && (options_.decay_embeddings || !embedding);
      weight_decay_.push_back(decays ? options_.weight_decay : 0.0);
    }
  }

  // Nothing comes before the reduce: checkedOptimizer refuses the settings that would ask for it.
  void beforeSend(size_t) override {}

  void step(const StepPosition& at, const TimedPart& timed) override {
    timed(StepPart::update, [&] {
      if (options_.clip_norm > 0) clipGradientNorm(grads_, options_.clip_norm);
      const double lr = schedule_->rate(options_.learning_rate, at);
      ++step_;
      const double beta1 = options_.beta1, beta2 = options_.beta2;
      const double bias_correction1 = 1 - std::pow(beta1, static_cast<double>(step_));
      const double bias_correction2 = 1 - std::pow(beta2, static_cast<double>(step_));
      const double step_size = lr / bias_correction1;
      const double bias_correction2_sqrt = std::sqrt(bias_correction2);
      allocateMoments();
      for (size_t i = 0; i < params_.size(); ++i) {
        at::Tensor param = params_[i].detach();
        const at::Tensor& grad = grads_[i];
        param.mul_(1 - lr * weight_decay_[i]);
        exp_avg_[i].mul_(beta1).add_(grad, 1 - beta1);
        exp_avg_sq_[i].mul_(beta2).addcmul_(grad, grad, 1 - beta2);
        const at::Tensor denom = (exp_avg_sq_[i].sqrt() / bias_correction2_sqrt).add_(options_.epsilon);
        param.addcdiv_(exp_avg_[i], denom, -step_size);
      }
    });
  }

  double learningRate(const StepPosition& at) const override { return schedule_->rate(options_.learning_rate, at); }

  void saveState(TensorMap& state) const override {
    for (size_t i = 0; i < names_.size(); ++i) {
      state[kExpAvgPrefix + names_[i]] = exp_avg_.empty() ? zeroMoment(i) : exp_avg_[i];
      state[kExpAvgSqPrefix + names_[i]] = exp_avg_sq_.empty() ? zeroMoment(i) : exp_avg_sq_[i];
    }
    state[kStepEntry] = at::scalar_tensor(step_, at::kLong);
  }

  void expectState(TensorMap& expected) const override { saveState(expected); }

  bool mayLack(const std::string&) const override { return false; }

  void loadState(const TensorMap& state) override {
    allocateMoments();
    for (size_t i = 0; i < names_.size(); ++i) {
      exp_avg_[i].copy_(state.at(kExpAvgPrefix + names_[i]));
      exp_avg_sq_[i].copy_(state.at(kExpAvgSqPrefix + names_[i]));
    }
    step_ = checkpointCount(state, kStepEntry, 0, savedStep(state));  // at most one a step
  }

 private:
  // The moments are made at the first step (or restore), not with the optimizer: a simulated
  // worker that shares worker 0's parameters never steps, and 15 of them holding two zeroed
  // copies of the model each was a third of 16 GPT workers' memory. Until then they are zeros,
  // and a checkpoint says so.
  void allocateMoments() {
    if (!exp_avg_.empty()) return;
    for (size_t i = 0; i < params_.size(); ++i) {
      exp_avg_.push_back(zeroMoment(i));
      exp_avg_sq_.push_back(zeroMoment(i));
    }
  }
  at::Tensor zeroMoment(size_t i) const { return at::zeros_like(params_[i], at::MemoryFormat::Preserve); }

  OptimizerOptions options_;
  std::vector<at::Tensor> params_;
  std::vector<std::string> names_;
  std::vector<at::Tensor> grads_;
  std::unique_ptr<LearningRateSchedule> schedule_;
  std::vector<double> weight_decay_;
  std::vector<at::Tensor> exp_avg_, exp_avg_sq_;
  int64_t step_ = 0;
};

// The reference SGD's parts before the reduce have no AdamW counterpart: refused, not ignored.
void refuseBeforeReduce(const std::string& key, bool set) {
  if (!set) return;
  throw UserError(key + ": optimizer 'adamw' steps only after the reduce (its weight decay is decoupled, its " +
                  "moments are its own); set " + key + "=false or optimizer.name=sgd");
}

void validateAdamW(const OptimizerOptions& options) {
  refuseBeforeReduce("optimizer.mom_before_reduce", options.mom_before_reduce);
  refuseBeforeReduce("optimizer.wd_before_reduce", options.wd_before_reduce);
}

}  // namespace

std::unique_ptr<Optimizer> makeAdamW(const OptimizerContext& context) { return std::make_unique<AdamW>(context); }

OptimizerSpec adamWSpec() { return {validateAdamW, makeAdamW, /*state_copies=*/2}; }

}  // namespace gcrun::experiments
