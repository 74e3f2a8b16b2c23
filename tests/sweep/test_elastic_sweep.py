"""Elastic workloads in `gavel-ng sweep` (issue 14, item 5): a point gives `simulate --workload`'s numbers."""

from __future__ import annotations

import json

import pytest

from gavel_ng.cli import main
from gavel_ng.elastic import pollux_workload, write_pollux_csv
from gavel_ng.errors import InputError
from gavel_ng.sweep import ResultsStore, SweepPoint, expand, run_sweep

TINY = ["--workload", "pollux", "--jobs", "10", "--hours", "1", "--cluster", "t4=8,a100=8", "--seed", "1"]
COMPARED = ("avg_jct_hours", "p99_jct_hours", "makespan_hours", "gpu_hours", "utilization", "jobs_measured",
            "reallocations", "policy_solves")


def simulate_json(capsys, args):
    capsys.readouterr()
    assert main(["simulate", *args, "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    return out["runs"] if "runs" in out else [out]


def test_existing_point_ids_are_unchanged():
    # ids of points written before the elastic fields existed (results on disk must still resume)
    assert SweepPoint(jobs_per_hour=2.0).point_id == "d87c6e3e8d66e980"
    assert SweepPoint(jobs_per_hour=5.6, policy="las_agnostic", seed=2, window="4000:5000",
                      throughputs="gavel-osdi20").point_id == "4fe0a1d1b704e7f2"


def test_sweep_of_two_policies_equals_simulate(tmp_path, capsys):
    base = {"workload": "pollux", "jobs": 10, "hours": 1.0, "cluster": "t4=8,a100=8", "seed": 1,
            "round_seconds": None}
    pts = expand({"policy": ["goodput", "las"]}, base)
    store = ResultsStore(tmp_path / "r.csv")
    rep = run_sweep(pts, store, workers=2)        # the local process pool
    assert (rep.ran, rep.failed) == (2, 0)
    df = store.load().set_index("policy")
    for run in simulate_json(capsys, [*TINY, "--policy", "goodput,las"]):
        row = df.loc[run["policy"]]
        for k in COMPARED:
            assert (row[k] != row[k] and run[k] is None) or row[k] == pytest.approx(run[k]), (run["policy"], k)


def test_cli_sweep_defaults_to_each_policys_interval(tmp_path, capsys):
    results = tmp_path / "r.csv"
    assert main(["sweep", "--results", str(results), *TINY, "--policy", "pollux", "--workers", "1", "--json"]) == 0
    row = ResultsStore(results).load().iloc[0]
    run, = simulate_json(capsys, [*TINY, "--policy", "pollux"])   # pollux decides every 60 s there
    assert row["avg_jct_hours"] == pytest.approx(run["avg_jct_hours"])
    assert row["policy_solves"] == run["policy_solves"]


def test_pollux_csv_trace_is_an_elastic_point(tmp_path):
    path = tmp_path / "w.csv"
    write_pollux_csv(pollux_workload(num_jobs=4, hours=0.5, seed=0), path)
    p = SweepPoint(trace=str(path), policy="tiresias", cluster="t4=8", round_seconds=None)
    assert p.elastic
    store = ResultsStore(tmp_path / "r.csv")
    run_sweep([p], store, workers=1)
    row = store.load().iloc[0]
    assert row["status"] == "ok" and row["jobs_measured"] == 4


@pytest.mark.parametrize("kwargs, field", [
    ({"jobs_per_hour": 1.0, "policy": "pollux"}, "policy"),
    ({"jobs_per_hour": 1.0, "jobs": 20}, "jobs"),
    ({"jobs_per_hour": 1.0, "round_seconds": None}, "round_seconds"),
    ({"workload": "pollux", "window": "0:10"}, "window"),
    ({"workload": "pollux", "throughputs": "gavel-osdi20"}, "throughputs"),
    ({"workload": "alibaba"}, "workload"),
    ({"workload": "pollux", "jobs": 0}, "jobs"),
    ({"workload": "pollux", "hours": -1.0}, "hours"),
    ({"workload": "pollux", "jobs_per_hour": 1.0}, "sweep point"),
])
def test_bad_elastic_points_name_the_field(kwargs, field):
    with pytest.raises(InputError) as err:
        SweepPoint(**kwargs)
    assert field in str(err.value)
