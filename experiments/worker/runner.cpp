#include "experiments/worker/runner.h"

#include <malloc.h>
#include <sys/resource.h>

#include <algorithm>
#include <exception>
#include <limits>
#include <thread>

#include <spdlog/spdlog.h>
#include <torch/torch.h>

#ifdef GCRUN_WITH_CUDA
#include <c10/cuda/CUDAFunctions.h>
#endif

#include "experiments/launch/launch_environment.h"
#include "experiments/training/worker_role.h"
#include "experiments/worker/simulated_workers.h"
#include "experiments/worker/timeout_advice.h"
#include "hyperparams/base/errors.h"
#include "hyperparams/base/signal_flag.h"
#include "hyperparams/base/text.h"
#include "hyperparams/base/thread_team.h"
#include "outputs/metric_sink.h"
#include "outputs/trace/recorder.h"
#include "reducers/comm/collective_failure.h"
#include "reducers/comm/process_group.h"

namespace gcrun::experiments {
namespace {

c10::Device workerDevice(const ExperimentConfig& config, int local_rank) {
  // More workers than GPUs share them round-robin (Gloo allows it; NCCL needs one GPU per rank).
  if (config.device == Device::cuda) {
    const int gpus = std::max<int>(1, static_cast<int>(torch::cuda::device_count()));
    return c10::Device(c10::kCUDA, static_cast<c10::DeviceIndex>(local_rank % gpus));
  }
  return c10::Device(c10::kCPU);
}

// What a worker polls between steps: the signal the process's flag recorded, or 0.
StopSignal stopSignalOf(const SignalFlag& flag) {
  return [&flag] { return flag.received(); };
}

// Workers on one machine share its cores rather than each taking all of them; simulated workers
// count as workers, so a simulated run computes with the threads a real one would.
void limitThreads(const comm::WorldSpec& world, int simulated) {
  const int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  torch::set_num_threads(std::max(1, launch::threadsPerWorker(world, launch::processEnvironment(), cores) / simulated));
}

// A step frees what the next one allocates again (activations, their gradients, im2col buffers, a
// few MiB each). glibc's defaults hand that memory back to the system on every step: blocks above
// its mmap threshold (128 KiB until the free of a larger mapping raises it) are unmapped, and the
// heap's top is trimmed. Each step then page-faulted it all in afresh: ResNet-18 at batch 32,
// 22,000 faults (88 MiB) a step where DDP's Python workers take 4,500, its forward pass 1.9x
// slower on a VM where a fault costs ~17 us (issue 46). Fixed thresholds keep blocks up to 32 MiB
// (glibc's largest) in the heap and the heap at its peak: 13 faults a step, and a peak that grows by
// what the heap cannot reuse (ResNet-18: 660 to 805 MiB).
void keepFreedMemoryForTheNextStep(bool simulated) {
#ifdef __GLIBC__
  constexpr int kMmapThreshold = 32 << 20;
  ::mallopt(M_MMAP_THRESHOLD, kMmapThreshold);
  ::mallopt(M_TRIM_THRESHOLD, std::numeric_limits<int>::max());
  // glibc gives each thread its own heap, which keeps what one logical worker's passes freed from
  // the next one's: 16 simulated workers doubled the process's memory. One heap is shared instead.
  if (simulated) ::mallopt(M_ARENA_MAX, 1);
#else
  (void)simulated;
#endif
}

// The process's output.trace recorder; `comm` is one of its workers' (all see the same group).
trace::Recorder::Options traceOptionsOf(const ResolvedExperiment& experiment, int process_rank,
                                        const comm::Communicator& comm) {
  const bool summable = experiment.reducer.collective == CollectiveKind::all_reduce;
  return {experiment.trace_window, process_rank, comm.size(), experiment.config.reducer.name, summable, comm.backend()};
}

// Runs the process's workers, then writes its trace file with what was recorded, also when they
// fail or stop early.
template <class Run>
RunResult writingTrace(const trace::Recorder& recorder, Run&& run) {
  try {
    auto result = run();
    recorder.writeFile();
    return result;
  } catch (...) {
    recorder.writeFile();
    throw;
  }
}

// How much a simulated worker's failure says about the run, least first: it stopped because another
// failed, its collective lost a peer that had failed, its collective timed out, or its own error
// (which ended the others').
int causeRank(const std::exception_ptr& failure) {
  try {
    std::rethrow_exception(failure);
  } catch (const AnotherWorkerFailed&) {
    return 0;
  } catch (const comm::CollectiveFailed& e) {
    return e.timedOut() ? 2 : 1;
  } catch (...) {
    return 3;
  }
}

// Rethrows the failure that says most; a collective's timeout names the setting to raise and the
// turns the workers were waiting for.
[[noreturn]] void rethrowCause(const std::vector<std::exception_ptr>& failures, const SimulatedTurns& turns,
                               double timeout_s) {
  std::exception_ptr cause;
  for (const auto& failure : failures) {
    if (failure && (!cause || causeRank(failure) > causeRank(cause))) cause = failure;
  }
  try {
    std::rethrow_exception(cause);
  } catch (const comm::CollectiveFailed& e) {
    throw std::runtime_error(collectiveFailureText(e, timeout_s, turns));
  }
}

// The process's logical workers as threads over their own ranks; returns logical worker 0's
// result. A failure ends the others (their waits and turns throw, their collectives lose a peer)
// and the failure that says most is what is rethrown.
RunResult runSimulated(const ResolvedExperiment& experiment, const RunOptions& options, const comm::WorldSpec& world,
                       std::vector<std::unique_ptr<comm::Communicator>>& comms, const SignalFlag& stop_signals,
                       trace::Recorder& recorder) {
  const int workers = static_cast<int>(comms.size());
  SharedParameters shared;
  const auto device = workerDevice(experiment.config, world.local_rank);
  std::vector<RunResult> results(workers);
  std::vector<std::exception_ptr> failures(workers);
  runThreadTeam(
      workers,
      [&](int w) {
        try {
          SimulatedWorker role(shared, w, experiment.sync.local_replicas);
          results[w] =
              WorkerRun(experiment, options, *comms[w], device, role, stopSignalOf(stop_signals), recorder).run();
        } catch (const std::exception&) {
          failures[w] = std::current_exception();
          shared.fail();
          comms[w].reset();  // its peers' collectives fail now rather than at the timeout
        }
      },
      "distributed.simulated_workers=" + std::to_string(workers));
  if (std::any_of(failures.begin(), failures.end(), [](const auto& f) { return f != nullptr; })) {
    rethrowCause(failures, {workers, shared.compute().longestTurnS()}, experiment.config.distributed.timeout_s);
  }
  return results.front();
}

}  // namespace

RunResult runWorker(const ResolvedExperiment& experiment, const RunOptions& options, const comm::WorldSpec& world) {
  const auto& config = experiment.config;
  const bool simulated = config.distributed.simulated_workers > 1;
  limitThreads(world, static_cast<int>(config.distributed.simulated_workers));
#ifdef GCRUN_WITH_CUDA
  // NCCL and the trainer's small collectives use the current device: make it this worker's GPU.
  if (config.device == Device::cuda) c10::cuda::set_device(workerDevice(config, world.local_rank).index());
#endif
  const auto timeout = std::chrono::milliseconds(static_cast<int64_t>(config.distributed.timeout_s * 1000));
  keepFreedMemoryForTheNextStep(simulated);
  // The group first: rank 0 hosts the store that the peer monitor then connects to.
  std::unique_ptr<comm::Communicator> comm;
  std::vector<std::unique_ptr<comm::Communicator>> simulated_comms;
  if (simulated) {
    simulated_comms = comm::connectSimulated(world, static_cast<int>(config.distributed.simulated_workers), timeout);
  } else {
    comm = comm::connect(world, nameOf(experiment.backend), timeout);
  }
  if (world.rank == 0 && world.world_size > 1 && world.store_file.empty() && !world.agent_store &&
      world.run_token.empty()) {
    spdlog::warn(
        "the store at {}:{} accepts any client that reaches the port: set GCRUN_RUN_TOKEN to the same "
        "secret on every node to keep other clients out of the group",
        world.master_addr, world.master_port);
  }
  auto monitor = comm::monitorPeers(world, timeout);
  // Until this worker returns, the signals only ask it to stop: the launcher's SIGTERM after a
  // peer died must not cut short the report of which peer it was.
  const SignalFlag stop_signals;
  trace::Recorder recorder(traceOptionsOf(experiment, world.rank, simulated ? *simulated_comms.front() : *comm));
  try {
    return writingTrace(recorder, [&] {
      if (simulated) return runSimulated(experiment, options, world, simulated_comms, stop_signals, recorder);
      PlainWorker role;
      return WorkerRun(experiment, options, *comm, workerDevice(config, world.local_rank), role,
                       stopSignalOf(stop_signals), recorder)
          .run();
    });
  } catch (const UserError&) {
    throw;
  } catch (const TrainingDiverged&) {
    throw;
  } catch (const comm::CollectiveFailed& e) {
    const std::string failure = collectiveFailureText(e, config.distributed.timeout_s, std::nullopt);
    const std::string failed_peers = monitor ? monitor->diagnose() : "";
    if (failed_peers.empty()) throw std::runtime_error(failure);
    throw std::runtime_error(failed_peers + "; this worker stops (" + failure + ")");
  } catch (const std::exception& e) {
    // Most likely a collective that failed because a peer died: name the peer.
    if (!monitor) throw;
    const std::string failed_peers = monitor->diagnose();
    if (failed_peers.empty()) throw;
    throw std::runtime_error(failed_peers + "; this worker stops (" + firstLine(e.what()) + ")");
  }
}

RunResult runWorker(const ResolvedExperiment& experiment, const RunOptions& options, comm::Communicator& comm,
                    int local_rank) {
  PlainWorker role;
  trace::Recorder recorder(traceOptionsOf(experiment, comm.rank(), comm));
  return writingTrace(recorder, [&] {
    return WorkerRun(experiment, options, comm, workerDevice(experiment.config, local_rank), role, StopSignal(),
                     recorder)
        .run();
  });
}

}  // namespace gcrun::experiments
