"""Results hide nothing (issue 37, part 3): jobs left unfinished at the time cap are said in the
summary, --json and sweep rows, and CDFs over the window end below 1.0; --json carries what
summary.json has."""

from __future__ import annotations

import json

import numpy as np

from gavel_ng.cli import main
from gavel_ng.plots import cdf_figure

CAPPED = ["--policy", "las", "--cluster", "v100=4,k80=4", "--static", "12", "--max-hours", "30"]


def test_unfinished_jobs_are_said_in_the_text_json_and_summary_file(capsys, tmp_path):
    assert main(["simulate", *CAPPED, "--out", str(tmp_path)]) == 0
    text = capsys.readouterr().out
    assert main(["simulate", *CAPPED, "--json"]) == 0
    s = json.loads(capsys.readouterr().out)
    assert s["unstable"] and s["jobs_in_window"] == 12 and 0 < s["jobs_unfinished"] == 12 - s["jobs_measured"]
    assert f"UNFINISHED         {s['jobs_unfinished']} of 12 measured jobs unfinished at the time cap" in text
    assert json.loads((tmp_path / "summary.json").read_text())["jobs_unfinished"] == s["jobs_unfinished"]


def test_a_finished_run_says_nothing_of_unfinished_jobs(capsys):
    assert main(["simulate", "--policy", "las", "--cluster", "v100=4,k80=4", "--static", "4"]) == 0
    assert "UNFINISHED" not in capsys.readouterr().out


def test_json_carries_what_summary_json_has(capsys, tmp_path):
    args = ["simulate", "--policy", "las", "--cluster", "v100=4,k80=4", "--static", "4"]
    assert main([*args, "--json", "--out", str(tmp_path)]) == 0
    printed = json.loads(capsys.readouterr().out)
    written = json.loads((tmp_path / "summary.json").read_text())
    assert printed == written   # one run: everything summary.json has
    assert {"p50_jct_hours", "p90_jct_hours", "run_cost_usd", "jobs_unfinished", "solver_fallbacks"} <= set(printed)


def test_the_cdf_of_a_run_with_unfinished_jobs_ends_below_one():
    fig = cdf_figure({"las": np.array([1.0, 2.0, 3.0]), "fifo": np.array([1.0, 2.0])}, "JCT (hours)",
                     totals={"las": 4, "fifo": 2})
    ax = fig.axes[0]
    ends = {line.get_label().split(" ")[0]: float(np.max(line.get_ydata())) for line in ax.get_lines()}
    assert ends == {"las": 0.75, "fifo": 1.0}
    labels = [t.get_text() for t in ax.get_legend().get_texts()]
    assert any("1 of 4 unfinished" in t for t in labels) and not any("nan" in t for t in labels)


def test_simulate_writes_a_cdf_that_ends_below_one(tmp_path, capsys):
    """The CDF simulate writes is over every measured job: the window's, finished or not."""
    from gavel_ng.simulator.metrics import window_jcts

    assert main(["simulate", *CAPPED, "--out", str(tmp_path)]) == 0
    capsys.readouterr()
    from gavel_ng.cluster import Cluster
    from gavel_ng.simulator import SimConfig, default_table, simulate
    from gavel_ng.traces import TraceSpec, generate

    cluster = Cluster.parse("v100=4,k80=4")
    table = default_table(cluster.worker_types)
    result = simulate(cluster, table, generate(TraceSpec(None, seed=0), table, 12),
                      SimConfig(policy="las", max_sim_seconds=30 * 3600))
    jct, total = window_jcts(result)
    assert total == 12 and len(jct) == result.summary["jobs_measured"] < 12
    import matplotlib.image

    assert matplotlib.image.imread(tmp_path / "jct.png").shape[0] > 100   # the PNG opens
