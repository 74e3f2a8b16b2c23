import json

import pandas as pd
import pytest

from gavel_ng.cli import main
from gavel_ng.errors import InputError
from gavel_ng.sweep import ResultsStore, SweepPoint, expand, run_sweep


def test_point_id_ignores_defaults_and_is_stable():
    a = SweepPoint(jobs_per_hour=2.0)
    assert a.point_id == SweepPoint(jobs_per_hour=2.0, seed=0, policy="las").point_id
    assert a.point_id != SweepPoint(jobs_per_hour=2.0, seed=1).point_id
    assert a.changed() == {"jobs_per_hour": 2.0}


def test_point_needs_exactly_one_trace_source():
    with pytest.raises(InputError):
        SweepPoint()
    with pytest.raises(InputError):
        SweepPoint(jobs_per_hour=1.0, static=10)
    with pytest.raises(InputError):
        SweepPoint(jobs_per_hour=1.0, throughputs="t.json", heterogeneity=2.0)


def test_expand_is_the_product_without_duplicates():
    pts = expand({"policy": ["las", "fifo"], "jobs_per_hour": [1.0, 2.0], "seed": [0, 1, 1]})
    assert len(pts) == 8
    assert [p.policy for p in pts[:4]] == ["las"] * 4
    with pytest.raises(InputError):
        expand({"no_such_flag": [1]})


def test_sweep_runs_appends_and_resumes(tmp_path, tiny_base):
    store = ResultsStore(tmp_path / "r.csv")
    pts = expand({"policy": ["las", "las_agnostic"], "jobs_per_hour": [1.0, 2.0]}, tiny_base)
    rep = run_sweep(pts, store, workers=2)
    assert (rep.total, rep.skipped, rep.ran, rep.failed) == (4, 0, 4, 0)
    df = store.load()
    assert len(df) == 4 and set(df["status"]) == {"ok"} and df["avg_jct_hours"].notna().all()
    jobs = store.jobs(df["point_id"][0])
    assert len(jobs) == 12 and jobs["jct_s"].notna().all()
    more = pts + expand({"policy": ["las"], "jobs_per_hour": [3.0]}, tiny_base)
    rep = run_sweep(more, store, workers=1)
    assert (rep.skipped, rep.ran) == (4, 1)
    assert len(store.load()) == 5


def test_failed_points_are_recorded_and_retried(tmp_path, tiny_base):
    store = ResultsStore(tmp_path / "r.csv")
    bad = SweepPoint(**{**tiny_base, "policy": "no_such_policy", "jobs_per_hour": 1.0})
    rep = run_sweep([bad], store, workers=1)
    assert rep.failed == 1 and "no_such_policy" in store.load()["error"][0]
    assert bad.point_id not in store.done_ids()
    assert run_sweep([bad], store, workers=1).ran == 1     # retried, not skipped


def test_truncated_last_line_is_tolerated(tmp_path, tiny_base):
    store = ResultsStore(tmp_path / "r.csv")
    pts = expand({"jobs_per_hour": [1.0, 2.0]}, tiny_base)
    run_sweep(pts[:1], store, workers=1)
    with store.path.open("a") as f:
        f.write("las,v100=4")          # a write cut short by a kill
    run_sweep(pts, store, workers=1)
    assert len(store.load()) == 2


def test_priority_and_slo_metrics(tmp_path, tiny_base):
    store = ResultsStore(tmp_path / "r.csv")
    p = SweepPoint(**{**tiny_base, "jobs_per_hour": 2.0, "window": "0:30", "priorities": True, "slos": True})
    run_sweep([p], store, workers=1)
    row = store.load().iloc[0]
    assert row["avg_jct_high_priority_hours"] > 0 and row["avg_jct_low_priority_hours"] > 0
    assert 0 <= row["slo_violation_fraction"] <= 1 and row["jobs_with_slo"] == 30


def test_cli_sweep_dry_run_and_plot(tmp_path, tiny_args, capsys):
    results = tmp_path / "r.csv"
    args = ["sweep", "--results", str(results), "--policy", "las,las_agnostic", "--jobs-per-hour", "1,2",
            "--seed", "0,1", "--workers", "2", *tiny_args]
    assert main(args) == 0
    capsys.readouterr()
    assert main([*args, "--dry-run"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 8 and all(line.startswith("done") for line in lines)
    assert main(["plot", str(results), "--out", str(tmp_path / "plots")]) == 0
    names = {p.name for p in (tmp_path / "plots").iterdir()}
    assert {"jct_vs_rate.png", "jct_cdf.png", "ftf_cdf.png"} <= names


def test_cli_grid_file_static_bars(tmp_path, reference_table_path):
    grid = {"axes": {"policy": ["makespan", "fifo_agnostic"]},
            "base": {"static": 12, "cluster": "v100=4,p100=4,k80=4", "round_seconds": 3600,
                     "throughputs": str(reference_table_path)}}
    (tmp_path / "g.json").write_text(json.dumps(grid))
    results = tmp_path / "r.csv"
    assert main(["sweep", "--results", str(results), "--grid", str(tmp_path / "g.json"), "--workers", "1"]) == 0
    df = pd.read_csv(results)
    assert set(df["policy"]) == {"makespan", "fifo_agnostic"} and df["makespan_hours"].notna().all()
    assert main(["plot", str(results), "--out", str(tmp_path / "p")]) == 0
    assert (tmp_path / "p" / "bars.png").exists()


def test_cli_errors(tmp_path, capsys):
    assert main(["sweep", "--results", str(tmp_path / "r.csv"), "--policy", "las"]) == 2
    assert "jobs-per-hour" in capsys.readouterr().err
    assert main(["sweep", "--results", str(tmp_path / "r.csv"), "--static", "3", "--seed", "x"]) == 2
    assert main(["plot", str(tmp_path / "missing.csv")]) == 2


def test_parquet_needs_pyarrow_or_round_trips(tmp_path, tiny_base):
    try:
        import pyarrow  # noqa: F401
    except ImportError:
        with pytest.raises(InputError, match="pyarrow"):
            ResultsStore(tmp_path / "r.parquet")
        return
    store = ResultsStore(tmp_path / "r.parquet")
    run_sweep(expand({"jobs_per_hour": [1.0, 2.0]}, tiny_base), store, workers=1)
    assert len(store.load()) == 2 and len(store.done_ids()) == 2
