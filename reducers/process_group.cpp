#include "reducers/process_group.h"

#include <cstdlib>
#include <optional>

#include <torch/csrc/distributed/c10d/HashStore.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>

#include "hyperparams/errors.h"
#include "reducers/torch_compat.h"

namespace gcrun::reducers {
namespace {

class C10dPending : public PendingCollective {
 public:
  explicit C10dPending(c10::intrusive_ptr<c10d::Work> work) : work_(std::move(work)) {}
  void wait() override { work_->wait(); }

 private:
  c10::intrusive_ptr<c10d::Work> work_;
};

class C10dCommunicator : public Communicator {
 public:
  C10dCommunicator(c10::intrusive_ptr<c10d::Store> store,
                   c10::intrusive_ptr<compat::CollectiveGroup> group, std::string backend, int rank,
                   int size)
      : store_(std::move(store)),
        group_(std::move(group)),
        backend_(std::move(backend)),
        rank_(rank),
        size_(size) {}

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  std::string backend() const override { return backend_; }

  void allreduceSum(at::Tensor& tensor) override { allreduceSumAsync(tensor)->wait(); }

  std::unique_ptr<PendingCollective> allreduceSumAsync(at::Tensor& tensor) override {
    std::vector<at::Tensor> tensors{tensor};
    return std::make_unique<C10dPending>(group_->allreduce(tensors));
  }

  std::vector<at::Tensor> allgather(const at::Tensor& tensor) override {
    std::vector<at::Tensor> inputs{tensor.contiguous()};
    std::vector<std::vector<at::Tensor>> outputs(1);
    for (int r = 0; r < size_; ++r) outputs[0].push_back(at::empty_like(inputs[0]));
    group_->allgather(outputs, inputs)->wait();
    return outputs[0];
  }

  void broadcast(at::Tensor& tensor, int root) override {
    std::vector<at::Tensor> tensors{tensor};
    c10d::BroadcastOptions options;
    options.rootRank = root;
    group_->broadcast(tensors, options)->wait();
  }

  // An all-reduce of one element rather than c10d's barrier, which NCCL ties to device ids.
  void barrier() override {
    auto token = at::zeros({1}, at::TensorOptions().device(device()));
    allreduceSum(token);
  }

 private:
  c10::Device device() const {
    return backend_ == "nccl" ? c10::Device(c10::kCUDA, -1) : c10::Device(c10::kCPU);
  }

