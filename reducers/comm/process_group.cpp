#include "reducers/comm/process_group.h"

#include <algorithm>
#include <condition_variable>
#include <functional>
#include <future>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include <torch/csrc/distributed/c10d/FileStore.hpp>
#include <torch/csrc/distributed/c10d/HashStore.hpp>
#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>

#include "hyperparams/base/errors.h"
#include "hyperparams/base/text.h"
#include "hyperparams/base/thread_team.h"
#include "reducers/comm/collective_failure.h"
#include "reducers/comm/torch_compat.h"

namespace gcrun::comm {
namespace {

// Where a group's collectives are waited for, and so where their failures surface.
struct WaitContext {
  int rank;
  std::chrono::milliseconds timeout;
};

// Waits for `work`, begun at `started`; the backend's failure becomes a CollectiveFailed that
// names the rank and whether the group's timeout ran out. A c10::Error stays as it is: the backend
// refused the call itself (a type it cannot sum) on every rank alike, which probes rely on.
void waitFor(c10d::Work& work, const WaitContext& context, std::chrono::steady_clock::time_point started) {
  try {
    work.wait();
  } catch (const c10::Error&) {
    throw;
  } catch (const std::exception& e) {
    const std::string line = firstLine(e.what());
    const bool timed_out = ranOutOf(std::chrono::steady_clock::now() - started, context.timeout, line);
    throw CollectiveFailed(context.rank, context.timeout, timed_out, line);
  }
}

class C10dPending : public PendingCollective {
 public:
  C10dPending(c10::intrusive_ptr<c10d::Work> work, WaitContext context)
      : work_(std::move(work)), context_(context), started_(std::chrono::steady_clock::now()) {}
  void wait() override { waitFor(*work_, context_, started_); }

 private:
  c10::intrusive_ptr<c10d::Work> work_;
  WaitContext context_;
  std::chrono::steady_clock::time_point started_;
};

class C10dCommunicator : public Communicator {
 public:
  struct Completed : PendingCollective {
    void wait() override {}
  };

  // `make` builds a group of the same kind over a store (a sibling's).
  using GroupMaker = std::function<std::unique_ptr<Communicator>(const c10::intrusive_ptr<c10d::Store>&)>;

  C10dCommunicator(c10::intrusive_ptr<c10d::Store> store, c10::intrusive_ptr<compat::CollectiveGroup> group,
                   std::string backend, int rank, int size, std::chrono::milliseconds timeout, GroupMaker make)
      : store_(std::move(store)),
        group_(std::move(group)),
        backend_(std::move(backend)),
        rank_(rank),
        size_(size),
        waits_{rank, timeout},
        make_(std::move(make)) {}

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  std::string backend() const override { return backend_; }

  void allreduceSum(at::Tensor& tensor) override { allreduceSumAsync(tensor)->wait(); }

  std::unique_ptr<PendingCollective> allreduceSumAsync(at::Tensor& tensor) override {
    // A sum over one rank is the tensor itself: a single worker pays nothing for its reducer's
    // all-reduces (the compute-only baseline).
    if (size_ == 1) return std::make_unique<Completed>();
    std::vector<at::Tensor> tensors{tensor};
    return std::make_unique<C10dPending>(group_->allreduce(tensors), waits_);
  }

  std::vector<at::Tensor> allgather(const at::Tensor& tensor) override {
    if (swaps(tensor)) return swap(tensor);
    std::vector<at::Tensor> inputs{tensor.contiguous()};
    std::vector<std::vector<at::Tensor>> outputs(1);
    for (int r = 0; r < size_; ++r) outputs[0].push_back(at::empty_like(inputs[0]));
    C10dPending(group_->allgather(outputs, inputs), waits_).wait();
    return outputs[0];
  }

  void broadcast(at::Tensor& tensor, int root) override {
    std::vector<at::Tensor> tensors{tensor};
    c10d::BroadcastOptions options;
    options.rootRank = root;
    C10dPending(group_->broadcast(tensors, options), waits_).wait();
  }

  // An all-reduce of one element rather than c10d's barrier, which NCCL ties to device ids.
  void barrier() override {
    auto token = at::zeros({1}, at::TensorOptions().device(device()));
    allreduceSum(token);
  }

