#include "outputs/report/plots.h"

#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <fcntl.h>
#include <functional>
#include <map>

#include <spdlog/fmt/fmt.h>

#include "outputs/run_files.h"

namespace gcrun::outputs {
namespace {

using PointsOf = std::function<std::vector<std::pair<double, double>>(const RunData&)>;

// Aligns the runs' points by their index (the k-th epoch of every seed), or by x itself when
// `by_x` (steps are the same across seeds).
Curve curveOf(const ConfigGroup& group, const PointsOf& points, bool by_x) {
  std::map<double, std::vector<std::pair<double, double>>> aligned;
  for (const auto* run : group.runs) {
    const auto xy = points(*run);
    for (size_t k = 0; k < xy.size(); ++k) aligned[by_x ? xy[k].first : static_cast<double>(k)].push_back(xy[k]);
  }
  Curve curve{group.name, {}};
  for (const auto& kv : aligned) {
    std::vector<double> xs, ys;
    for (const auto& [x, y] : kv.second) {
      xs.push_back(x);
      ys.push_back(y);
    }
    const auto y = spreadOf(ys);
    curve.points.push_back({spreadOf(xs).mean, y.mean, y.min, y.max});
  }
  return curve;
}

Plot plotOf(const std::vector<ConfigGroup>& groups, std::string name, std::string title, std::string x_label,
            std::string y_label, const PointsOf& points, bool by_x) {
  Plot plot{std::move(name), std::move(title), std::move(x_label), std::move(y_label), {}};
  for (const auto& group : groups) {
    auto curve = curveOf(group, points, by_x);
    if (!curve.points.empty()) plot.curves.push_back(std::move(curve));
  }
  return plot;
}

std::string quoted(const std::string& text) {
  std::string out = "\"";
  for (char c : text) out += (c == '"' || c == '\\') ? std::string("\\") + c : std::string(1, c);
  return out + "\"";
}

std::string script(const Plot& plot) {
  std::string plots;
  for (size_t i = 0; i < plot.curves.size(); ++i) {
    const auto color = fmt::format("lc {}", i + 1);
    plots += fmt::format("{}'{}.dat' index {} using 1:3:4 with filledcurves {} notitle, \\\n", i ? "     " : "",
                         plot.name, i, color);
    plots += fmt::format("     '{}.dat' index {} using 1:2 with linespoints {} pt 7 ps 0.6 lw 2 title {}{}\n", plot.name,
                         i, color, quoted(plot.curves[i].label), i + 1 < plot.curves.size() ? ", \\" : "");
  }
  const auto setup = fmt::format(
      "set title {}\nset xlabel {}\nset ylabel {}\nset key outside right top\nset grid\n"
      "set style fill transparent solid 0.2 noborder\n",
      quoted(plot.title), quoted(plot.x_label), quoted(plot.y_label));
  return fmt::format(
      "# Written by gcrun report: the mean of each configuration over its seeds, with the min-max band.\n"
      "set terminal pngcairo size 1000,600 noenhanced font 'sans,10'\nset output '{0}.png'\n{1}plot {2}"
      "set terminal svg size 1000,600 noenhanced font 'sans,10' background '#ffffff'\nset output '{0}.svg'\nreplot\n",
      plot.name, setup, plots);
}

// Runs gnuplot on `script_file` in `dir`; its messages go to gnuplot.log. -1: gnuplot is missing.
int runGnuplot(const std::string& dir, const std::string& script_file) {
  const pid_t pid = ::fork();
  if (pid < 0) return 1;
  if (pid == 0) {
    if (::chdir(dir.c_str()) != 0) ::_exit(1);
    const int log = ::open("gnuplot.log", O_WRONLY | O_CREAT | O_APPEND, 0644);
    if (log >= 0) {
      ::dup2(log, STDOUT_FILENO);
      ::dup2(log, STDERR_FILENO);
    }
    ::execlp("gnuplot", "gnuplot", script_file.c_str(), static_cast<char*>(nullptr));
    ::_exit(127);
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
  if (WIFEXITED(status) && WEXITSTATUS(status) == 127) return -1;
  return WIFEXITED(status) ? WEXITSTATUS(status) : 1;
}

}  // namespace

std::vector<Plot> reportPlots(const std::vector<ConfigGroup>& groups) {
  const std::string metric = groups.empty() ? "metric" : groups.front().metric;
  const auto epochs = [](auto x_of) {
    return [x_of](const RunData& run) {
      std::vector<std::pair<double, double>> xy;
      for (const auto& p : run.epochs) xy.emplace_back(x_of(p), p.metric);
      return xy;
    };
  };
  return {
      plotOf(groups, "metric-vs-epoch", metric + " by epoch", "epoch", metric,
             epochs([](const EpochPoint& p) { return p.epoch; }), false),
      plotOf(groups, "metric-vs-data", metric + " by data sent", "MiB sent per worker", metric,
             epochs([](const EpochPoint& p) { return p.mib; }), false),
      plotOf(groups, "metric-vs-time", metric + " by wall-clock time", "training time (s)", metric,
             epochs([](const EpochPoint& p) { return p.elapsed_s; }), false),
      plotOf(groups, "loss-vs-step", "training loss by step", "step", "training loss (mean over workers and window)",
             [](const RunData& run) {
               std::vector<std::pair<double, double>> xy;
               for (const auto& p : run.losses) xy.emplace_back(static_cast<double>(p.step), p.loss);
               return xy;
             },
             true),
  };
}

std::string plotData(const Plot& plot) {
  std::string out;
  for (size_t i = 0; i < plot.curves.size(); ++i) {
    if (i > 0) out += "\n\n";
    out += "# " + plot.curves[i].label + "\n# x mean min max\n";
    for (const auto& p : plot.curves[i].points) out += fmt::format("{:.17g} {:.17g} {:.17g} {:.17g}\n", p[0], p[1], p[2], p[3]);
  }
  return out;
}

std::string renderPlots(const std::vector<Plot>& plots, const std::string& dir) {
  std::string note;
  for (const auto& plot : plots) {
    if (plot.curves.empty()) continue;
    writeFileAtomically(dir + "/" + plot.name + ".dat", plotData(plot));
    writeFileAtomically(dir + "/" + plot.name + ".gp", script(plot));
    const int code = runGnuplot(dir, plot.name + ".gp");
    if (code == -1) return "gnuplot is not installed, so the plots are missing (apt-get install gnuplot-nox); their data is in " + dir;
    if (code != 0 && note.empty()) note = "gnuplot failed on " + plot.name + ".gp (see " + dir + "/gnuplot.log)";
  }
  return note;
}

}  // namespace gcrun::outputs
