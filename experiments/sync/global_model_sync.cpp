#include "experiments/sync/global_model_sync.h"

namespace gcrun::experiments {

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
  if (step % every_ == 0) last_sync_ = measuredSync(comm_, params_, drift_, [this] { return outerStep(); });
  return last_sync_ ? last_sync_->bits : 0;
}

}  // namespace gcrun::experiments