  // The same kind of group over this one's store, its keys under a prefix of their own: the
  // name and how many siblings came before (every rank makes them in the same order), so that
  // two made under one name do not meet in each other's keys.
  std::unique_ptr<Communicator> sibling(const std::string& name) override {
    const std::string prefix = "sibling/" + name + "/" + std::to_string(siblings_++);
    return make_(c10::make_intrusive<c10d::PrefixStore>(prefix, store_));
  }

 private:
  // Between 2 Gloo ranks an all-gather is one swap over their pair: the same bytes each way as
  // Gloo's, in a quarter of the time on LibTorch 1.13, whose all-gather copies through fresh
  // buffers. Measured there, 2 processes on 2 cores: a 21 MiB swap 12 ms, Gloo's all-gather 48 ms.
  // Sums stay with Gloo's ring, which adds inside its pipeline: a swap and an add of 3 buckets
  // (42 MiB) took 32 ms against the ring's 33, and longer with the ranks as threads.
  bool swaps(const at::Tensor& tensor) const {
    return size_ == 2 && backend_ == "gloo" && tensor.is_cpu() && tensor.is_contiguous() && tensor.numel() > 0;
  }

  // Sends `tensor` to the other rank and receives its: both, in rank order. One swap at a time
  // (it waits for both), so one tag serves; Gloo's collectives in flight use other slots.
  std::vector<at::Tensor> swap(const at::Tensor& tensor) {
    constexpr int kTag = 0;
    std::vector<at::Tensor> outgoing{tensor}, incoming{at::empty_like(tensor)};
    C10dPending receive(group_->recv(incoming, 1 - rank_, kTag), waits_);
    C10dPending(group_->send(outgoing, 1 - rank_, kTag), waits_).wait();
    receive.wait();
    return rank_ == 0 ? std::vector<at::Tensor>{tensor, incoming[0]} : std::vector<at::Tensor>{incoming[0], tensor};
  }

