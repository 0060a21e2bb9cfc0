#include "outputs/report/plots.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <functional>
#include <map>
#include <optional>
#include <random>
#include <stdexcept>

#include <spdlog/fmt/fmt.h>

#include "hyperparams/base/errors.h"
#include "hyperparams/base/process.h"
#include "outputs/report/safe_text.h"

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

// The ticks of `labels` at 1, 2, ...: "('a' 1, 'b' 2)".
std::string ticList(const std::vector<std::string>& labels) {
  std::string tics;
  for (size_t i = 0; i < labels.size(); ++i)
    tics += fmt::format("{}{} {}", i ? ", " : "", gnuplotString(labels[i]), i + 1);
  return "(" + tics + ")";
}

// Colour bar ticks at powers of 2 within [1/limit, limit], 1 among them, at most 9 of them:
// "('0.5x' 0.5, '1x' 1, '2x' 2)".
std::string ratioTics(double limit) {
  const int most = static_cast<int>(std::floor(std::log2(limit)));
  const int step = std::max(1, (2 * most + 9) / 9);
  std::string tics;
  for (int k = -(most / step) * step; k <= most; k += step) {
    const double tic = std::pow(2.0, k);
    tics += fmt::format("{}'{:g}x' {:g}", tics.empty() ? "" : ", ", tic, tic);
  }
  return "(" + tics + ")";
}

// A heat map: filled unit boxes coloured by value on a log colour scale centred at 1, symmetric so
// that 1 is white, at least 0.5x to 2x so that small differences stay pale; labels from the
// script, each a string literal.
std::string heatMapScript(const Plot& plot) {
  double limit = 2;
  for (const auto& cell : plot.cells) {
    if (cell.value && *cell.value > 0) limit = std::max({limit, *cell.value, 1 / *cell.value});
  }
  std::string labels;
  int tag = 0;
  for (const auto& cell : plot.cells) {
    const double middle = (static_cast<double>(cell.label.size()) - 1) / 2;
    for (size_t line = 0; line < cell.label.size(); ++line) {
      labels += fmt::format("set label {} {} at {},{} center front offset 0,{:g}\n", ++tag,
                            gnuplotString(cell.label[line]), cell.x, cell.y, 1.2 * (middle - line));
    }
  }
  return fmt::format(
      "set title {}\nset xlabel {}\nset ylabel {}\nunset key\nset tics scale 0\n"
      "set xrange [0.5:{}.5]\nset yrange [0.5:{}.5]\nset xtics {}\nset ytics {}\n"
      "set logscale cb\nset cbrange [{:.17g}:{:.17g}]\nset cbtics {}\nset cblabel {}\n"
      "set palette defined (0 '#b2182b', 0.5 '#f7f7f7', 1 '#2166ac')\n{}"
      "plot '{}.dat' using 1:2:(0.5):(0.5):3 with boxxyerror fs solid 1.0 noborder fc palette\n",
      gnuplotString(plot.title), gnuplotString(plot.x_label), gnuplotString(plot.y_label), plot.x_tics.size(),
      plot.y_tics.size(), ticList(plot.x_tics), ticList(plot.y_tics), 1 / limit, limit, ratioTics(limit),
      gnuplotString(plot.colour_label), labels, plot.name);
}

