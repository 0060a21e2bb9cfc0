#include "experiments/trace/traced_communicator.h"

#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>

#include <ATen/core/Tensor.h>

#include "reducers/comm/collective_step.h"

namespace gcrun::experiments {
namespace {

uint64_t bytesOf(const at::Tensor* tensor) {
  return tensor ? static_cast<uint64_t>(tensor->numel()) * tensor->element_size() : 0;
}

// The trace's name for the tensor's elements; a barrier has no tensor: float32.
DataType dataTypeOf(const at::Tensor* tensor) {
  if (!tensor) return DataType::float32;
  switch (tensor->scalar_type()) {
    case at::kFloat:
      return DataType::float32;
    case at::kHalf:
      return DataType::float16;
    case at::kBFloat16:
      return DataType::bfloat16;
    case at::kDouble:
      return DataType::float64;
    case at::kByte:
      return DataType::uint8;
    case at::kChar:
      return DataType::int8;
    case at::kInt:
      return DataType::int32;
    case at::kLong:
      return DataType::int64;
    case at::kBool:
      return DataType::bool_;
    default:
      // No reducer sends another type; a new one needs its name in the trace format first.
      throw std::logic_error(std::string("a collective of ") + c10::toString(tensor->scalar_type()) +
                             " elements, which a trace has no name for");
  }
}

// An async all-reduce's handle: its wait() is the recorded wait.
class TracedPending : public comm::PendingCollective {
 public:
  TracedPending(std::unique_ptr<comm::PendingCollective> inner, trace::WorkerTrace& trace, std::optional<size_t> index)
      : inner_(std::move(inner)), trace_(trace), index_(index) {}

  void wait() override {
    if (!index_) return inner_->wait();
    const double wait_us = trace_.now();
    inner_->wait();
    trace_.waited(*std::exchange(index_, std::nullopt), wait_us, trace_.now());
  }

 private:
  std::unique_ptr<comm::PendingCollective> inner_;
  trace::WorkerTrace& trace_;
  std::optional<size_t> index_;  // the recorded collective, until its wait returns
};

// The same on a background thread: the collective is recorded whole once its wait returns.
class BackgroundPending : public comm::PendingCollective {
 public:
  BackgroundPending(std::unique_ptr<comm::PendingCollective> inner, trace::WorkerTrace& trace,
                    trace::Collective collective)
      : inner_(std::move(inner)), trace_(trace), collective_(std::move(collective)) {}

  void wait() override {
    collective_.wait_us = trace_.now();
    inner_->wait();
    collective_.done_us = trace_.now();
    trace_.background(std::move(collective_));
  }

 private:
  std::unique_ptr<comm::PendingCollective> inner_;
  trace::WorkerTrace& trace_;
  trace::Collective collective_;
};

}  // namespace

TracedCommunicator::TracedCommunicator(std::unique_ptr<comm::Communicator> own, trace::WorkerTrace& trace)
    : own_(std::move(own)), inner_(*own_), trace_(trace) {}

std::unique_ptr<comm::Communicator> TracedCommunicator::sibling(const std::string& name) {
  auto group = inner_.sibling(name);
  if (!group) return nullptr;
  return std::unique_ptr<TracedCommunicator>(new TracedCommunicator(std::move(group), trace_));
}

template <class Call>
auto TracedCommunicator::blocking(CollectiveKind kind, const at::Tensor* tensor, Call&& call) {
  if (!trace_.recording()) return call();
  const double issued_us = trace_.now();
  auto finish = [&] {
    const double done_us = trace_.now();
    const auto background = comm::collectiveStep();
    const trace::Collective collective{kind,      bytesOf(tensor), inner_.size(), background.value_or(0), false,
                                       issued_us, issued_us,       done_us,       dataTypeOf(tensor)};
    if (background) {
      trace_.background(collective);
    } else {
      trace_.issued(collective, done_us);
    }
  };
  if constexpr (std::is_void_v<decltype(call())>) {
    call();
    finish();
  } else {
    auto result = call();
    finish();
    return result;
  }
}

void TracedCommunicator::allreduceSum(at::Tensor& tensor) {
  blocking(CollectiveKind::all_reduce, &tensor, [&] { inner_.allreduceSum(tensor); });
}

std::unique_ptr<comm::PendingCollective> TracedCommunicator::allreduceSumAsync(at::Tensor& tensor) {
  if (!trace_.recording()) return inner_.allreduceSumAsync(tensor);
  const double issued_us = trace_.now();
  auto pending = inner_.allreduceSumAsync(tensor);
  const double returned_us = trace_.now();
  const auto background = comm::collectiveStep();
  const trace::Collective collective{
      CollectiveKind::all_reduce, bytesOf(&tensor), inner_.size(), background.value_or(0), true, issued_us, 0, 0,
      dataTypeOf(&tensor)};
  if (background) return std::make_unique<BackgroundPending>(std::move(pending), trace_, collective);
  const auto index = trace_.issued(collective, returned_us);
  return std::make_unique<TracedPending>(std::move(pending), trace_, index);
}

std::vector<at::Tensor> TracedCommunicator::allgather(const at::Tensor& tensor) {
  return blocking(CollectiveKind::all_gather, &tensor, [&] { return inner_.allgather(tensor); });
}

void TracedCommunicator::broadcast(at::Tensor& tensor, int root) {
  blocking(CollectiveKind::broadcast, &tensor, [&] { inner_.broadcast(tensor, root); });
}

void TracedCommunicator::barrier() {
  blocking(CollectiveKind::barrier, nullptr, [&] { inner_.barrier(); });
}

}  // namespace gcrun::experiments