  c10::intrusive_ptr<c10d::Store> store_;  // kept alive for the group's lifetime
  c10::intrusive_ptr<compat::CollectiveGroup> group_;
  std::string backend_;
  int rank_;
  int size_;
};

// c10::Error messages carry a C++ backtrace after the first line.
std::string firstLine(const std::string& text) { return text.substr(0, text.find('\n')); }

bool isLoopback(const std::string& address) {
  return address == "localhost" || address.rfind("127.", 0) == 0 || address == "::1";
}

// Gloo binds to the interface named by GLOO_SOCKET_IFNAME when set (as in PyTorch); a local group
// stays on loopback; otherwise the address this host's name resolves to.
std::shared_ptr<::gloo::transport::Device> glooDevice(const std::string& master_addr) {
  if (const char* ifname = std::getenv("GLOO_SOCKET_IFNAME"); ifname && *ifname) {
    return c10d::ProcessGroupGloo::createDeviceForInterface(ifname);
  }
  if (isLoopback(master_addr)) return c10d::ProcessGroupGloo::createDeviceForHostname("127.0.0.1");
  return c10d::ProcessGroupGloo::createDefaultDevice();
}

std::unique_ptr<Communicator> makeGloo(const c10::intrusive_ptr<c10d::Store>& store, int rank,
                                       int size, std::chrono::milliseconds timeout,
                                       const std::string& master_addr) {
  auto options = c10d::ProcessGroupGloo::Options::create(timeout);
  options->devices.push_back(glooDevice(master_addr));
  auto group = c10::make_intrusive<c10d::ProcessGroupGloo>(store, rank, size, options);
  return std::make_unique<C10dCommunicator>(store, group, "gloo", rank, size);
}

#ifdef GCRUN_WITH_NCCL
std::unique_ptr<Communicator> makeNccl(const c10::intrusive_ptr<c10d::Store>& store, int rank,
                                       int size, std::chrono::milliseconds timeout) {
  auto options = c10d::ProcessGroupNCCL::Options::create();
  options->timeout = timeout;
  auto group = c10::make_intrusive<c10d::ProcessGroupNCCL>(store, rank, size, options);
  return std::make_unique<C10dCommunicator>(store, group, "nccl", rank, size);
}
#endif

std::optional<std::string> env(const char* name) {
  const char* value = std::getenv(name);
  if (value == nullptr || *value == '\0') return std::nullopt;
  return std::string(value);
}

int intFromEnv(const char* name, int fallback, int min_value, int max_value) {
  auto text = env(name);
  if (!text) return fallback;
  try {
    size_t used = 0;
    long value = std::stol(*text, &used);
    if (used == text->size() && value >= min_value && value <= max_value) {
      return static_cast<int>(value);
    }
  } catch (const std::exception&) {
  }
  throw UserError("environment: " + std::string(name) + "='" + *text + "' is not valid; expected an integer from " +
                  std::to_string(min_value) + " to " + std::to_string(max_value));
}

}  // namespace

bool launchedByLauncher() { return env("RANK").has_value() || env("WORLD_SIZE").has_value(); }

WorldSpec worldFromEnvironment() {
  WorldSpec world;
  if (!launchedByLauncher()) return world;
  for (const char* required : {"RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT"}) {
    if (!env(required)) {
      throw UserError(std::string("environment: ") + required +
                      " is not set; a launched worker needs RANK, WORLD_SIZE, MASTER_ADDR and MASTER_PORT");
    }
  }
  world.world_size = intFromEnv("WORLD_SIZE", 1, 1, 1 << 20);
  world.rank = intFromEnv("RANK", 0, 0, world.world_size - 1);
  world.local_rank = intFromEnv("LOCAL_RANK", 0, 0, world.world_size - 1);
  world.master_addr = *env("MASTER_ADDR");
  world.master_port = intFromEnv("MASTER_PORT", 29500, 1, 65535);
  return world;
}

bool ncclAvailable() {
#ifdef GCRUN_WITH_NCCL
  return true;
#else
  return false;
#endif
}

std::unique_ptr<Communicator> connect(const WorldSpec& world, const std::string& backend,
                                      std::chrono::milliseconds timeout) {
  c10::intrusive_ptr<c10d::Store> store;
  if (world.world_size == 1) {
    store = c10::make_intrusive<c10d::HashStore>();
  } else {
    c10d::TCPStoreOptions options;
    options.port = static_cast<std::uint16_t>(world.master_port);
    options.isServer = world.rank == 0;
    options.numWorkers = world.world_size;
    options.timeout = timeout;
    try {
      store = c10::make_intrusive<c10d::TCPStore>(world.master_addr, options);
    } catch (const std::exception& e) {
      throw std::runtime_error("rank " + std::to_string(world.rank) + " could not reach the store at " +
                               world.master_addr + ":" + std::to_string(world.master_port) + ": " +
                               firstLine(e.what()));
    }
  }
  if (backend == "nccl") {
#ifdef GCRUN_WITH_NCCL
    return makeNccl(store, world.rank, world.world_size, timeout);
#else
    throw UserError("distributed.backend: 'nccl' is not available in this build (LibTorch without CUDA/NCCL); use gloo");
#endif
  }
  return makeGloo(store, world.rank, world.world_size, timeout, world.master_addr);
}

std::unique_ptr<Communicator> glooOverStore(const c10::intrusive_ptr<c10d::Store>& store, int rank,
                                            int world_size, std::chrono::milliseconds timeout) {
  return makeGloo(store, rank, world_size, timeout, "127.0.0.1");
}

}  // namespace gcrun::reducers