std::string curvesScript(const Plot& plot) {
  std::string plots;
  for (size_t i = 0; i < plot.curves.size(); ++i) {
    const auto& curve = plot.curves[i];
    const auto color = fmt::format("lc {}", i + 1);
    const char* separator = i + 1 < plot.curves.size() ? ", \\" : "";
    if (curve.marks) {
      plots += fmt::format("{}'{}.dat' index {} using 1:2 with points {} pt 9 ps 1.6 title {}{}\n", i ? "     " : "",
                           plot.name, i, color, gnuplotString(curve.label), separator);
      continue;
    }
    plots += fmt::format("{}'{}.dat' index {} using 1:3:4 with filledcurves {} notitle, \\\n", i ? "     " : "",
                         plot.name, i, color);
    plots += fmt::format("     '{}.dat' index {} using 1:2 with linespoints {} pt 7 ps 0.6 lw 2 title {}{}\n",
                         plot.name, i, color, gnuplotString(curve.label), separator);
  }
  const std::string tics =
      plot.x_tics.empty() ? "" : "set xtics rotate by -50 font ',8' " + ticList(plot.x_tics) + "\nset bmargin 9\n";
  return fmt::format(
      "set title {}\nset xlabel {}\nset ylabel {}\nset key outside right top\nset grid\n"
      "set style fill transparent solid 0.2 noborder\n{}{}{}plot {}",
      gnuplotString(plot.title), gnuplotString(plot.x_label), gnuplotString(plot.y_label),
      plot.log_x ? "set logscale x\n" : "", plot.log_y ? "set logscale y\n" : "", tics, plots);
}

std::string script(const Plot& plot) {
  return fmt::format(
      "# Written by gcrun report: {}\n"
      "set terminal pngcairo size 1000,600 noenhanced font 'sans,10'\nset output '{}.png'\n{}"
      "set terminal svg size 1000,600 noenhanced font 'sans,10' background '#ffffff'\nset output '{}.svg'\nreplot\n",
      plot.cells.empty() ? "the mean of each configuration over its seeds, with the min-max band."
                         : "one coloured cell per x and y.",
      plot.name, plot.cells.empty() ? curvesScript(plot) : heatMapScript(plot), plot.name);
}

bool hasData(const Plot& plot) {
  return !plot.curves.empty() ||
         std::any_of(plot.cells.begin(), plot.cells.end(), [](const HeatCell& cell) { return cell.value.has_value(); });
}

// gnuplot's path on PATH, or "" when it is not installed: looked up before fork, since the child
// may do nothing but exec.
std::string findGnuplot() {
  const char* path = std::getenv("PATH");
  const std::string dirs = path ? path : "/usr/bin:/bin";
  for (size_t start = 0; start <= dirs.size();) {
    const size_t end = std::min(dirs.find(':', start), dirs.size());
    const std::string candidate = (end == start ? std::string(".") : dirs.substr(start, end - start)) + "/gnuplot";
    struct stat info {};
    if (::stat(candidate.c_str(), &info) == 0 && S_ISREG(info.st_mode) && ::access(candidate.c_str(), X_OK) == 0) {
      return candidate;
    }
    start = end + 1;
  }
  return "";
}

// Runs gnuplot on `script_file` with its working directory in `work`, its messages into `log`.
// gnuplot opens its `set output` files by path, following symlinks; `work` is a directory nobody
// else could have planted anything in.
int runGnuplot(const std::string& gnuplot, const files::Directory& work, int log, const std::string& script_file) {
  process::ChildSpec child;
  child.program = gnuplot;
  child.argv = {"gnuplot", script_file};
  child.environment = process::Environment::inherited();
  child.output_fd = log;
  child.working_directory_fd = work.fd();
  try {
    return process::waitForExit(process::spawn(child));
  } catch (const std::runtime_error&) {
    return 1;  // no fork: reported as gnuplot failing, the report itself is still written
  }
}

// A fresh directory inside `dir` that only this report writes into, removed when this goes away.
class PrivateDirectory {
 public:
  explicit PrivateDirectory(const files::Directory& dir) : parent_(dir) {
    std::random_device random;
    do {
      name_ = fmt::format(".gnuplot-{}-{:08x}{:08x}", ::getpid(), random(), random());
    } while (parent_.has(name_));
    work_.emplace(parent_.sub(name_, true));
  }
  ~PrivateDirectory() {
    try {
      parent_.removeTree(name_);
    } catch (const std::exception&) {
      // Left behind: a hidden directory is no harm, and the report itself was written.
    }
  }
  PrivateDirectory(const PrivateDirectory&) = delete;
  PrivateDirectory& operator=(const PrivateDirectory&) = delete;

