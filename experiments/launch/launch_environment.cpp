#include "experiments/launch/launch_environment.h"

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <vector>

#include "hyperparams/base/errors.h"

namespace gcrun::launch {
namespace {

constexpr int kDefaultPort = 29500;

// One launcher's names for the same four facts.
struct LauncherConvention {
  const char* name;
  const char* rank;
  const char* world_size;
  const char* local_rank;
  std::vector<const char*> local_world_size;  // the first one set is used
  bool master_from_nodelist;                  // MASTER_ADDR may be derived from the node list
};

const std::vector<LauncherConvention>& conventions() {
  static const std::vector<LauncherConvention> table = {
      {"torchrun", "RANK", "WORLD_SIZE", "LOCAL_RANK", {"LOCAL_WORLD_SIZE"}, false},
      {"mpirun",
       "OMPI_COMM_WORLD_RANK",
       "OMPI_COMM_WORLD_SIZE",
       "OMPI_COMM_WORLD_LOCAL_RANK",
       {"OMPI_COMM_WORLD_LOCAL_SIZE"},
       false},
      {"srun",
       "SLURM_PROCID",
       "SLURM_NTASKS",
       "SLURM_LOCALID",
       {"SLURM_NTASKS_PER_NODE", "SLURM_STEP_TASKS_PER_NODE"},
       true},
  };
  return table;
}

// An integer in [min_value, max_value]; `leading` accepts Slurm's "4(x2)" as 4.
int integerVariable(const EnvironmentLookup& lookup, const std::string& name, int min_value, int max_value,
                    bool leading = false) {
  const auto text = lookup(name);
  if (!text) {
    throw UserError("environment: " + name + " is not set; it is needed with the other variables of its launcher");
  }
  try {
    size_t used = 0;
    const long value = std::stol(*text, &used);
    const bool whole = used == text->size() || (leading && (*text)[used] == '(');
    if (whole && value >= min_value && value <= max_value) return static_cast<int>(value);
  } catch (const std::exception&) {
  }
  throw UserError("environment: " + name + "='" + *text + "' is not valid; expected an integer from " +
                  std::to_string(min_value) + " to " + std::to_string(max_value));
}

// Long enough not to be guessed, and safe inside a store key.
std::string checkedRunToken(const std::string& token) {
  const bool safe = std::all_of(token.begin(), token.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.';
  });
  if (token.size() < 16 || token.size() > 256 || !safe) {
    throw UserError(
        std::string("environment: ") + kRunTokenVariable + " is not a usable run token; expected 16 to 256 " +
        "letters, digits, '-', '_' or '.' (e.g. the output of `openssl rand -hex 16`), the same on every node");
  }
  return token;
}

}  // namespace

EnvironmentLookup processEnvironment() {
  return [](const std::string& name) -> std::optional<std::string> {
    const char* value = std::getenv(name.c_str());
    if (value == nullptr || *value == '\0') return std::nullopt;
    return std::string(value);
  };
}

std::string firstSlurmHost(const std::string& nodelist) {
  const size_t end = nodelist.find_first_of(",[");
  if (end == std::string::npos || nodelist[end] == ',') return nodelist.substr(0, end);
  // prefix[a-b,c]suffix...: the first entry of the bracket, ranges included.
  const size_t close = nodelist.find(']', end);
  const std::string inside = nodelist.substr(end + 1, close == std::string::npos ? std::string::npos : close - end - 1);
  const std::string first = inside.substr(0, inside.find_first_of(",-"));
  return nodelist.substr(0, end) + first;
}

WorldSpec worldFromVariables(const EnvironmentLookup& lookup) {
  WorldSpec world;
  const LauncherConvention* found = nullptr;
  for (const auto& convention : conventions()) {
    if (lookup(convention.rank) || lookup(convention.world_size)) {
      found = &convention;
      break;
    }
  }
  if (found == nullptr) return world;

  world.launcher = found->name;
  world.world_size = integerVariable(lookup, found->world_size, 1, 1 << 20);
  world.rank = integerVariable(lookup, found->rank, 0, world.world_size - 1);
  world.local_rank =
      lookup(found->local_rank) ? integerVariable(lookup, found->local_rank, 0, world.world_size - 1) : 0;
  world.local_world_size = 1;
  for (const char* name : found->local_world_size) {
    if (lookup(name)) {
      world.local_world_size = integerVariable(lookup, name, 1, world.world_size, /*leading=*/true);
      break;
    }
  }
  if (world.local_rank >= world.local_world_size) world.local_world_size = world.local_rank + 1;

  if (const auto addr = lookup("MASTER_ADDR")) {
    world.master_addr = *addr;
  } else if (const auto nodes =
                 found->master_from_nodelist
                     ? (lookup("SLURM_STEP_NODELIST") ? lookup("SLURM_STEP_NODELIST") : lookup("SLURM_JOB_NODELIST"))
                     : std::nullopt) {
    world.master_addr = firstSlurmHost(*nodes);
  } else if (world.world_size > 1) {
    throw UserError(std::string("environment: MASTER_ADDR is not set; workers started by ") + found->name +
                    " need MASTER_ADDR and MASTER_PORT (the host and port of rank 0's store)");
  }
  if (lookup("MASTER_PORT")) {
    world.master_port = integerVariable(lookup, "MASTER_PORT", 1, 65535);
  } else if (world.world_size > 1 && !found->master_from_nodelist) {
    throw UserError(std::string("environment: MASTER_PORT is not set; workers started by ") + found->name +
                    " need MASTER_ADDR and MASTER_PORT (the host and port of rank 0's store)");
  } else {
    world.master_port = kDefaultPort;
  }
  const auto agent = lookup("TORCHELASTIC_USE_AGENT_STORE");
  world.agent_store = agent && (*agent == "True" || *agent == "true" || *agent == "1");
  if (const auto file = lookup(kStoreFileVariable)) world.store_file = *file;
  if (const auto token = lookup(kRunTokenVariable)) world.run_token = checkedRunToken(*token);
  if (lookup("TORCHELASTIC_RESTART_COUNT")) {
    world.restart_count = integerVariable(lookup, "TORCHELASTIC_RESTART_COUNT", 0, 1 << 20);
  }
  return world;
}

WorldSpec worldFromEnvironment() { return worldFromVariables(processEnvironment()); }

int threadsPerWorker(const WorldSpec& world, const EnvironmentLookup& lookup, int cores) {
  if (const auto requested = lookup("OMP_NUM_THREADS")) {
    const int threads = std::atoi(requested->c_str());
    if (threads > 0) return threads;
  }
  return std::max(1, cores / std::max(1, world.local_world_size));
}

std::optional<std::string> launcherRunDirectory() {
  const char* dir = std::getenv(kLauncherRunDirVariable);
  return dir != nullptr ? std::optional<std::string>(dir) : std::nullopt;
}

}  // namespace gcrun::launch
