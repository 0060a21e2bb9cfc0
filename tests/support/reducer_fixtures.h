#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <ATen/ATen.h>

#include "hyperparams/config.h"
#include "reducers/granularity.h"
#include "reducers/reducer.h"

namespace gcrun::testing {

// A registered reducer with `options` (its name set to `name`) and the tests' shared seed 42.
inline std::unique_ptr<reducers::Reducer> buildReducer(const std::string& name, comm::Communicator& comm,
                                                       ReducerOptions options = {}) {
  options.name = name;
  return reducers::reducerRegistry().at(name).factory.make(
      reducers::ReducerContext{comm, options, /*seed=*/42, /*parameters=*/{}});
}

// SyncContext::make_reducer as a worker makes it: config.reducer's reducer with its settings and
// config.seed, granularity applied, over `comm` (both referenced, not copied).
inline std::function<std::unique_ptr<reducers::Reducer>(std::vector<reducers::ParameterInfo>)> reducerMaker(
    comm::Communicator& comm, const ExperimentConfig& config) {
  return [&comm, &config](std::vector<reducers::ParameterInfo> parameters) {
    return reducers::withGranularity(
        reducers::reducerRegistry()
            .at(config.reducer.name)
            .factory.make(reducers::ReducerContext{comm, config.reducer, static_cast<uint64_t>(config.seed),
                                                   std::move(parameters)}),
        config.reducer);
  };
}

// Deep copies, for keeping a reducer's input: reducers may use `send` as scratch space.
inline std::vector<at::Tensor> clones(const std::vector<at::Tensor>& tensors) {
  std::vector<at::Tensor> out;
  for (const auto& t : tensors) out.push_back(t.clone());
  return out;
}

// A communicator that passes every call on to `inner`: tests derive from it to record or count
// the collectives a reducer starts, overriding only those.
class ForwardingCommunicator : public comm::Communicator {
 public:
  explicit ForwardingCommunicator(comm::Communicator& inner) : inner_(inner) {}
  int rank() const override { return inner_.rank(); }
  int size() const override { return inner_.size(); }
  std::string backend() const override { return inner_.backend(); }
  void allreduceSum(at::Tensor& tensor) override { inner_.allreduceSum(tensor); }
  std::unique_ptr<comm::PendingCollective> allreduceSumAsync(at::Tensor& tensor) override {
    return inner_.allreduceSumAsync(tensor);
  }
  std::vector<at::Tensor> allgather(const at::Tensor& tensor) override { return inner_.allgather(tensor); }
  void broadcast(at::Tensor& tensor, int root) override { inner_.broadcast(tensor, root); }
  void barrier() override { inner_.barrier(); }

 private:
  comm::Communicator& inner_;
};

}  // namespace gcrun::testing
