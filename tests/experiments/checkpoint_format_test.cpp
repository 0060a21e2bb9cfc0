// The checkpoint files: PyTorch loads them with torch.load(f, weights_only=True) as a plain
// dict[str, Tensor], and checkpoints of the earlier format (TorchScript-tagged pickles) still resume.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <iterator>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include <torch/serialize.h>
#include <torch/torch.h>
#include <yaml-cpp/yaml.h>

#include "experiments/training/checkpoint.h"
#include "tests/support/command.h"
#include "tests/support/temp_dir.h"

namespace gcrun {
namespace {

using testing::contains;
using testing::readFile;
using testing::runCommand;
using testing::TempDir;

const std::string kGcrun = GCRUN_BINARY_PATH;
const std::string kRun =
    " --set task.synthetic=true --set task.synthetic_samples=640 --set training.batch_size=32"
    " --set output.sinks=[jsonl]";

std::map<std::string, at::Tensor> loadInCpp(const std::string& bytes) {
  std::map<std::string, at::Tensor> state;
  for (const auto& item : torch::pickle_load(std::vector<char>(bytes.begin(), bytes.end())).toGenericDict()) {
    state[item.key().toStringRef()] = item.value().toTensor();
  }
  return state;
}

// PyTorch's name of a dtype (torch.float32 without "torch.").
std::string pythonDtype(const at::Tensor& tensor) {
  static const std::map<at::ScalarType, std::string> names = {{at::kFloat, "float32"}, {at::kDouble, "float64"},
                                                              {at::kLong, "int64"},    {at::kInt, "int32"},
                                                              {at::kByte, "uint8"},    {at::kBool, "bool"}};
  const auto found = names.find(tensor.scalar_type());
  return found == names.end() ? c10::toString(tensor.scalar_type()) : found->second;
}

std::string oneWorkerRun(const TempDir& dir, int64_t steps) {
  const std::string run = dir.file("run");
  const auto result = runCommand(kGcrun + " experiment fashion-powersgd-rank2 --output-dir " + run + kRun +
                                 " --set training.max_steps=" + std::to_string(steps));
  EXPECT_EQ(result.exit_code, 0) << result.output;
  return run;
}

TEST(CheckpointFormat, PyTorchLoadsItWithWeightsOnlyAsADictOfTensors) {
  if (runCommand("/usr/bin/python3 -c 'import torch'").exit_code != 0) {
    GTEST_SKIP() << "Debian's python3-torch is not installed (apt-get install python3-torch)";
  }
  TempDir dir;
  const std::string file = oneWorkerRun(dir, 2) + "/checkpoints/rank-0-step-2.pt";
  const auto expected = loadInCpp(readFile(file));
  ASSERT_TRUE(expected.count("param/fc1.weight") && expected.count("memory/fc1.weight") &&
              expected.count("reducer/queries") && expected.count("counter/step"));
  // Per entry: name, dtype, shape, the float64 sum and the first value (repr: exact round trip).
  const auto loaded = runCommand(
      "/usr/bin/python3 -c \"import sys, torch; d = torch.load(sys.argv[1], weights_only=True); "
      "assert type(d) is dict and all(type(k) is str and type(v) is torch.Tensor for k, v in d.items()); "
      "[print(k, str(v.dtype)[6:], list(v.shape), repr(v.double().sum().item()), "
      "repr(float(v.flatten()[0])) if v.numel() else 'nan') for k, v in d.items()]\" " +
      file);
  ASSERT_EQ(loaded.exit_code, 0) << loaded.output;
  std::istringstream lines(loaded.output);
  size_t entries = 0;
  for (std::string line; std::getline(lines, line); ++entries) {
    std::istringstream fields(line);
    std::string name, dtype, shape, sum, first;
    fields >> name >> dtype;
    std::getline(fields, shape, ']');
    fields >> sum >> first;
    ASSERT_TRUE(expected.count(name)) << line;
    const at::Tensor& tensor = expected.at(name);
    EXPECT_EQ(dtype, pythonDtype(tensor)) << line;
    EXPECT_EQ(shape + "]", " " + c10::str(tensor.sizes())) << line;
    const double want = tensor.to(torch::kDouble).sum().item<double>();
    EXPECT_NEAR(std::stod(sum), want, 1e-9 * std::max(1.0, std::abs(want))) << line;
    if (tensor.numel() > 0) {
      EXPECT_EQ(std::stod(first), tensor.flatten()[0].to(torch::kDouble).item<double>()) << line;
    }
  }
  EXPECT_EQ(entries, expected.size()) << loaded.output;
  EXPECT_TRUE(contains(loaded.output, "counter/step int64 [] 2.0 2.0\n")) << loaded.output;
}

// A rank file as torch::pickle_save wrote it before (a TorchScript-tagged dict), its manifest
// entry updated: the run resumes from it.
TEST(CheckpointFormat, CheckpointsOfTheEarlierFormatStillResume) {
  TempDir dir;
  const std::string run = oneWorkerRun(dir, 2);
  const std::string file = run + "/checkpoints/rank-0-step-2.pt";
  c10::Dict<std::string, at::Tensor> dict;
  for (const auto& [name, tensor] : loadInCpp(readFile(file))) dict.insert(name, tensor);
  const std::vector<char> old = torch::pickle_save(c10::IValue(dict));
  ASSERT_NE(std::string(old.begin(), old.end()).find("restore_type_tag"), std::string::npos);
  std::ofstream(file, std::ios::binary | std::ios::trunc).write(old.data(), static_cast<std::streamsize>(old.size()));
  const std::string manifest_path = run + "/checkpoints/manifest.json";
  const auto entry = YAML::LoadFile(manifest_path)["files"][0];
  std::ostringstream checksum;
  checksum << std::hex << experiments::checkpointChecksum(std::string_view(old.data(), old.size()));
  std::string manifest = readFile(manifest_path);
  for (const auto& [from, to] :
       {std::make_pair("\"bytes\": " + entry["bytes"].as<std::string>(), "\"bytes\": " + std::to_string(old.size())),
        std::make_pair("\"" + entry["fnv1a"].as<std::string>() + "\"", "\"" + checksum.str() + "\"")}) {
    const size_t at = manifest.find(from);
    ASSERT_NE(at, std::string::npos) << manifest;
    manifest.replace(at, from.size(), to);
  }
  std::ofstream(manifest_path, std::ios::trunc) << manifest;

  const auto resumed =
      runCommand(kGcrun + " experiment fashion-powersgd-rank2 --resume " + run + " --set training.max_steps=4");
  ASSERT_EQ(resumed.exit_code, 0) << resumed.output;
  EXPECT_TRUE(contains(resumed.output, "from the checkpoint of step 2")) << resumed.output;
  EXPECT_EQ(YAML::LoadFile(run + "/run.json")["steps"].as<int64_t>(), 4);
}

}  // namespace
}  // namespace gcrun
