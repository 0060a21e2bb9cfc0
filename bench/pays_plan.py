"""bench/sync-pays's third estimate: `gcrun plan` of the measured run, from its preset, settings and
configuration alone (no trace), on the same link profile, with the run's own compute per step.

The plan's model is simpler than predict's replay: one compute time for every step of every worker,
gradients in buckets of `reducer.bucket_mb`, a fragment's messages from the strategy's accounting,
each collective costed from the profile. So it is checked against both: within 10% of predict and
15% of the measurement at every point (issue #44, item 7).
"""

import csv
import json
import shlex
import subprocess

from pays_links import Failed

PLAN_VS_PREDICT_PCT = 10
PLAN_VS_MEASURED_PCT = 15


class Planner:
    def __init__(self, gcrun, work, workers):
        self.gcrun = str(gcrun)
        self.work = work / "plan"
        self.workers = workers
        help_text = subprocess.run([self.gcrun, "plan", "--help"], capture_output=True, text=True).stdout
        self.available = "--step-time" in help_text
        # The lead's flag that leaves encode/decode time out; without it the plan has none to leave.
        self.codec_flag = ["--no-codec-time"] if "--no-codec-time" in help_text else []

    def plan(self, name, base_argv, settings, profile, step_ms):
        """The plan's step_ms and CU for one configuration (`settings` over the preset and base_argv's
        --set) on `profile`, computing `step_ms` a step."""
        output = self.work / name
        output.mkdir(parents=True, exist_ok=True)
        configurations = output / "configurations.yaml"
        # JSON is YAML: one configuration, its keys as the run's --set gave them.
        configurations.write_text(json.dumps([{"name": name, "set": settings}]) + "\n")
        command = [self.gcrun, "plan", *base_argv, "--configurations", str(configurations),
                   "--workers", str(self.workers), "--network", profile, "--step-time", f"{step_ms:.6f}ms",
                   *self.codec_flag, "--output", str(output)]
        done = subprocess.run(command, capture_output=True, text=True, timeout=300)
        if done.returncode != 0:
            raise Failed(f"`{shlex.join(command)}` exited {done.returncode}: {(done.stderr or done.stdout)[-300:]}")
        with open(output / "plan.csv", newline="") as rows:
            row = next((r for r in csv.DictReader(rows) if r["network"] != "target"), None)
        if row is None:
            raise Failed(f"{output / 'plan.csv'}: no row for the network")
        return {"planned_ms": float(row["step_ms"]), "planned_cu": float(row["cu"])}


def plan_all(planner, points, profiles, base_argv_of, settings_of):
    """Adds planned_ms, planned_cu and the two relative differences to every predicted point."""
    for point in points:
        if not planner.available or "predicted_compute_ms" not in point:
            continue
        try:
            point.update(planner.plan(f"{point['link']}-{point['config']}", base_argv_of(), settings_of(point["config"]),
                                      profiles[point["link"]], point["predicted_compute_ms"]))
        except (Failed, OSError, KeyError, ValueError) as error:
            point["plan_error"] = str(error)
            continue
        point["planned_vs_predicted_pct"] = percent(point["planned_ms"], point["predicted_ms"])
        point["planned_vs_measured_pct"] = percent(point["planned_ms"], point["measured_ms"])


def percent(value, reference):
    return (value - reference) / reference * 100


def plan_cells(point):
    """The table's four plan columns for one point."""
    if "planned_ms" not in point:
        return [point.get("plan_error", "not planned")[:60], "", "", ""]
    return [f"{point['planned_ms']:.1f}", f"{point['planned_vs_predicted_pct']:+.1f}%",
            f"{point['planned_vs_measured_pct']:+.1f}%", f"{point['planned_cu']:.3f}"]


def plan_targets(points):
    """The Targets lines for the plan: how many points are within each bound, and which miss."""
    planned = [p for p in points if "planned_ms" in p]
    if not planned:
        return []
    lines = []
    for key, bound, against in (("planned_vs_predicted_pct", PLAN_VS_PREDICT_PCT, "predict"),
                                 ("planned_vs_measured_pct", PLAN_VS_MEASURED_PCT, "measured")):
        misses = [p for p in planned if abs(p[key]) > bound]
        worst = max(abs(p[key]) for p in planned)
        verdict = "PASS" if not misses else "FAIL: " + ", ".join(
            f"{p['link']} {p['config']} {p[key]:+.1f}%" for p in misses)
        lines.append(f"- Plan against {against}: {len(planned) - len(misses)} of {len(planned)} points within "
                     f"{bound}%, worst |difference| {worst:.1f}% (target <= {bound}% at every point): {verdict}.")
    return lines
