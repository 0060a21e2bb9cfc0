// The launcher conventions: torchrun, Open MPI and Slurm variables, read from a fake environment.
#include <gtest/gtest.h>

#include <map>

#include "experiments/launch/launch_environment.h"
#include "hyperparams/base/errors.h"

namespace {

using gcrun::launch::firstSlurmHost;
using gcrun::launch::worldFromVariables;

gcrun::launch::EnvironmentLookup fake(std::map<std::string, std::string> variables) {
  return [variables](const std::string& name) -> std::optional<std::string> {
    const auto found = variables.find(name);
    if (found == variables.end()) return std::nullopt;
    return found->second;
  };
}

std::string userErrorOf(const std::map<std::string, std::string>& variables) {
  try {
    worldFromVariables(fake(variables));
  } catch (const gcrun::UserError& e) {
    return e.what();
  }
  return "";
}

TEST(LaunchEnvironment, NoLauncherMeansOneWorker) {
  const auto world = worldFromVariables(fake({{"PATH", "/bin"}}));
  EXPECT_EQ(world.launcher, "");
  EXPECT_EQ(world.world_size, 1);
  EXPECT_EQ(world.rank, 0);
}

TEST(LaunchEnvironment, Torchrun) {
  const auto world = worldFromVariables(fake({{"RANK", "5"},
                                              {"WORLD_SIZE", "8"},
                                              {"LOCAL_RANK", "1"},
                                              {"LOCAL_WORLD_SIZE", "4"},
                                              {"MASTER_ADDR", "node0"},
                                              {"MASTER_PORT", "29400"},
                                              {"TORCHELASTIC_USE_AGENT_STORE", "True"},
                                              {"TORCHELASTIC_RESTART_COUNT", "2"}}));
  EXPECT_EQ(world.launcher, "torchrun");
  EXPECT_EQ(world.rank, 5);
  EXPECT_EQ(world.world_size, 8);
  EXPECT_EQ(world.local_rank, 1);
  EXPECT_EQ(world.local_world_size, 4);
  EXPECT_EQ(world.master_addr, "node0");
  EXPECT_EQ(world.master_port, 29400);
  EXPECT_TRUE(world.agent_store);
  EXPECT_EQ(world.restart_count, 2);
}

TEST(LaunchEnvironment, TorchrunWithoutAgentStoreLetsRankZeroHostIt) {
  const auto world = worldFromVariables(fake({{"RANK", "0"},
                                              {"WORLD_SIZE", "2"},
                                              {"MASTER_ADDR", "h"},
                                              {"MASTER_PORT", "1"},
                                              {"TORCHELASTIC_USE_AGENT_STORE", "False"}}));
  EXPECT_FALSE(world.agent_store);
  EXPECT_EQ(world.local_world_size, 1);
}

TEST(LaunchEnvironment, OpenMpi) {
  const auto world = worldFromVariables(fake({{"OMPI_COMM_WORLD_RANK", "3"},
                                              {"OMPI_COMM_WORLD_SIZE", "4"},
                                              {"OMPI_COMM_WORLD_LOCAL_RANK", "1"},
                                              {"OMPI_COMM_WORLD_LOCAL_SIZE", "2"},
                                              {"MASTER_ADDR", "10.0.0.1"},
                                              {"MASTER_PORT", "12345"}}));
  EXPECT_EQ(world.launcher, "mpirun");
  EXPECT_EQ(world.rank, 3);
  EXPECT_EQ(world.world_size, 4);
  EXPECT_EQ(world.local_rank, 1);
  EXPECT_EQ(world.local_world_size, 2);
  EXPECT_EQ(world.master_addr, "10.0.0.1");
  EXPECT_EQ(world.master_port, 12345);
  EXPECT_FALSE(world.agent_store);
}

TEST(LaunchEnvironment, OpenMpiNeedsTheMasterAddress) {
  const auto message = userErrorOf({{"OMPI_COMM_WORLD_RANK", "0"}, {"OMPI_COMM_WORLD_SIZE", "2"}});
  EXPECT_NE(message.find("MASTER_ADDR"), std::string::npos) << message;
  EXPECT_NE(message.find("mpirun"), std::string::npos) << message;
}

TEST(LaunchEnvironment, SlurmTakesTheFirstNodeAsMaster) {
  const auto world = worldFromVariables(fake({{"SLURM_PROCID", "6"},
                                              {"SLURM_NTASKS", "8"},
                                              {"SLURM_LOCALID", "2"},
                                              {"SLURM_STEP_TASKS_PER_NODE", "4(x2)"},
                                              {"SLURM_STEP_NODELIST", "gpu[03-04]"},
                                              {"SLURM_JOB_NODELIST", "gpu[01-09]"}}));
  EXPECT_EQ(world.launcher, "srun");
  EXPECT_EQ(world.rank, 6);
  EXPECT_EQ(world.world_size, 8);
  EXPECT_EQ(world.local_rank, 2);
  EXPECT_EQ(world.local_world_size, 4);
  EXPECT_EQ(world.master_addr, "gpu03");
  EXPECT_EQ(world.master_port, 29500);
}

TEST(LaunchEnvironment, SlurmHonoursMasterVariables) {
  const auto world = worldFromVariables(fake({{"SLURM_PROCID", "0"},
                                              {"SLURM_NTASKS", "2"},
                                              {"SLURM_NTASKS_PER_NODE", "2"},
                                              {"SLURM_JOB_NODELIST", "a,b"},
                                              {"MASTER_ADDR", "login"},
                                              {"MASTER_PORT", "4000"}}));
  EXPECT_EQ(world.master_addr, "login");
  EXPECT_EQ(world.master_port, 4000);
  EXPECT_EQ(world.local_world_size, 2);
}

TEST(LaunchEnvironment, TorchrunVariablesWinOverTheSchedulerBelow) {
  const auto world = worldFromVariables(fake({{"RANK", "1"},
                                              {"WORLD_SIZE", "2"},
                                              {"MASTER_ADDR", "x"},
                                              {"MASTER_PORT", "2"},
                                              {"SLURM_PROCID", "0"},
                                              {"SLURM_NTASKS", "1"},
                                              {"OMPI_COMM_WORLD_RANK", "0"},
                                              {"OMPI_COMM_WORLD_SIZE", "1"}}));
  EXPECT_EQ(world.launcher, "torchrun");
  EXPECT_EQ(world.rank, 1);
}

TEST(LaunchEnvironment, MalformedVariablesAreNamed) {
  auto message = userErrorOf({{"RANK", "2"}, {"WORLD_SIZE", "2"}, {"MASTER_ADDR", "h"}, {"MASTER_PORT", "1"}});
  EXPECT_NE(message.find("RANK='2'"), std::string::npos) << message;
  message = userErrorOf({{"RANK", "0"}, {"WORLD_SIZE", "two"}});
  EXPECT_NE(message.find("WORLD_SIZE='two'"), std::string::npos) << message;
  message = userErrorOf({{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"MASTER_ADDR", "h"}, {"MASTER_PORT", "70000"}});
  EXPECT_NE(message.find("MASTER_PORT"), std::string::npos) << message;
  message = userErrorOf({{"WORLD_SIZE", "2"}});
  EXPECT_NE(message.find("RANK is not set"), std::string::npos) << message;
}

TEST(LaunchEnvironment, FirstSlurmHost) {
  EXPECT_EQ(firstSlurmHost("node7"), "node7");
  EXPECT_EQ(firstSlurmHost("a,b"), "a");
  EXPECT_EQ(firstSlurmHost("gpu[03-05,09],cpu1"), "gpu03");
  EXPECT_EQ(firstSlurmHost("n[7,9]"), "n7");
  EXPECT_EQ(firstSlurmHost("rack1-n[12-13]"), "rack1-n12");
}

}  // namespace

