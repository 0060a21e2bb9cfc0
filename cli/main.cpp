#include <cstdio>
#include <exception>
#include <string>

#include <CLI/CLI.hpp>

#include "cli/commands.h"
#include "hyperparams/base/errors.h"
#include "hyperparams/base/text.h"

namespace {

// CLI11 reports a mistyped command as "a subcommand is required"; name it instead.
void checkCommand(const CLI::App& app, const std::string& name) {
  std::string known;
  for (const auto* command : app.get_subcommands([](const CLI::App*) { return true; })) {
    if (command->get_name() == name) return;
    known += (known.empty() ? "" : ", ") + command->get_name();
  }
  throw gcrun::UserError("unknown command '" + name + "'; known: " + known);
}

// gcrun's own messages are one line, but the values they quote come from flags and files: a
// newline in one must not cut the message, nor an escape sequence reach the terminal.
std::string messageLine(std::string message) {
  while (!message.empty() && message.back() == '\n') message.pop_back();
  return gcrun::oneLine(message);
}

}  // namespace

// Exit codes: 0 success; 1 a runtime failure (a worker died, a collective failed); 2 bad input
// (an unknown command, flag, experiment, key or value; a missing or corrupt file).
int main(int argc, char** argv) {
  CLI::App app{"gcrun: reproduce the PowerSGD experiments and compare gradient compressors"};
  app.set_version_flag("--version", std::string("gcrun ") + GCRUN_VERSION);
  app.require_subcommand(1);
  app.failure_message(CLI::FailureMessage::simple);

  int exit_code = 0;
  gcrun::cli::addExperimentCommand(app, exit_code);
  gcrun::cli::addListCommand(app);
  gcrun::cli::addShowCommand(app);
  gcrun::cli::addBenchCommand(app, exit_code);
  gcrun::cli::addDataCommand(app);
  gcrun::cli::addStudyCommand(app, exit_code);
  gcrun::cli::addReportCommand(app);
  gcrun::cli::addPredictCommand(app);
  gcrun::cli::addPlanCommand(app);
  gcrun::cli::addExportCommand(app);
  gcrun::cli::addSampleCommand(app);
  gcrun::cli::addCompletionCommand(app);

  try {
    if (argc > 1 && argv[1][0] != '-') checkCommand(app, argv[1]);
    app.parse(argc, argv);
    return exit_code;
  } catch (const CLI::Success& e) {  // --help, --version
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    std::fprintf(stderr, "gcrun: %s (see gcrun --help)\n", messageLine(e.what()).c_str());
    return 2;
  } catch (const gcrun::UserError& e) {
    std::fprintf(stderr, "gcrun: error: %s\n", messageLine(e.what()).c_str());
    return 2;
  } catch (const std::exception& e) {
    // LibTorch's and c10d's errors carry a C++ backtrace after their first line.
    std::fprintf(stderr, "gcrun: failed: %s\n", messageLine(gcrun::firstLine(e.what())).c_str());
    return 1;
  }
}
