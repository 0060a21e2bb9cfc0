#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>

namespace gcrun::comm {

class PendingCollective;

// The collectives a reducer may use, over one c10d process group (Gloo or NCCL). It hides the
// c10d API differences between LibTorch 1.13 (ProcessGroup) and 2.x (Backend).
//
// Contract (as for any c10d group): every rank calls the same collectives, with tensors of the
// same shape and dtype, in the same order. Blocking calls return when the result is in place;
// a peer that fails or stalls makes them throw after the group's timeout.
class Communicator {
 public:
  virtual ~Communicator() = default;

  virtual int rank() const = 0;
  virtual int size() const = 0;
  virtual std::string backend() const = 0;

  // In place: tensor becomes the elementwise sum over ranks.
  virtual void allreduceSum(at::Tensor& tensor) = 0;
  // Starts the same sum without waiting; wait() on the result before reading the tensor.
  virtual std::unique_ptr<PendingCollective> allreduceSumAsync(at::Tensor& tensor) = 0;
  // Every rank's `tensor`, in rank order (each of the same shape and dtype). This rank's entry may
  // be `tensor` itself: copy it before writing either.
  virtual std::vector<at::Tensor> allgather(const at::Tensor& tensor) = 0;
  // In place: every rank gets root's tensor.
  virtual void broadcast(at::Tensor& tensor, int root) = 0;
  virtual void barrier() = 0;

  // Another group of the same ranks, whose collectives are apart from this one's: a second thread
  // of the worker may run collectives on it while the first runs them here (on one group, two
  // threads' calls could interleave in a different order on different ranks). Every rank calls it
  // with the same `name`, in the same order: building a group waits for all its members. Null
  // where this communicator cannot make one (then such work stays on this group, blocking).
  virtual std::unique_ptr<Communicator> sibling(const std::string& /*name*/) { return nullptr; }

  // Where this group's collectives take their tensors: the current CUDA device for NCCL.
  c10::Device device() const { return backend() == "nccl" ? c10::Device(c10::kCUDA, -1) : c10::Device(c10::kCPU); }
};

class PendingCollective {
 public:
  virtual ~PendingCollective() = default;
  virtual void wait() = 0;
};

}  // namespace gcrun::comm
