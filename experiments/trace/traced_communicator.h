#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "outputs/trace/recorder.h"
#include "reducers/comm/communicator.h"

namespace gcrun::experiments {

// The reducer's communicator under output.trace: each collective goes to `inner` unchanged and,
// while `trace` records, becomes a trace::Collective (kind, this worker's bytes and their data type,
// group size, when it was issued, waited for and done). Only the reducer talks through it, so the bytes recorded
// per step are the bits it reports, divided by 8. Its sibling() is a second group traced alike. A
// collective issued under a comm::CollectiveStepScope (a background thread's exchange) is recorded
// as a background one of that step.
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
  std::unique_ptr<comm::Communicator> sibling(const std::string& name) override;

 private:
  // A sibling: over a group of its own.
  TracedCommunicator(std::unique_ptr<comm::Communicator> own, trace::WorkerTrace& trace);

  // Runs the blocking `call` and records it as one collective of `kind` over `tensor`'s bytes.
  template <class Call>
  auto blocking(CollectiveKind kind, const at::Tensor* tensor, Call&& call);

  std::unique_ptr<comm::Communicator> own_;  // a sibling's group; null otherwise
  comm::Communicator& inner_;
  trace::WorkerTrace& trace_;
};

}  // namespace gcrun::experiments
