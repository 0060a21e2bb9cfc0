#pragma once

#include <memory>
#include <string>
#include <vector>

#include "outputs/trace/recorder.h"
#include "reducers/comm/communicator.h"

namespace gcrun::experiments {

// The reducer's communicator under output.trace: each collective goes to `inner` unchanged and,
// while `trace` records, becomes a trace::Collective (kind, this worker's bytes and their data type,
// group size, when it was issued, waited for and done). Only the reducer talks through it, so the bytes recorded
// per step are the bits it reports, divided by 8.
class TracedCommunicator : public comm::Communicator {
 public:
  TracedCommunicator(comm::Communicator& inner, trace::WorkerTrace& trace) : inner_(inner), trace_(trace) {}

  int rank() const override { return inner_.rank(); }
  int size() const override { return inner_.size(); }
  std::string backend() const override { return inner_.backend(); }

  void allreduceSum(at::Tensor& tensor) override;
  std::unique_ptr<comm::PendingCollective> allreduceSumAsync(at::Tensor& tensor) override;
  std::vector<at::Tensor> allgather(const at::Tensor& tensor) override;
  void broadcast(at::Tensor& tensor, int root) override;
  void barrier() override;

 private:
  // Runs the blocking `call` and records it as one collective of `kind` over `tensor`'s bytes.
  template <class Call>
  auto blocking(CollectiveKind kind, const at::Tensor* tensor, Call&& call);

  comm::Communicator& inner_;
  trace::WorkerTrace& trace_;
};

}  // namespace gcrun::experiments
