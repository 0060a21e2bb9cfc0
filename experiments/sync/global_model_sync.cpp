#include "experiments/sync/global_model_sync.h"

#include "experiments/sync/tensor_norms.h"

namespace gcrun::experiments {

void checkGlobalModel(const std::vector<at::Tensor>& global, const std::vector<std::string>& names) {
  std::vector<at::Tensor> sums;
  for (const auto& tensor : global) sums.push_back(tensor.sum());
  if (const int64_t bad = firstNonFinite(sums); bad >= 0) {
    throw NonFiniteGradient("the global model's '" + names[bad] + "' is not finite (nan or inf) after the outer step");
  }
}

GlobalModelSync::GlobalModelSync(const SyncContext& context, GradientExchange::Options exchange, int64_t every,
                                 bool drift)
    : comm_(context.comm),
      params_(context.params),
      exchange_(context.params, context.names, context.buffers, context.reducer, exchange, context.before_send),
      global_(copiesOf(context.params)),
      every_(every),
      drift_(drift),
      evaluated_(context.params) {}

uint64_t GlobalModelSync::afterBackward() {
  exchange_.keepLocal();
  return 0;
}

uint64_t GlobalModelSync::afterStep(int64_t step) {
  last_sync_.reset();
  if (sendsAfter(step)) last_sync_ = measuredSync(comm_, params_, drift_, [&] { return outerStep(step); });
  afterSync(step);
  return last_sync_ ? last_sync_->bits : 0;
}

}  // namespace gcrun::experiments
