"""`gavel-ng sweep`: every point through the one simulator (`simulate_point`), Gavel trace or Pollux
workload, allocation or round policy. Runs need the unified simulator; the grid tests do not."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from gavel_ng.cli import build_parser, main
from gavel_ng.cli.sweep_cmd import axes_from_args
from gavel_ng.elastic import pollux_workload, write_pollux_csv
from gavel_ng.errors import InputError
from gavel_ng.sweep import ResultsStore, SweepPoint, expand
from gavel_ng.traces import Trace, write_trace

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
PLUGINS = ["--plugin", str(EXAMPLES / "round_policy.py"), "--plugin", str(EXAMPLES / "allocation_policy.py")]
POLICIES = ["--policy", "speedup_sum,proportional_fairness"]
CLUSTER = ["--cluster", "t4=8,v100=4"]


def sweep(tmp_path, *args):
    results = tmp_path / "r.csv"
    assert main(["sweep", "--results", str(results), *PLUGINS, *POLICIES, *CLUSTER, "--workers", "1", "--json",
                 *args]) == 0
    return ResultsStore(results).load()


# ----- the grid ------------------------------------------------------------------------------------
def test_existing_point_ids_are_unchanged():
    # ids of points written before the workload fields and policy options existed (results still resume)
    assert SweepPoint(jobs_per_hour=2.0).point_id == "d87c6e3e8d66e980"
    assert SweepPoint(jobs_per_hour=5.6, policy="las_agnostic", seed=2, window="4000:5000",
                      throughputs="gavel-osdi20").point_id == "4fe0a1d1b704e7f2"


def test_any_policy_goes_with_any_source():
    # no point is refused for its policy's name or its trace file's name
    grid = ({"jobs_per_hour": 1.0, "policy": "pollux"}, {"workload": "pollux", "policy": "las"},
            {"trace": "jobs.csv", "policy": "goodput"}, {"trace": "w.txt", "realloc_delay": 10.0})
    points = [SweepPoint(**kwargs) for kwargs in grid]
    for point, kwargs in zip(points, grid):
        assert {k: getattr(point, k) for k in kwargs} == kwargs     # kept as given, nothing swapped or dropped
    assert len({p.point_id for p in points}) == len(points)


def test_policy_options_are_one_json_object_with_one_spelling():
    a = SweepPoint(static=2, policy_options='{"p": -1, "restart_factor": false}')
    b = SweepPoint(static=2, policy_options='{"restart_factor":false,"p":-1}')
    assert a.point_id == b.point_id and a.options == {"p": -1, "restart_factor": False}
    assert SweepPoint(static=2, policy_options="{}").point_id == SweepPoint(static=2).point_id
    assert SweepPoint(static=2, policy_options={"p": -2}).options == {"p": -2}   # a --grid file's object


def test_policy_options_flag_takes_a_json_object_per_flag():
    args = build_parser().parse_args(
        ["sweep", "--results", "r.csv", "--static", "2", "--policy-options", '{"p": -1, "q": 2}',
         "--policy-options", "none"])
    axes, _ = axes_from_args(args)
    assert axes["policy_options"] == ['{"p": -1, "q": 2}', None]
    assert len(expand(axes, {"static": 2})) == 2


@pytest.mark.parametrize("kwargs, field", [
    ({"jobs_per_hour": 1.0, "jobs": 20}, "jobs"),
    ({"trace": "w.csv", "hours": 2.0}, "hours"),
    ({"workload": "alibaba"}, "workload"),
    ({"workload": "pollux", "jobs": 0}, "jobs"),
    ({"workload": "pollux", "hours": -1.0}, "hours"),
    ({"workload": "pollux", "heterogeneity": 2.0}, "heterogeneity"),
    ({"workload": "pollux", "jobs_per_hour": 1.0}, "sweep point"),
    ({"static": 2, "round_seconds": 0.0}, "round_seconds"),
    ({"static": 2, "realloc_delay": -1.0}, "realloc_delay"),
    ({"static": 2, "policy_options": "[1]"}, "policy_options"),
    ({"static": 2, "policy_options": "p=1"}, "policy_options"),
])
def test_bad_points_name_the_field(kwargs, field):
    with pytest.raises(InputError) as err:
        SweepPoint(**kwargs)
    assert field in str(err.value)


# ----- runs (the unified simulator) ----------------------------------------------------------------
def test_sweep_of_both_plugin_kinds_on_the_pollux_workload(tmp_path):
    df = sweep(tmp_path, "--workload", "pollux", "--jobs", "12", "--hours", "1")
    assert sorted(df["policy"]) == ["proportional_fairness", "speedup_sum"]
    assert (df["status"] == "ok").all(), df["error"].tolist()
    assert (df["gpu_hours"] > 0).all() and (df["jobs_measured"] == 12).all()
    store = ResultsStore(tmp_path / "r.csv")   # per-job records for workload points too
    assert [len(store.jobs(pid)) for pid in df["point_id"]] == [12, 12]


def test_sweep_of_both_plugin_kinds_on_a_small_gavel_trace(tmp_path):
    trace = tmp_path / "t.csv"   # a Gavel trace, whatever its name
    n = 4
    write_trace(Trace(["ResNet-18 (batch size 64)"] * n, np.ones(n, np.int64), np.ones(n), np.full(n, 2000.0),
                      np.full(n, np.inf), np.arange(n) * 60.0), trace)
    df = sweep(tmp_path, "--trace", str(trace))
    assert (df["status"] == "ok").all(), df["error"].tolist()
    assert (df["gpu_hours"] > 0).all() and (df["jobs_measured"] == n).all()


def test_a_pollux_csv_named_txt_is_a_workload_point(tmp_path):
    path = tmp_path / "w.txt"
    write_pollux_csv(pollux_workload(num_jobs=4, hours=0.5, seed=0), path)
    df = sweep(tmp_path, "--trace", str(path))
    assert (df["status"] == "ok").all(), df["error"].tolist()
    row = df.set_index("policy").loc["speedup_sum"]
    assert row["jobs_measured"] == 4 and row["adaptive_jobs"] == 4


def test_a_sweep_point_gives_simulates_numbers(tmp_path, capsys):
    df = sweep(tmp_path, "--workload", "pollux", "--jobs", "12", "--hours", "1", "--seed", "1").set_index("policy")
    capsys.readouterr()
    assert main(["simulate", *PLUGINS, *POLICIES, *CLUSTER, "--workload", "pollux", "--jobs", "12", "--hours", "1",
                 "--seed", "1", "--json"]) == 0
    for run in json.loads(capsys.readouterr().out)["runs"]:
        row = df.loc[run["policy"]]
        for k in ("avg_jct_hours", "makespan_hours", "gpu_hours", "jobs_measured", "reallocations"):
            assert row[k] == pytest.approx(run[k]), (run["policy"], k)


def test_simulate_and_a_sweep_point_make_one_config():
    """Both become a SimConfig through simulator.flags (one translation): the same settings, the same config."""
    from dataclasses import fields

    from gavel_ng.simulator.flags import SETTINGS, config_from_settings

    args = build_parser().parse_args(["simulate", "--jobs-per-hour", "1", "--window", "0:50", "--max-hours", "2",
                                      "--ledger", "reset", "--round-seconds", "120", "--seed", "3", "--space-sharing",
                                      "--realloc-delay", "10", "--min-solve-interval", "60"])
    point = SweepPoint(jobs_per_hour=1.0, window="0:50", max_hours=2.0, ledger="reset", round_seconds=120.0, seed=3,
                       space_sharing=True, realloc_delay=10.0, min_solve_interval=60.0)
    config = config_from_settings(point, "las", {"x": 1})
    assert config == config_from_settings(args, "las", {"x": 1})
    assert (config.window, config.max_sim_seconds, config.reset_ledger, config.space_sharing) == ((0, 50), 7200.0,
                                                                                                   True, True)
    # every setting of a point is translated, or says what to simulate (the source, the cluster, the table)
    what = {"policy", "cluster", "gpus_per_server", "jobs_per_hour", "static", "trace", "multi_gpu", "priorities",
            "slos", "throughputs", "heterogeneity", "workload", "jobs", "hours", "elastic_profiles", "policy_options"}
    assert {f.name for f in fields(SweepPoint)} - set(SETTINGS) == what