  const files::Directory& get() const { return *work_; }

 private:
  const files::Directory& parent_;
  std::string name_;
  std::optional<files::Directory> work_;
};

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
  // SGD sends about 100x what PowerSGD does: data sent reads on a log axis, once every x is above 0.
  auto by_data = plotOf(groups, "metric-vs-data", metric + " by data sent", "MiB sent per worker", metric,
                        epochs([](const EpochPoint& p) { return p.mib; }), false);
  by_data.log_x = std::all_of(by_data.curves.begin(), by_data.curves.end(), [](const Curve& curve) {
    return std::all_of(curve.points.begin(), curve.points.end(), [](const auto& p) { return p[0] > 0; });
  });
  return {
      plotOf(groups, "metric-vs-epoch", metric + " by epoch", "epoch", metric,
             epochs([](const EpochPoint& p) { return p.epoch; }), false),
      // A run of one long epoch (the GPT's max_steps) evaluated every few steps reads by step.
      plotOf(groups, "metric-vs-step", metric + " by step", "step", metric,
             epochs([](const EpochPoint& p) { return static_cast<double>(p.step); }), false),
      std::move(by_data),
      plotOf(groups, "metric-vs-time", metric + " by wall-clock time", "training time (s)", metric,
             epochs([](const EpochPoint& p) { return p.elapsed_s; }), false),
      plotOf(
          groups, "loss-vs-step", "training loss by step", "step", "training loss (mean over workers and window)",
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
  if (!plot.cells.empty()) {
    out = "# x y value\n";
    for (const auto& cell : plot.cells) {
      if (cell.value) out += fmt::format("{} {} {:.17g}\n", cell.x, cell.y, *cell.value);
    }
    return out;
  }
  for (size_t i = 0; i < plot.curves.size(); ++i) {
    if (i > 0) out += "\n\n";
    out += "# " + oneLine(plot.curves[i].label) + "\n# x mean min max\n";
    for (const auto& p : plot.curves[i].points)
      out += fmt::format("{:.17g} {:.17g} {:.17g} {:.17g}\n", p[0], p[1], p[2], p[3]);
  }
  return out;
}

RenderedPlots renderPlots(const std::vector<Plot>& plots, const files::Directory& dir) {
  RenderedPlots rendered;
  const bool any = std::any_of(plots.begin(), plots.end(), hasData);
  if (!any) return rendered;
  const std::string gnuplot = findGnuplot();
  if (gnuplot.empty()) {
    rendered.note =
        "gnuplot is not installed, so the plots are missing (apt-get install gnuplot-nox); their data is in " +
        dir.path();
  }
  const auto log = dir.openForAppend("gnuplot.log", true);
  const PrivateDirectory work(dir);
  for (const auto& plot : plots) {
    if (!hasData(plot)) continue;
    work.get().writeAtomically(plot.name + ".dat", plotData(plot));
    work.get().writeAtomically(plot.name + ".gp", script(plot));
    if (!gnuplot.empty()) {
      const int code = runGnuplot(gnuplot, work.get(), log.get(), plot.name + ".gp");
      if (code != 0 && rendered.note.empty()) {
        rendered.note = "gnuplot failed on " + plot.name + ".gp (see " + dir.pathOf("gnuplot.log") + ")";
      }
      if (code == 0 && work.get().has(plot.name + ".svg")) {
        rendered.svg[plot.name] = files::readBoundedFile(work.get().pathOf(plot.name + ".svg"), files::kMaxRecordBytes);
      }
    }
    for (const char* extension : {".dat", ".gp", ".png", ".svg"}) {
      const std::string name = plot.name + extension;
      if (!work.get().has(name)) continue;
      work.get().moveTo(name, dir, name);
      if (rendered.svg.count(plot.name) && (extension == std::string(".png") || extension == std::string(".svg"))) {
        rendered.images.push_back(dir.pathOf(name));
      }
    }
  }
  return rendered;
}

}  // namespace gcrun::outputs