  c10::intrusive_ptr<c10d::Store> store_;  // kept alive for the group's lifetime
  c10::intrusive_ptr<compat::CollectiveGroup> group_;
  std::string backend_;
  int rank_;
  int size_;
  WaitContext waits_;
  GroupMaker make_;
  int siblings_ = 0;  // made so far
};

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

std::unique_ptr<Communicator> makeGloo(const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
                                       std::chrono::milliseconds timeout, const std::string& master_addr) {
  auto options = c10d::ProcessGroupGloo::Options::create(timeout);
  options->devices.push_back(glooDevice(master_addr));
  auto group = c10::make_intrusive<c10d::ProcessGroupGloo>(store, rank, size, options);
  return std::make_unique<C10dCommunicator>(store, group, "gloo", rank, size, timeout,
                                            [=](const c10::intrusive_ptr<c10d::Store>& sibling_store) {
                                              return makeGloo(sibling_store, rank, size, timeout, master_addr);
                                            });
}

#ifdef GCRUN_WITH_NCCL
std::unique_ptr<Communicator> makeNccl(const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
                                       std::chrono::milliseconds timeout) {
  auto options = c10d::ProcessGroupNCCL::Options::create();
  options->timeout = timeout;
  auto group = c10::make_intrusive<c10d::ProcessGroupNCCL>(store, rank, size, options);
  return std::make_unique<C10dCommunicator>(store, group, "nccl", rank, size, timeout,
                                            [=](const c10::intrusive_ptr<c10d::Store>& sibling_store) {
                                              return makeNccl(sibling_store, rank, size, timeout);
                                            });
}
#endif

std::string storeAddress(const WorldSpec& world) {
  if (!world.store_file.empty()) return "file " + world.store_file;
  return world.master_addr + ":" + std::to_string(world.master_port);
}

// The group's keys live under "gcrun/[<run token>/]attempt_<n>/": torchrun's agent store holds its
// own keys and outlives a restarted attempt's workers.
c10::intrusive_ptr<c10d::Store> connectStore(const WorldSpec& world, std::chrono::milliseconds timeout, bool join) {
  const std::string prefix = "gcrun/" + (world.run_token.empty() ? "" : world.run_token + "/") + "attempt_" +
                             std::to_string(world.restart_count);
  if (!world.store_file.empty()) {
    // numWorkers -1: no instance deletes the file (a worker holds several); the launcher removes it.
    auto store = c10::make_intrusive<c10d::FileStore>(world.store_file, -1);
    store->setTimeout(timeout);
    return c10::make_intrusive<c10d::PrefixStore>(prefix, store);
  }
  c10d::TCPStoreOptions options;
  options.port = static_cast<std::uint16_t>(world.master_port);
  options.isServer = join && world.rank == 0 && !world.agent_store;
  if (join && !world.agent_store) options.numWorkers = world.world_size;
  options.waitWorkers = join && !world.agent_store;
  options.timeout = timeout;
  compat::useClassicTcpStore(options);
  try {
    auto store = c10::make_intrusive<c10d::TCPStore>(world.master_addr, options);
    return c10::make_intrusive<c10d::PrefixStore>(prefix, store);
  } catch (const std::exception& e) {
    const std::string rank = "rank " + std::to_string(world.rank);
    if (options.isServer && std::string(e.what()).find("already in use") != std::string::npos) {
      throw std::runtime_error(rank + " could not host the store on port " + std::to_string(world.master_port) +
                               ": the port is in use; choose another with --master-port or MASTER_PORT");
    }
    throw std::runtime_error(rank + " could not reach the store at " + storeAddress(world) + " within " +
                             std::to_string(timeout.count() / 1000) + " s: " + firstLine(e.what()));
  }
}

constexpr auto kHeartbeatPeriod = std::chrono::milliseconds(500);
constexpr auto kHeartbeatSilence = std::chrono::seconds(2);
// How long a diagnosis waits for the store beyond the silence it measures.
constexpr auto kStoreAnswerLimit = std::chrono::seconds(4);

// The heartbeat's own state, shared with its thread: a thread stuck on a store whose host is
// stopped must not keep its monitor (and so the failing worker) from going away.
struct Heartbeat {
  WorldSpec world;
  c10::intrusive_ptr<c10d::Store> store;
  std::mutex mutex;
  std::condition_variable wake;
  bool stopping = false;
};

std::string heartbeatKey(int rank) { return "heartbeat/" + std::to_string(rank); }

std::vector<int64_t> heartbeatCounters(c10d::Store& store, int world_size) {
  std::vector<int64_t> values;
  for (int r = 0; r < world_size; ++r) values.push_back(store.add(heartbeatKey(r), 0));
  return values;
}

// Which ranks' counters stand still for kHeartbeatSilence, over a fresh connection to the store.
std::string silentRanks(const WorldSpec& world, std::chrono::milliseconds timeout) {
  auto store = connectStore(world, timeout, /*join=*/false);
  const auto before = heartbeatCounters(*store, world.world_size);
  std::this_thread::sleep_for(kHeartbeatSilence);
  const auto after = heartbeatCounters(*store, world.world_size);
  std::string silent;
  for (int r = 0; r < world.world_size; ++r) {
    if (r != world.rank && after[r] == before[r]) silent += (silent.empty() ? "" : ", ") + std::to_string(r);
  }
  if (silent.empty()) return "";
  return (silent.find(',') == std::string::npos ? "rank " : "ranks ") + silent + " failed (no heartbeat for " +
         std::to_string(kHeartbeatSilence.count()) + " s)";
}

class StorePeerMonitor : public PeerMonitor {
 public:
  StorePeerMonitor(const WorldSpec& world, std::chrono::milliseconds timeout)
      : world_(world), timeout_(timeout), heartbeat_(std::make_shared<Heartbeat>()) {
    heartbeat_->world = world;
    heartbeat_->store = connectStore(world, timeout, /*join=*/false);
    heartbeat_->store->add(heartbeatKey(world.rank), 1);
    thread_ = std::thread([heartbeat = heartbeat_] { run(*heartbeat); });
  }

  ~StorePeerMonitor() override {
    {
      std::lock_guard<std::mutex> lock(heartbeat_->mutex);
      heartbeat_->stopping = true;
    }
    heartbeat_->wake.notify_all();
    thread_.detach();  // it ends at its next wake-up, or with the process if the store hangs it
  }

