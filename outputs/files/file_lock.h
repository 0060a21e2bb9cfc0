#pragma once

#include <string>

#include "outputs/files/safe_files.h"

namespace gcrun::files {

// An exclusive flock on `name` in `dir` (created 0644 when missing; a symlink or a non-regular file
// there is a UserError naming it, as Directory::openLockFile refuses them), with this process's
// pid written into it for the message of whoever finds it held. The lock lives as long as the
// descriptor returned, in this process and in children that inherit it; the kernel drops it when
// they have all exited, so a crash leaves none behind. Empty when another process holds the lock;
// `holder` is then the pid that process wrote there (empty when it wrote none).
UniqueFd tryLockFile(const Directory& dir, const std::string& name, std::string& holder);

}  // namespace gcrun::files