// Workers split the machine's cores by their launcher's local world size, whichever launcher set
// it (srun and mpirun set no LOCAL_WORLD_SIZE); OMP_NUM_THREADS wins when set.
TEST(LaunchEnvironment, ThreadsSplitTheCoresByTheLocalWorkers) {
  using gcrun::launch::threadsPerWorker;
  const std::map<std::string, std::string> slurm = {{"SLURM_PROCID", "1"},
                                                    {"SLURM_NTASKS", "8"},
                                                    {"SLURM_LOCALID", "1"},
                                                    {"SLURM_NTASKS_PER_NODE", "4"},
                                                    {"SLURM_STEP_NODELIST", "n[1-2]"}};
  EXPECT_EQ(threadsPerWorker(worldFromVariables(fake(slurm)), fake(slurm), 16), 4);
  const std::map<std::string, std::string> mpi = {
      {"OMPI_COMM_WORLD_RANK", "0"},       {"OMPI_COMM_WORLD_SIZE", "2"}, {"OMPI_COMM_WORLD_LOCAL_RANK", "0"},
      {"OMPI_COMM_WORLD_LOCAL_SIZE", "2"}, {"MASTER_ADDR", "h"},          {"MASTER_PORT", "1234"}};
  EXPECT_EQ(threadsPerWorker(worldFromVariables(fake(mpi)), fake(mpi), 16), 8);
  auto with_omp = mpi;
  with_omp["OMP_NUM_THREADS"] = "3";
  EXPECT_EQ(threadsPerWorker(worldFromVariables(fake(with_omp)), fake(with_omp), 16), 3);
  // One worker alone takes every core; more local workers than cores get one thread each.
  EXPECT_EQ(threadsPerWorker(worldFromVariables(fake({})), fake({}), 16), 16);
  EXPECT_EQ(threadsPerWorker(worldFromVariables(fake(slurm)), fake(slurm), 2), 1);
}
