#include "reducers/builtin_reducers.h"

namespace gcrun::reducers {

Registry<ReducerSpec>& reducerRegistry() {
  static Registry<ReducerSpec>* registry = [] {
    auto* r = new Registry<ReducerSpec>("reducer");
    r->add("exact", "all-reduce average of the full gradient (SGD; the reference's ExactReducer)",
           ReducerSpec{makeExactReducer, "all-reduce", {}, true, {"layer"}});
    r->add("powersgd",
           "rank-r PowerSGD: power iteration with a warm-started query (the reference's RankKReducer)",
           ReducerSpec{makePowerSgdReducer, "all-reduce", {"reducer.rank", "reducer.reuse_query"}, true, {"layer"}});
    return r;
  }();
  return *registry;
}

}  // namespace gcrun::reducers
