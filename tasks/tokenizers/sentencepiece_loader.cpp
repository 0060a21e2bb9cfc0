#include <dlfcn.h>

#include <filesystem>
#include <stdexcept>
#include <string>
#include <vector>

#include "tasks/tokenizers/sentencepiece_module.h"

namespace gcrun::tasks {
namespace {

// The build tree's module, then the installed one (cmake/GcrunInstall.cmake), found from the
// executable's folder so that any install prefix works (the Debian package's /usr included).
std::vector<std::string> modulePaths() {
  std::error_code error;
  const auto executable = std::filesystem::read_symlink("/proc/self/exe", error);
  std::vector<std::string> paths = {GCRUN_SENTENCEPIECE_BUILD_MODULE};
  if (!error) paths.push_back((executable.parent_path() / GCRUN_SENTENCEPIECE_INSTALLED_MODULE).string());
  return paths;
}

const SentencePieceApi& loadModule() {
  std::string tried;
  for (const std::string& name : modulePaths()) {
    const char* path = name.c_str();
    // Never closed: the table lives as long as the process.
    void* handle = ::dlopen(path, RTLD_NOW | RTLD_LOCAL | RTLD_DEEPBIND);
    if (handle == nullptr) {
      tried += std::string(tried.empty() ? "" : "; ") + ::dlerror();
      continue;
    }
    using Table = const SentencePieceApi* (*)();
    if (auto table = reinterpret_cast<Table>(::dlsym(handle, "gcrun_sentencepiece_api"))) return *table();
    tried += std::string(tried.empty() ? "" : "; ") + path + " has no gcrun_sentencepiece_api";
  }
  throw std::runtime_error("cannot load gcrun's SentencePiece module (" + tried +
                           "); reinstall gcrun, or rebuild it with libsentencepiece-dev installed");
}

}  // namespace

const SentencePieceApi& sentencePiece() {
  static const SentencePieceApi& api = loadModule();
  return api;
}

}  // namespace gcrun::tasks
