"""What a person sees of a simulation: repeated warnings collapsed into the summary, a progress
bar on a terminal only, and several policies on one trace compared in one line and one plot."""

from __future__ import annotations

import csv
import io
import json
import subprocess
import sys

import numpy as np
from PIL import Image

from gavel_ng.cli import main
from gavel_ng.cli.progress import SimulationProgress

# min_cost_slo with SLOs on a cluster too small for them: some SLOs cannot be met beside the others,
# and the policy says so at every solve (50 times in this run)
SLO_RUN = ["simulate", "--policy", "min_cost_slo", "--slos", "--jobs-per-hour", "0.5",
           "--cluster", "v100=2,p100=2,k80=2", "--window", "0:10", "--seed", "0"]
SLO_KIND = "SLOs cannot be met for %d job(s): %s; they run without their SLO constraint"


def cli(*args: str) -> subprocess.CompletedProcess:
    """The real command in a child process, stdout and stderr piped (not a terminal)."""
    return subprocess.run([sys.executable, "-m", "gavel_ng", *args], capture_output=True, text=True, timeout=300)


def test_a_repeating_warning_is_logged_once_and_counted_in_the_summary(tmp_path):
    proc = cli(*SLO_RUN, "--out", str(tmp_path))
    assert proc.returncode == 0, proc.stderr
    warning_lines = [line for line in proc.stderr.splitlines() if line.startswith("WARNING")]
    assert 0 < len(warning_lines) < 20, proc.stderr
    assert sum("SLOs cannot be met" in line for line in warning_lines) == 1
    # nothing else on stderr: no progress bar (stderr is a pipe), no solver banner
    assert "\r" not in proc.stderr and "simulated hours" not in proc.stderr
    assert all(line.startswith("WARNING") for line in proc.stderr.splitlines()), proc.stderr

    summary = json.loads((tmp_path / "summary.json").read_text())
    [slo] = [w for w in summary["warnings"] if w["kind"] == SLO_KIND]
    assert slo["count"] >= 20 and slo["jobs"] and slo["logger"] == "gavel_ng.policies.builtin.cost"
    assert slo["first"].startswith("SLOs cannot be met for ")
    # the text summary lists the kind with its count and jobs
    line = next(x for x in proc.stdout.splitlines() if "SLOs cannot be met" in x)
    assert line.split()[:2] == [str(slo["count"]), "x"] and line.endswith(f" {', '.join(map(str, slo['jobs']))}]")
    assert proc.stdout.splitlines()[0].startswith("policy min_cost_slo")

    proc = cli(*SLO_RUN, "--json")
    assert proc.returncode == 0
    data = json.loads(proc.stdout)                  # stdout is exactly one JSON object
    [again] = [w for w in data["warnings"] if w["kind"] == SLO_KIND]
    assert again["count"] == slo["count"] and again["jobs"] == slo["jobs"]
    assert len([x for x in proc.stderr.splitlines() if x.startswith("WARNING")]) < 20


def test_progress_bar_draws_on_a_terminal_only():
    class Terminal(io.StringIO):
        def isatty(self):
            return True

    tty, pipe = Terminal(), io.StringIO()
    for stream in (tty, pipe):
        with SimulationProgress("las", stream=stream, delay=0.0, mininterval=0.0) as progress:
            for k in range(5):
                progress(3600.0 * 10 * k, 20 * k, 100, 7)
    assert "simulated hours" in tty.getvalue() and "80/100" in tty.getvalue()
    assert pipe.getvalue() == ""
    with SimulationProgress(stream=Terminal(), delay=0.0, enabled=False) as progress:   # --json
        assert progress.bar is None


def test_several_policies_on_one_trace_end_with_a_comparison_line_and_one_plot(tmp_path, capsys):
    out = tmp_path / "demo"
    rc = main(["simulate", "--policy", "las,las_agnostic", "--cluster", "v100=8,a100=8,h100=8",
               "--jobs-per-hour", "2", "--window", "0:40", "--seed", "0", "--out", str(out)])
    text = capsys.readouterr().out
    assert rc == 0
    last = text.rstrip().splitlines()[-1]
    assert last.startswith("las (heterogeneity-aware) vs las_agnostic: average JCT "), last
    assert "makespan" in last and ("x better" in last or "x worse" in last or "same" in last)
    assert text.count("policy las  (") == 1 and text.count("policy las_agnostic  (") == 1

    # the same trace for both: same jobs, same arrivals
    rows = {p: list(csv.DictReader((out / p / "jobs.csv").open())) for p in ("las", "las_agnostic")}
    assert [(r["job_type"], r["arrival_s"]) for r in rows["las"]][:40] == \
        [(r["job_type"], r["arrival_s"]) for r in rows["las_agnostic"]][:40]
    # the comparison's numbers are the two runs' own
    las, agn = (json.loads((out / p / "summary.json").read_text()) for p in ("las", "las_agnostic"))
    assert f"average JCT {las['avg_jct_hours']:.2f} h vs {agn['avg_jct_hours']:.2f} h" in last
    [cmp] = json.loads((out / "comparison.json").read_text())
    assert cmp["line"] == last and cmp["metrics"]["avg_jct_hours"]["ratio"] > 0

    with Image.open(out / "jct.png") as img:        # one real image with both policies' CDFs
        img.load()
        assert img.format == "PNG" and img.width > 300 and img.height > 200
        colors = np.asarray(img.convert("RGB")).reshape(-1, 3)
    assert len(np.unique(colors, axis=0)) > 20     # lines, text, legend: not a blank canvas

    rc = main(["simulate", "--policy", "las,las_agnostic", "--cluster", "v100=8,a100=8,h100=8",
               "--jobs-per-hour", "2", "--window", "0:40", "--seed", "0", "--json"])
    data = json.loads(capsys.readouterr().out)
    assert rc == 0 and [r["policy"] for r in data["runs"]] == ["las", "las_agnostic"]
    assert data["comparisons"][0]["versus"] == "las_agnostic"
    assert data["runs"][0]["avg_jct_hours"] == las["avg_jct_hours"]


def test_an_unknown_policy_in_the_list_fails_before_any_work(capsys):
    rc = main(["simulate", "--policy", "las,no_such_policy", "--static", "3"])
    err = capsys.readouterr().err
    assert rc == 2 and "no_such_policy" in err and len(err.strip().splitlines()) == 1