  // Asks in a thread of its own and waits a bounded time: a store whose host is stopped (SIGSTOP)
  // accepts connections but never answers.
  std::string diagnose() override {
    struct Answer {
      bool store_answered = false;
      std::string silent;
    };
    auto answer = std::make_shared<std::promise<Answer>>();
    auto result = answer->get_future();
    std::thread([world = world_, timeout = timeout_, answer] {
      try {
        answer->set_value(Answer{true, silentRanks(world, timeout)});
      } catch (const std::exception&) {
        answer->set_value(Answer{});
      }
    }).detach();
    const std::string host = std::string(world_.agent_store ? "torchrun's agent" : "rank 0");
    const std::string store = storeAddress(world_);
    if (result.wait_for(kHeartbeatSilence + kStoreAnswerLimit) != std::future_status::ready) {
      return "the store at " + store + " did not answer within " +
             std::to_string((kHeartbeatSilence + kStoreAnswerLimit).count()) + " s, so its host " + host +
             " is stopped or gone";
    }
    const Answer found = result.get();
    if (!found.store_answered) return "the store at " + store + " is gone, so its host " + host + " failed";
    return found.silent;
  }

 private:
  // The store call runs without the lock, so that stopping never waits on a store that hangs.
  static void run(Heartbeat& heartbeat) {
    while (true) {
      {
        std::unique_lock<std::mutex> lock(heartbeat.mutex);
        if (heartbeat.wake.wait_for(lock, kHeartbeatPeriod, [&] { return heartbeat.stopping; })) return;
      }
      try {
        heartbeat.store->add(heartbeatKey(heartbeat.world.rank), 1);
      } catch (const std::exception&) {
        return;  // the store's host is gone; diagnose() says so
      }
    }
  }

  WorldSpec world_;
  std::chrono::milliseconds timeout_;
  std::shared_ptr<Heartbeat> heartbeat_;
  std::thread thread_;
};

}  // namespace

std::unique_ptr<PeerMonitor> monitorPeers(const WorldSpec& world, std::chrono::milliseconds timeout) {
  if (world.world_size == 1) return nullptr;
  return std::make_unique<StorePeerMonitor>(world, timeout);
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
    store = connectStore(world, timeout, /*join=*/true);
  }
  if (backend == "nccl") {
#ifdef GCRUN_WITH_NCCL
    return makeNccl(store, world.rank, world.world_size, timeout);
#else
    throw UserError(
        "distributed.backend: 'nccl' is not available in this build (LibTorch without CUDA/NCCL); use gloo");
#endif
  }
  return makeGloo(store, world.rank, world.world_size, timeout, world.master_addr);
}

std::vector<std::unique_ptr<Communicator>> connectSimulated(const WorldSpec& world, int workers,
                                                            std::chrono::milliseconds timeout) {
  // Alone, the ranks share one in-process store; across processes each rank gets a store connection
  // of its own (a TCPStore client serves one request at a time), logical rank 0 hosting the store.
  c10::intrusive_ptr<c10d::Store> shared;
  if (world.world_size == 1) shared = c10::make_intrusive<c10d::HashStore>();
  std::vector<std::unique_ptr<Communicator>> comms(static_cast<size_t>(workers));
  std::vector<std::string> failures(static_cast<size_t>(workers));
  runThreadTeam(
      workers,
      [&](int w) {
        WorldSpec logical = world;
        logical.rank = world.rank * workers + w;
        logical.world_size = world.world_size * workers;
        const int rank = logical.rank;
        try {
          const auto store = shared ? shared : connectStore(logical, timeout, /*join=*/true);
          comms[w] = makeGloo(store, rank, logical.world_size, timeout, world.master_addr);
        } catch (const std::exception& e) {
          failures[w] =
              "simulated worker rank " + std::to_string(rank) + " could not join its group: " + firstLine(e.what());
        }
      },
      "distributed.simulated_workers=" + std::to_string(workers));
  for (const auto& failure : failures) {
    if (!failure.empty()) throw std::runtime_error(failure);
  }
  return comms;
}

std::unique_ptr<Communicator> glooOverStore(const c10::intrusive_ptr<c10d::Store>& store, int rank, int world_size,
                                            std::chrono::milliseconds timeout) {
  return makeGloo(store, rank, world_size, timeout, "127.0.0.1");
}

}  // namespace gcrun::comm
