// `gcrun bench network`'s roles: the launcher of this node's workers, and a worker that measures.
#include "experiments/bench/network_bench.h"

#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <optional>
#include <tuple>
#include <utility>

#ifdef GCRUN_WITH_CUDA
#include <c10/cuda/CUDAFunctions.h>
#endif

#include "experiments/bench/network_bench_command.h"
#include "experiments/launch/launch_environment.h"
#include "experiments/training/worker_role.h"
#include "hyperparams/base/errors.h"
#include "hyperparams/base/process.h"
#include "hyperparams/base/units.h"
#include "outputs/files/safe_files.h"
#include "reducers/comm/process_group.h"

namespace gcrun::experiments {
namespace {

using network::NetworkProfile;

std::filesystem::path outputPath(const NetworkBenchRequest& request) { return request.output; }

// The directory to write in, and the file's name there.
files::Directory outputDirectory(const NetworkBenchRequest& request) {
  const auto parent = outputPath(request).parent_path().string();
  return files::directoryToWrite(parent.empty() ? "." : parent, outputPath(request).filename().string());
}

// Refuses an output that gcrun would not write (a symlink, not a regular file, no such directory)
// and returns, with merge, the profile already there.
std::optional<NetworkProfile> checkOutput(const NetworkBenchRequest& request) {
  outputDirectory(request);
  struct stat status {};
  if (::lstat(request.output.c_str(), &status) != 0) {
    if (errno == ENOENT) return std::nullopt;
    throw UserError("--output " + request.output + ": cannot be examined");
  }
  if (S_ISLNK(status.st_mode)) {
    throw UserError("--output " + request.output + ": a symlink; gcrun writes a profile only as a file of its own");
  }
  if (!S_ISREG(status.st_mode)) throw UserError("--output " + request.output + ": not a regular file");
  if (!request.merge) return std::nullopt;
  return network::loadProfile(request.output);
}

void checkRequest(const NetworkBenchRequest& request) {
  const auto& plan = request.plan;
  if (plan.min_bytes >= plan.max_bytes) {
    throw UserError("--min-bytes " + units::byteCountText(plan.min_bytes) + " is not below --max-bytes " +
                    units::byteCountText(plan.max_bytes) + ": the fit needs two sizes or more");
  }
  if (request.backend == "nccl" && !comm::ncclAvailable()) {
    throw UserError("--backend nccl: not available in this build (LibTorch without CUDA/NCCL); use gloo");
  }
}

// The --dtypes that timeCollectives left out because the backend cannot sum them.
void printUnsummedTypes(const NetworkBenchRequest& request, const std::vector<network::Fit>& fits) {
  const auto& plan = request.plan;
  if (std::find(plan.collectives.begin(), plan.collectives.end(), CollectiveKind::all_reduce) ==
      plan.collectives.end()) {
    return;
  }
  for (const auto dtype : plan.dtypes) {
    const bool timed = std::any_of(fits.begin(), fits.end(), [&](const auto& fit) {
      return fit.collective == CollectiveKind::all_reduce && fit.dtype == dtype;
    });
    if (!timed) {
      std::printf("%s all-reduce: not timed, the %s backend here cannot sum %s (predictions cost it as float32)\n",
                  dataTypeName(dtype).c_str(), request.backend.c_str(), dataTypeName(dtype).c_str());
    }
  }
}

int measure(const NetworkBenchRequest& request, const launch::WorldSpec& world) {
  if (world.world_size < 2) {
    throw UserError("gcrun bench network: this launch has 1 worker; a network needs 2 or more (WORLD_SIZE >= 2)");
  }
#ifdef GCRUN_WITH_CUDA
  if (request.backend == "nccl") c10::cuda::set_device(static_cast<c10::DeviceIndex>(world.local_rank));
#endif
  const auto comm = comm::connect(world, request.backend, std::chrono::seconds(request.timeout_s));
  std::optional<NetworkProfile> previous;
  std::string problem;
  if (world.rank == 0) {
    try {
      previous = checkOutput(request);
    } catch (const UserError& e) {
      problem = e.what();
    }
  }
  agreeOnInput(*comm, problem, "rank 0 cannot write --output " + request.output);
  std::function<void(const SizeTiming&)> print_as_timed;
  if (world.rank == 0) {
    std::printf("%s\n", calibrationPlanText(request.plan).c_str());
    std::fflush(stdout);
    print_as_timed = [](const SizeTiming& timing) {
      std::printf("%s\n", sizeTimingLine(timing).c_str());
      std::fflush(stdout);
    };
  }
  const auto timings = timeCollectives(*comm, request.plan, print_as_timed);
  if (world.rank != 0) return 0;
  const auto fits = fitTimings(timings, world.world_size);
  std::fputs(formatCalibration(timings, fits).c_str(), stdout);
  printUnsummedTypes(request, fits);
  const auto profile = calibratedProfile(fits, request, previous ? &*previous : nullptr);
  outputDirectory(request).writeAtomically(outputPath(request).filename().string(), network::profileYaml(profile));
  std::printf("wrote %s\n", request.output.c_str());
  std::fflush(stdout);
  return 0;
}

}  // namespace

network::NetworkProfile calibratedProfile(const std::vector<network::Fit>& fits, const NetworkBenchRequest& request,
                                          const network::NetworkProfile* previous) {
  NetworkProfile profile;
  if (previous) profile = *previous;
  if (!request.name.empty()) {
    profile.name = request.name;
  } else if (profile.name.empty()) {
    profile.name = outputPath(request).stem().string();
  }
  profile.backend = request.backend;
  const auto replaced = [&](const network::Fit& old) {
    return std::any_of(fits.begin(), fits.end(), [&](const auto& fit) {
      return fit.collective == old.collective && fit.world_size == old.world_size && fit.dtype == old.dtype;
    });
  };
  profile.fits.erase(std::remove_if(profile.fits.begin(), profile.fits.end(), replaced), profile.fits.end());
  profile.fits.insert(profile.fits.end(), fits.begin(), fits.end());
  std::stable_sort(profile.fits.begin(), profile.fits.end(), [](const auto& a, const auto& b) {
    return std::tie(a.collective, a.world_size, a.dtype) < std::tie(b.collective, b.world_size, b.dtype);
  });
  return profile;
}

int runNetworkBench(const NetworkBenchRequest& request) {
  checkRequest(request);
  const auto world = launch::worldFromEnvironment();
  if (world.launched()) return measure(request, world);
  const auto& nodes = request.launch;
  if (nodes.nnodes * nodes.nproc_per_node < 2) {
    throw UserError(
        "--nproc-per-node 1 on one node: a network needs 2 or more workers; use --nproc-per-node 2, "
        "--nnodes, or a launcher such as torchrun");
  }
  if (nodes.node_rank == 0) checkOutput(request);
  std::vector<std::string> argv = {process::currentExecutable()};
  for (auto& argument : networkBenchArguments(request)) argv.push_back(std::move(argument));
  return launch::launchLocalWorkers(nodes, argv);
}

}  // namespace gcrun::experiments
