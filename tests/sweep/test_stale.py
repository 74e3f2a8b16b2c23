"""Rows computed by other code or input files are run again, not silently reused (fingerprint.py)."""

import json
import shutil

import pandas as pd

from gavel_ng.cli import main
from gavel_ng.sweep import ResultsStore, expand, run_sweep
from gavel_ng.sweep.fingerprint import code_digest, package_digest, point_digest


def _table_copy(tmp_path, reference_table_path):
    path = tmp_path / "table.json"
    shutil.copy(reference_table_path, path)
    return path


def _slow_down_k80(path):
    """Every job type at half its K80 speed: the same point ids, other results."""
    data = json.loads(path.read_text())
    for worker, per_job in data.items():
        if worker == "k80":
            for key, entry in per_job.items():
                entry["null"] = entry["null"] / 2 if isinstance(entry, dict) and "null" in entry else entry
    path.write_text(json.dumps(data))


def test_a_changed_input_file_makes_its_rows_stale(tmp_path, tiny_base, reference_table_path):
    table = _table_copy(tmp_path, reference_table_path)
    store = ResultsStore(tmp_path / "r.csv")
    pts = expand({"policy": ["las", "fifo"], "jobs_per_hour": [2.0]}, {**tiny_base, "throughputs": str(table)})
    first = run_sweep(pts, store, workers=1)
    assert (first.ran, first.stale) == (2, 0)
    before = store.load().set_index("point_id")
    assert before["digest"].str.len().eq(16).all()

    again = run_sweep(pts, store, workers=1)
    assert (again.skipped, again.ran, again.stale) == (2, 0, 0)   # same code, same files: resumed

    _slow_down_k80(table)
    kept = run_sweep(pts, store, workers=1, keep_stale=True)
    assert (kept.skipped, kept.ran, kept.stale) == (2, 0, 2)
    rerun = run_sweep(pts, store, workers=1)
    assert (rerun.skipped, rerun.ran, rerun.stale) == (0, 2, 2)
    after = store.load().set_index("point_id")
    assert len(after) == 2 and set(after.index) == set(before.index)
    assert (after["digest"] != before.loc[after.index, "digest"]).all()
    assert (after["avg_jct_hours"] != before.loc[after.index, "avg_jct_hours"]).any()
    assert run_sweep(pts, store, workers=1).ran == 0               # now current again


def test_rows_from_before_digests_count_as_stale(tmp_path, tiny_base):
    store = ResultsStore(tmp_path / "r.csv")
    pts = expand({"jobs_per_hour": [1.0, 2.0]}, tiny_base)
    run_sweep(pts, store, workers=1)
    old = pd.read_csv(store.path).drop(columns=["digest"])   # a table an older gavel_ng wrote
    old.to_csv(store.path, index=False)
    digests = {p.point_id: point_digest(p, code_digest()) for p in pts}
    assert store.done_and_stale(digests) == (set(), set(digests))
    assert run_sweep(pts, store, workers=1, keep_stale=True).ran == 0
    rep = run_sweep(pts, store, workers=1)
    assert (rep.ran, rep.stale) == (2, 2)
    assert store.done_and_stale(digests) == (set(digests), set())


def test_cli_dry_run_names_stale_points(tmp_path, tiny_args, capsys):
    results = tmp_path / "r.csv"
    args = ["sweep", "--results", str(results), "--policy", "las", "--jobs-per-hour", "1,2", *tiny_args,
            "--workers", "1"]
    assert main(args) == 0
    df = pd.read_csv(results, dtype={"digest": str})
    df.loc[0, "digest"] = "0" * 16             # as if computed by another version
    df.to_csv(results, index=False)
    capsys.readouterr()
    assert main(args + ["--dry-run"]) == 0
    states = sorted(line.split()[0] for line in capsys.readouterr().out.splitlines())
    assert states == ["done", "stale"]
    assert main(args) == 0
    assert "1 run (0 failed, 1 of them because their rows were stale)" in capsys.readouterr().out


def test_the_package_digest_covers_package_files():
    d = package_digest()
    assert len(d) == 16 and d == package_digest()
    assert code_digest() == d
