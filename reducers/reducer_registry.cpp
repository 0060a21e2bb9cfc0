#include "reducers/builtin_reducers.h"

namespace gcrun::reducers {

Registry<ReducerFactory>& reducerRegistry() {
  static Registry<ReducerFactory>* registry = [] {
    auto* r = new Registry<ReducerFactory>("reducer");
    r->add("exact", "all-reduce average of the full gradient (SGD; the reference's ExactReducer)",
           makeExactReducer);
    r->add("powersgd",
           "rank-r PowerSGD: one power iteration, warm-started query (the reference's RankKReducer)",
           makePowerSgdReducer);
    return r;
  }();
  return *registry;
}

}  // namespace gcrun::reducers
