#include <cstdio>
#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <torch/torch.h>
#include <CLI/CLI.hpp>

#include "cli/commands.h"
#include "cli/exported_model.h"
#include "cli/plugins.h"
#include "hyperparams/base/errors.h"
#include "hyperparams/settings.h"
#include "outputs/export/safetensors.h"
#include "outputs/files/safe_files.h"
#include "outputs/progress/progress_line.h"
#include "outputs/run_directory.h"

namespace gcrun::cli {
namespace {

struct ExportFlags {
  std::string run;
  std::string format;
  std::string output;
  bool force = false;
  std::vector<std::string> plugins;  // a plugin task's run needs its plugin
};

std::string safetensorsDtype(const at::Tensor& tensor, const std::string& name) {
  static const std::map<at::ScalarType, std::string> dtypes = {
      {at::kFloat, "F32"}, {at::kDouble, "F64"}, {at::kHalf, "F16"}, {at::kBFloat16, "BF16"}, {at::kLong, "I64"},
      {at::kInt, "I32"},   {at::kShort, "I16"},  {at::kChar, "I8"},  {at::kByte, "U8"},       {at::kBool, "BOOL"}};
  const auto found = dtypes.find(tensor.scalar_type());
  if (found == dtypes.end()) {
    throw UserError("tensor '" + name + "' is of dtype " + std::string(c10::toString(tensor.scalar_type())) +
                    ", which safetensors cannot hold");
  }
  return found->second;
}

// What the file says about where it came from (docs/export.md): the run, its settings, the model
// and, for a language model, its tokenizer.
std::map<std::string, std::string> exportMetadata(const ExportFlags& flags, const RunSettings& settings,
                                                  const ExportedModel& model) {
  const auto& config = settings.config;
  std::map<std::string, std::string> metadata = {
      {"format", "gcrun export 1"},
      {"gcrun_version", GCRUN_VERSION},
      {"run", flags.run},
      {"run_name", std::filesystem::path(flags.run).lexically_normal().filename().string()},
      {"step", std::to_string(model.step)},
      {"world_size", std::to_string(model.world_size)},
      {"model", model.model},
      {"task", config.task.name},
      {"architecture", config.task.architecture},
      {"settings", settings.yaml}};
  if (const auto info = outputs::RunDirectory(flags.run).readInfo()) metadata["experiment"] = info->experiment;
  if (const auto facts = languageModelFacts(config)) {
    const auto level = config.task.settings.find(facts->level_setting);
    if (level != config.task.settings.end()) metadata["tokenizer"] = hyperparams::formatSetting(level->second);
    const auto file = config.task.settings.find(facts->tokenizer_file_setting);
    if (file != config.task.settings.end() && !hyperparams::formatSetting(file->second).empty()) {
      metadata["tokenizer_model"] = hyperparams::formatSetting(file->second);
    }
    for (const auto& [name, tensor] : model.tensors) {
      if (name == facts->token_embedding) metadata["vocabulary_size"] = std::to_string(tensor.size(0));
    }
    metadata["data"] = config.task.synthetic ? "synthetic" : config.task.data_dir;
  }
  return metadata;
}

std::vector<outputs::SafetensorsTensor> safetensorsTensors(const ExportedModel& model) {
  std::vector<outputs::SafetensorsTensor> tensors;
  for (const auto& [name, tensor] : model.tensors) {
    const auto* data = static_cast<const char*>(tensor.data_ptr());
    tensors.push_back(
        {name, safetensorsDtype(tensor, name), tensor.sizes().vec(), std::string_view(data, tensor.nbytes())});
  }
  return tensors;
}

// Written through a temporary file and a rename in FILE's directory: a reader never sees half a
// file, and a symlink at FILE is replaced (with --force), never written through. The header, then
// each tensor's bytes straight from the model: no copy of the whole file in memory. Returns its size.
uint64_t writeExport(const ExportFlags& flags, const RunSettings& settings, const ExportedModel& model) {
  const std::filesystem::path output(flags.output);
  const std::string name = output.filename().string();
  if (name.empty() || name == "." || name == "..") throw UserError("--output " + flags.output + ": not a file name");
  const std::string parent = output.has_parent_path() ? output.parent_path().string() : ".";
  const auto dir = files::directoryToWrite(parent, name);
  if (dir.has(name) && !flags.force) {
    throw UserError("--output " + flags.output + ": exists; pass --force to replace it");
  }
  const auto tensors = safetensorsTensors(model);
  const std::string header = outputs::safetensorsHeader(tensors, exportMetadata(flags, settings, model));
  uint64_t size = header.size(), total = header.size();
  for (const auto& tensor : tensors) total += tensor.bytes.size();
  outputs::ProgressLine progress("writing " + flags.output, static_cast<int64_t>(total >> 20), "MiB");
  dir.writeAtomicallyInPieces(name, [&](const files::Directory::PieceWriter& write) {
    write(header);
    for (const auto& tensor : tensors) {
      write(tensor.bytes);
      size += tensor.bytes.size();
      progress.update(static_cast<int64_t>(size >> 20), static_cast<int64_t>(total >> 20));
    }
  });
  return size;
}

void runExport(const ExportFlags& flags) {
  if (flags.format != "safetensors") {
    throw UserError("--format " + flags.format + ": unknown export format; supported: safetensors");
  }
  loadPlugins(flags.plugins);
  const auto settings = runSettings(flags.run);
  const auto model = exportedModel(flags.run, settings.config);
  const uint64_t bytes = writeExport(flags, settings, model);
  std::printf("exported %zu tensors (%.1f MiB) to %s: %s at step %lld\n", model.tensors.size(),
              static_cast<double>(bytes) / (1 << 20), flags.output.c_str(), model.model.c_str(),
              static_cast<long long>(model.step));
}

}  // namespace

void addExportCommand(CLI::App& app) {
  auto flags = std::make_shared<ExportFlags>();
  auto* command = app.add_subcommand("export", "A run's final model as a file for other tools (docs/export.md)");
  command->add_option("run", flags->run, "The run directory (gcrun experiment's --output-dir)")->required();
  command->add_option("--format", flags->format, "safetensors")->required();
  command->add_option("--output", flags->output, "The file to write")->required();
  command->add_flag("--force", flags->force, "Replace --output if it exists");
  addPluginOption(*command, flags->plugins);
  command->callback([flags] { runExport(*flags); });
}

}  // namespace gcrun::cli
