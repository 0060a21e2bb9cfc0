#pragma once

#include <ATen/ATen.h>

namespace gcrun::tasks {

// Host batches bound for a GPU go through pinned memory, so the copy is a DMA that can overlap the
// previous step's compute; CPU runs keep the plain copy.
inline at::Tensor toDevice(const at::Tensor& host, c10::Device device) {
  if (!device.is_cuda()) return host.to(device);
  return host.pin_memory().to(device, /*non_blocking=*/true);
}

}  // namespace gcrun::tasks
