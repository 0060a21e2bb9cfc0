#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>

#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>

#include "experiments/training/worker_role.h"
#include "hyperparams/base/tensor_map.h"
#include "reducers/comm/communicator.h"

namespace gcrun::experiments {

// The checkpoints of one run, in <run dir>/checkpoints/:
//   rank-<r>-step-<N>.pt  each rank's state: torch.save's format of a plain dict[str, Tensor], which
//                         torch.load(f, weights_only=True) reads
//   manifest.json         written last by rank 0: step, world size, and each rank file's size and
//                         FNV-1a checksum
// Every file is written atomically (temporary file, fsync, rename) and a rank deletes its older
// files only once the new manifest is in place, so a crash at any point leaves the previous
// complete checkpoint readable.
// The manifest's checksum of a rank file's bytes: 64-bit FNV-1a, written in hex.
uint64_t checkpointChecksum(std::string_view bytes);

// The most bytes a rank file of a run whose state takes `state_bytes` may have: twice that, plus
// kRankFileOverheadBytes for the pickle and the zip records (a few hundred bytes a tensor). Twice
// covers what the state gains after its first steps (momenta, a reducer's factors).
inline constexpr uint64_t kRankFileOverheadBytes = 8 << 20;
uint64_t maxRankFileBytes(uint64_t state_bytes);

// One rank's state as a resume reads it, and where it came from.
struct LoadedCheckpoint {
  TensorMap state;
  int64_t step = 0;      // the manifest's
  std::string file;      // the rank file
  std::string manifest;  // the manifest that names it
};

class CheckpointStore {
 public:
  // `device`: where the group's collectives run (CUDA for NCCL).
  CheckpointStore(std::string run_dir, comm::Communicator& comm, c10::Device device);

  // Collective: every rank calls it at the same step with its own state. `turn` is held while
  // `state()` is taken, serialized and written: simulated workers then hold one serialized copy
  // (and one of any state made for it) at a time, where all of them at once (16 GPT workers) took
  // 400 MiB at the run's end.
  void save(int64_t step, const std::function<TensorMap()>& state, const std::function<Turn()>& turn);
  // The step of the last complete checkpoint written or loaded; -1 when none.
  int64_t lastStep() const { return last_step_; }

  // This rank's state from the latest complete checkpoint; nullopt when the run has none.
  // `state_bytes`, the size of the state this run saves, bounds the rank file (maxRankFileBytes)
  // before it is read. A checkpoint of another world size, a missing, oversized, corrupt or
  // tampered file is a UserError naming the file and the mismatch (checkpoint_archive.h says what
  // is checked of its content). Reads only.
  std::optional<LoadedCheckpoint> loadLatest(uint64_t state_bytes);

  // The manifest's world size, or nullopt when `run_dir` has no checkpoint; UserError when it is
  // unreadable. For checks before any worker starts.
  static std::optional<int> savedWorldSize(const std::string& run_dir);
  // Rank `rank`'s state from `run_dir`'s latest complete checkpoint, checked as loadLatest checks
  // it, its file at most `max_file_bytes`: for reading a finished run outside a launch (gcrun
  // export). nullopt when the run has none; a rank it lacks is a UserError.
  static std::optional<LoadedCheckpoint> readRank(const std::string& run_dir, int rank, uint64_t max_file_bytes);

 private:
  std::string run_dir_;
  comm::Communicator& comm_;
  c10::Device device_;
  int64_t last_step_ = -1;
};

}  // namespace gcrun::experiments
