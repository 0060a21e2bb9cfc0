#pragma once

#include <string>
#include <vector>

namespace CLI {
class App;
}

namespace gcrun::cli {

// Each subcommand binds its flags on `app` and runs from a parse callback; errors propagate as
// exceptions to main(), the one place that turns them into messages and exit codes.
void addExperimentCommand(CLI::App& app, int& exit_code);
void addListCommand(CLI::App& app);
// What `gcrun list` lists: experiments, studies, reducers, ... (its positional's values).
std::vector<std::string> listingNames();
void addShowCommand(CLI::App& app);
void addBenchCommand(CLI::App& app, int& exit_code);
void addDataCommand(CLI::App& app);
// `gcrun data tokenizer`, under the `data` command.
void addDataTokenizerCommand(CLI::App& data);
void addStudyCommand(CLI::App& app, int& exit_code);
void addReportCommand(CLI::App& app);
void addPredictCommand(CLI::App& app);
void addPlanCommand(CLI::App& app);
void addExportCommand(CLI::App& app);
void addSampleCommand(CLI::App& app);
// Reads the other commands' options from `app` when it runs: add it last.
void addCompletionCommand(CLI::App& app);

}  // namespace gcrun::cli
