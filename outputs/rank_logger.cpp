#include "outputs/rank_logger.h"

#include <spdlog/sinks/base_sink.h>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include <cstdio>
#include <mutex>
#include <vector>

#include "hyperparams/base/text.h"
#include "outputs/files/safe_files.h"
#include "outputs/run_directory.h"

namespace gcrun::outputs {
namespace {

// Appends each line to a file opened below the run directory without following symlinks (spdlog's
// file sinks open by path). Unbuffered, as the log is what survives a crash.
class RunFileSink : public spdlog::sinks::base_sink<std::mutex> {
 public:
  RunFileSink(const std::string& run_dir, const std::string& name)
      : path_(run_dir + "/" + name), fd_(files::directoryToWrite(run_dir, name).openForAppend(name)) {}

 protected:
  void sink_it_(const spdlog::details::log_msg& message) override {
    spdlog::memory_buf_t line;
    formatter_->format(message, line);
    files::writeAll(fd_.get(), std::string_view(line.data(), line.size()), path_);
  }
  void flush_() override {}

 private:
  std::string path_;
  files::UniqueFd fd_;
};

// A line the log file could not take (a full disk) is still on the console when it matters; the
// failure is said once, in gcrun's words, instead of spdlog's "*** LOG ERROR ***" lines.
void reportLogFailure(const std::string& what) {
  static std::once_flag once;
  std::call_once(once, [&] {
    std::fprintf(stderr, "gcrun: warning: %s; the log goes on on the console only\n", oneLine(what).c_str());
  });
}

}  // namespace

std::shared_ptr<spdlog::logger> installRankLogger(const std::string& run_dir, int rank) {
  const std::string rank_text = std::to_string(rank);
  auto file_sink = std::make_shared<RunFileSink>(run_dir, run_files::rankLog(rank));
  file_sink->set_level(spdlog::level::debug);
  auto console_sink = std::make_shared<spdlog::sinks::stderr_color_sink_mt>();
  // Every rank logs the same progress; only rank 0's is worth reading on the console.
  console_sink->set_level(rank == 0 ? spdlog::level::info : spdlog::level::warn);

  auto logger = std::make_shared<spdlog::logger>("rank-" + rank_text, spdlog::sinks_init_list{file_sink, console_sink});
  logger->set_pattern("[%Y-%m-%d %H:%M:%S.%e] [%^%l%$] [rank " + rank_text + "] %v");
  logger->set_level(spdlog::level::debug);
  // The log file is what survives a crash; info lines are rare enough to flush each one.
  logger->flush_on(spdlog::level::info);
  logger->set_error_handler(reportLogFailure);
  // Another thread (a rank of a thread group, a simulated worker) may be logging through the
  // default logger's raw pointer right now: the loggers replaced stay alive for the process's life.
  static std::mutex mutex;
  static std::vector<std::shared_ptr<spdlog::logger>> replaced;
  {
    std::lock_guard<std::mutex> lock(mutex);
    replaced.push_back(spdlog::default_logger());
    replaced.push_back(logger);
  }
  // set_default_logger replaces any logger of the same name, so installing twice is fine.
  spdlog::set_default_logger(logger);
  return logger;
}

}  // namespace gcrun::outputs
