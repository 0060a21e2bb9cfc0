#include "tasks/token_sources/file_globs.h"

#include <glob.h>

#include <algorithm>
#include <memory>

#include "hyperparams/base/errors.h"
#include "outputs/files/safe_files.h"

namespace gcrun::tasks {
namespace {

// `dir` as a glob matches only itself.
std::string escapedForGlob(const std::string& dir) {
  std::string out;
  for (char c : dir) {
    if (c == '*' || c == '?' || c == '[' || c == '\\') out += '\\';
    out += c;
  }
  return out;
}

std::string quoted(const std::string& key, const std::string& pattern) { return key + " '" + pattern + "'"; }

}  // namespace

std::vector<std::string> expandFileGlob(const std::string& key, const std::string& pattern, const std::string& dir) {
  const std::string full = !pattern.empty() && pattern[0] == '/' ? pattern : escapedForGlob(dir) + "/" + pattern;
  glob_t found{};
  const std::unique_ptr<glob_t, void (*)(glob_t*)> owner(&found, globfree);
  const int status = ::glob(full.c_str(), GLOB_ERR, nullptr, &found);
  if (status == GLOB_NOMATCH || (status == 0 && found.gl_pathc == 0)) {
    throw UserError(quoted(key, pattern) + " matches no file (looked for " + full +
                    "); it accepts a glob of files, relative to task.data_dir unless absolute");
  }
  if (status != 0) throw UserError(quoted(key, pattern) + ": cannot list the folders it names (" + full + ")");
  if (found.gl_pathc > kMaxSplitFiles) {
    throw UserError(quoted(key, pattern) + " matches " + std::to_string(found.gl_pathc) + " files, more than the " +
                    std::to_string(kMaxSplitFiles) + " gcrun reads for one split; join them or narrow the glob");
  }
  std::vector<std::string> paths(found.gl_pathv, found.gl_pathv + found.gl_pathc);
  std::sort(paths.begin(), paths.end());
  for (const auto& path : paths) {
    const std::string reason = files::notRegularFileReason(path);
    if (!reason.empty()) {
      throw UserError(quoted(key, pattern) + " matches " + path + " (" + reason +
                      "); it accepts a glob of regular files only");
    }
  }
  return paths;
}

}  // namespace gcrun::tasks
