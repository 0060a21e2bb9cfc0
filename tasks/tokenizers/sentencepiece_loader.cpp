#include <dlfcn.h>

#include <stdexcept>
#include <string>

#include "tasks/tokenizers/sentencepiece_module.h"

namespace gcrun::tasks {
namespace {

// The build tree's module, then the installed one (cmake/GcrunInstall.cmake).
const char* const kModulePaths[] = {GCRUN_SENTENCEPIECE_BUILD_MODULE, GCRUN_SENTENCEPIECE_INSTALLED_MODULE};

const SentencePieceApi& loadModule() {
  std::string tried;
  for (const char* path : kModulePaths) {
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
