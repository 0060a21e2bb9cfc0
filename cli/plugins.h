#pragma once

#include <string>
#include <vector>

namespace CLI {
class App;
}

namespace gcrun::cli {

// A plugin is a shared library compiled against gcrun's headers (not linked with its libraries)
// that defines
//     extern "C" void gcrun_register(void);
// which adds reducers, tasks or metric sinks to the registries; the gcrun executable exports its
// symbols, so the plugin's calls resolve to the executable's registries. examples/ holds complete
// ones, built against an installed gcrun as find_package(gcrun) + gcrun::plugin.

// Adds the repeatable `--plugin PATH` option to `command`, collecting into `paths`.
void addPluginOption(CLI::App& command, std::vector<std::string>& paths);

// Loads each library (RTLD_NOW | RTLD_GLOBAL) and calls its gcrun_register(), in order. Libraries
// stay loaded for the life of the process. A missing file, a library that does not load, or one
// without gcrun_register is a UserError naming the path and the loader's message.
void loadPlugins(const std::vector<std::string>& paths);

}  // namespace gcrun::cli
