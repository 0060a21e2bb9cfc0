#include "experiments/training/checkpoint.h"

#include <algorithm>
#include <sstream>
#include <string_view>
#include <vector>

#include <caffe2/serialize/inline_container.h>
#include <torch/csrc/jit/serialization/export.h>
#include <torch/csrc/jit/serialization/pickler.h>
#include <torch/torch.h>

#include "experiments/training/checkpoint_archive.h"
#include "hyperparams/base/errors.h"
#include "hyperparams/base/text.h"
#include "outputs/files/safe_files.h"
#include "outputs/json_document.h"
#include "outputs/run_directory.h"

namespace gcrun::experiments {
namespace {

constexpr int kFormat = 1;

std::string rankFile(int rank, int64_t step) {
  return "rank-" + std::to_string(rank) + "-step-" + std::to_string(step) + ".pt";
}

// The checkpoint directory of `run_dir`, or nullopt when it has none. A symlink or a file in its
// place is a UserError: a resume would write (and delete old rank files) through it.
std::optional<files::Directory> checkpointDirectory(const std::string& run_dir, bool create) {
  const auto run = files::Directory::open(run_dir, false);
  if (!create && !run.has(outputs::run_files::kCheckpoints)) return std::nullopt;
  return run.sub(outputs::run_files::kCheckpoints, create);
}

struct Manifest {
  int64_t step = 0;
  int world_size = 0;
  std::vector<std::string> files;
  std::vector<uint64_t> sizes;
  std::vector<uint64_t> checksums;
};

std::optional<Manifest> readManifest(const std::optional<files::Directory>& dir) {
  if (!dir || !dir->has(outputs::run_files::kManifest)) return std::nullopt;
  const std::string path = dir->pathOf(outputs::run_files::kManifest);
  try {
    std::string why;
    const auto parsed = outputs::parseJson(files::readBoundedFile(path, files::kMaxRecordBytes), &why);
    if (!parsed) throw UserError(path + ": not a readable checkpoint manifest (not JSON: " + why + ")");
    const auto& node = *parsed;
    // at() and get<>() throw on a missing key or a value of another type: the catch below names the file.
    if (!node.at("format").is_number_integer() || node.at("format").get<int>() != kFormat) {
      throw UserError(path + ": checkpoint format " + node.at("format").dump() + ", this gcrun reads " +
                      std::to_string(kFormat));
    }
    Manifest manifest;
    manifest.step = node.at("step").get<int64_t>();
    manifest.world_size = node.at("world_size").get<int>();
    const auto& files = node.at("files");
    if (!files.is_array() || files.size() != static_cast<size_t>(std::max(0, manifest.world_size))) {
      throw UserError(path + ": lists " + std::to_string(files.is_array() ? files.size() : 0) +
                      " rank files for world size " + std::to_string(manifest.world_size));
    }
    for (const auto& file : files) {
      manifest.files.push_back(file.at("file").get<std::string>());
      manifest.sizes.push_back(file.at("bytes").get<uint64_t>());
      manifest.checksums.push_back(std::stoull(file.at("fnv1a").get<std::string>(), nullptr, 16));
    }
    if (manifest.step < 0) throw UserError(path + ": step " + std::to_string(manifest.step) + " is negative");
    if (manifest.world_size < 1) {
      throw UserError(path + ": world_size " + std::to_string(manifest.world_size) + " is not a positive count");
    }
    for (const auto& file : manifest.files) {
      // The files sit beside the manifest: a path could make a resume read (or a cleanup touch)
      // something outside the checkpoint directory.
      if (file.empty() || file.find('/') != std::string::npos || file == "." || file == "..") {
        throw UserError(path + ": file name '" + clipForMessage(file) + "' is not a plain file name in this directory");
      }
    }
    return manifest;
  } catch (const UserError&) {
    throw;
  } catch (const std::exception& e) {
    throw UserError(path + ": not a readable checkpoint manifest (" + firstLine(e.what()) + ")");
  }
}

// torch.save's zip layout (data.pkl, data/<i>) around a pickle without TorchScript's type tags:
// torch::pickle_save tags the dict with torch.jit._pickle.restore_type_tag, which
// torch.load(weights_only=True) refuses; untagged it is a plain dict of _rebuild_tensor_v2
// tensors. readTensorArchive reads both, so checkpoints of earlier versions stay readable.
std::vector<char> pickleTensorDict(const c10::Dict<std::string, at::Tensor>& dict) {
  std::vector<char> pickled;
  torch::jit::Pickler pickler([&](const char* data, size_t size) { pickled.insert(pickled.end(), data, data + size); },
                              nullptr, nullptr, nullptr, nullptr, /*tag_aggregates=*/false);
  pickler.protocol();
  pickler.pushIValue(c10::IValue(dict));
  pickler.stop();
  std::vector<char> archive;
  caffe2::serialize::PyTorchStreamWriter writer([&](const void* data, size_t size) {
    const char* bytes = static_cast<const char*>(data);
    archive.insert(archive.end(), bytes, bytes + size);
    return size;
  });
  torch::jit::writeArchiveAndTensors("data", pickled.data(), pickled.size(), pickler.tensorData(), writer);
  writer.writeEndOfFile();
  return archive;
}

std::string hex(uint64_t value) {
  std::ostringstream out;
  out << std::hex << value;
  return out.str();
}

// Rank `rank`'s file as `manifest` names it, its size already checked against the run's bound: a
// larger file, a device or a FIFO is refused before it is read, a shorter one after, and so is one
// whose checksum or content is not what the manifest and a checkpoint's format say.
LoadedCheckpoint readRankFile(const files::Directory& dir, const Manifest& manifest, int rank) {
  const std::string path = dir.pathOf(manifest.files[rank]);
  const uint64_t size = manifest.sizes[rank];
  const std::string bytes = files::readBoundedFile(path, size);
  if (bytes.size() != size) throw UserError(path + ": corrupt checkpoint: it is shorter than manifest.json says");
  if (checkpointChecksum(bytes) != manifest.checksums[rank]) {
    throw UserError(path + ": corrupt checkpoint: its checksum differs from manifest.json's");
  }
  LoadedCheckpoint loaded{{}, manifest.step, path, dir.pathOf(outputs::run_files::kManifest)};
  try {
    loaded.state = readTensorArchive(bytes);
  } catch (const std::exception& e) {
    throw UserError(path + ": corrupt checkpoint: " + firstLine(e.what()));
  }
  return loaded;
}

}  // namespace

uint64_t checkpointChecksum(std::string_view bytes) {
  uint64_t hash = 1469598103934665603ull;
  for (unsigned char c : bytes) {
    hash ^= c;
    hash *= 1099511628211ull;
  }
  return hash;
}

CheckpointStore::CheckpointStore(std::string run_dir, comm::Communicator& comm, c10::Device device)
    : run_dir_(std::move(run_dir)), comm_(comm), device_(device) {}

void CheckpointStore::save(int64_t step, const std::function<TensorMap()>& state, const std::function<Turn()>& turn) {
  const std::string name = rankFile(comm_.rank(), step);
  // A resume has checked the directory before training; one that changes under a running job is
  // a runtime failure (exit 1) like any other write error, not bad input.
  std::optional<files::Directory> opened;
  int64_t size = 0;
  uint64_t checksum = 0;
  {
    const Turn held = turn();
    c10::Dict<std::string, at::Tensor> dict;
    for (const auto& kv : state()) dict.insert(kv.first, kv.second.detach().cpu());
    const std::vector<char> pickled = pickleTensorDict(dict);
    const std::string_view bytes(pickled.data(), pickled.size());  // a copy would double the peak memory
    try {
      opened = checkpointDirectory(run_dir_, /*create=*/true);
      opened->writeAtomically(name, bytes);
    } catch (const UserError& e) {
      throw std::runtime_error(e.what());
    }
    size = static_cast<int64_t>(bytes.size());
    checksum = checkpointChecksum(bytes);
  }
  const auto& dir = *opened;

  // Gathering sizes and checksums is also the barrier: every rank's file is in place before the
  // manifest names it.
  auto mine = torch::tensor({size, static_cast<int64_t>(checksum)}, torch::kInt64).to(device_);
  const auto all = comm_.allgather(mine);
  if (comm_.rank() == 0) {
    outputs::Json files = outputs::Json::array();
    for (int r = 0; r < comm_.size(); ++r) {
      const auto entry = all[r].cpu();
      files.push_back({{"file", rankFile(r, step)},
                       {"bytes", entry[0].item<int64_t>()},
                       {"fnv1a", hex(static_cast<uint64_t>(entry[1].item<int64_t>()))}});
    }
    const outputs::Json manifest{{"format", kFormat}, {"step", step}, {"world_size", comm_.size()}, {"files", files}};
    dir.writeAtomically(outputs::run_files::kManifest, outputs::jsonText(manifest) + "\n");
  }
  comm_.barrier();
  const std::string prefix = "rank-" + std::to_string(comm_.rank()) + "-step-";
  for (const auto& file : dir.entries()) {
    if (file.rfind(prefix, 0) == 0 && file != name) dir.removeFile(file);
  }
  last_step_ = step;
}

uint64_t maxRankFileBytes(uint64_t state_bytes) { return 2 * state_bytes + kRankFileOverheadBytes; }

std::optional<LoadedCheckpoint> CheckpointStore::loadLatest(uint64_t state_bytes) {
  const auto dir = checkpointDirectory(run_dir_, /*create=*/false);
  const auto manifest = readManifest(dir);
  if (!manifest) return std::nullopt;
  if (manifest->world_size != comm_.size()) {
    throw UserError(dir->pathOf(outputs::run_files::kManifest) + ": the checkpoint has " +
                    std::to_string(manifest->world_size) + " workers, this run " + std::to_string(comm_.size()) +
                    "; resume with as many workers as it saved");
  }
  const uint64_t size = manifest->sizes[comm_.rank()];
  // The manifest is no more trusted than the file: the model bounds what is read.
  if (size > maxRankFileBytes(state_bytes)) {
    throw UserError(dir->pathOf(manifest->files[comm_.rank()]) + ": manifest.json gives it " + std::to_string(size) +
                    " bytes, more than the " + std::to_string(maxRankFileBytes(state_bytes)) +
                    " a checkpoint of this run can take (twice its " + std::to_string(state_bytes) +
                    " bytes of state, plus 8 MiB)");
  }
  auto loaded = readRankFile(*dir, *manifest, comm_.rank());
  last_step_ = manifest->step;
  return loaded;
}

std::optional<LoadedCheckpoint> CheckpointStore::readRank(const std::string& run_dir, int rank,
                                                          uint64_t max_file_bytes) {
  const auto dir = checkpointDirectory(run_dir, /*create=*/false);
  const auto manifest = readManifest(dir);
  if (!manifest) return std::nullopt;
  const std::string path = dir->pathOf(outputs::run_files::kManifest);
  if (rank < 0 || rank >= manifest->world_size) {
    throw UserError(path + ": the checkpoint has " + std::to_string(manifest->world_size) + " workers, no rank " +
                    std::to_string(rank));
  }
  if (manifest->sizes[rank] > max_file_bytes) {
    throw UserError(dir->pathOf(manifest->files[rank]) + ": manifest.json gives it " +
                    std::to_string(manifest->sizes[rank]) + " bytes, more than the " + std::to_string(max_file_bytes) +
                    " read here");
  }
  return readRankFile(*dir, *manifest, rank);
}

std::optional<int> CheckpointStore::savedWorldSize(const std::string& run_dir) {
  const auto manifest = readManifest(checkpointDirectory(run_dir, /*create=*/false));
  if (!manifest) return std::nullopt;
  return manifest->world_size;
}

}  // namespace gcrun::experiments
