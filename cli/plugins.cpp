#include "cli/plugins.h"

#include <dlfcn.h>

#include <filesystem>

#include <CLI/CLI.hpp>

#include "hyperparams/base/errors.h"
#include "hyperparams/base/text.h"
#include "outputs/files/safe_files.h"

namespace gcrun::cli {
namespace {

std::string loaderError() {
  const char* message = ::dlerror();
  return message ? message : "unknown error";
}

void loadPlugin(const std::string& path) {
  if (const auto why = files::notRegularFileReason(path); !why.empty()) {
    throw UserError("--plugin " + path + ": " + why + "; --plugin takes a shared library (.so) file");
  }
  // An absolute path, so that dlopen does not search the library path for a bare file name.
  const auto absolute = std::filesystem::absolute(path).string();
  void* library = ::dlopen(absolute.c_str(), RTLD_NOW | RTLD_GLOBAL);
  if (!library) throw UserError("--plugin " + path + ": cannot load: " + loaderError());
  ::dlerror();
  void* symbol = ::dlsym(library, "gcrun_register");
  if (!symbol) {
    throw UserError("--plugin " + path + ": no gcrun_register function: " + loaderError());
  }
  // A plugin is trusted code, but its failure is still named: whatever it throws becomes one line.
  try {
    reinterpret_cast<void (*)()>(symbol)();
  } catch (const std::exception& e) {
    throw UserError("--plugin " + path + ": gcrun_register failed: " + firstLine(e.what()));
  } catch (...) {
    throw UserError("--plugin " + path + ": gcrun_register failed with an exception that is no std::exception");
  }
}

}  // namespace

void addPluginOption(CLI::App& command, std::vector<std::string>& paths) {
  command.add_option("--plugin", paths,
                     "Shared library whose gcrun_register() adds reducers, tasks or sinks (repeatable)");
}

void loadPlugins(const std::vector<std::string>& paths) {
  for (const auto& path : paths) loadPlugin(path);
}

}  // namespace gcrun::cli
