"""`gavel-ng report`: the per-job metrics the scheduler keeps, selected by time window as sacct does,
grouped per user or entity, as a table or CSV; bad flags are one line naming the flag."""

from __future__ import annotations

import csv
import io
import json

import pytest

from gavel_ng.cli import main
from gavel_ng.protocol.jobspec import JobSpec
from gavel_ng.rules.model import JobRules
from gavel_ng.runtime.report import read_report
from gavel_ng.runtime.store import Store

T0 = 1_800_000_000.0


def _state(tmp_path):
    """Four jobs as a scheduler leaves them: done, failed, running, never started."""
    store = Store(tmp_path)
    from gavel_ng.runtime.records import ClusterInfo

    store.save_cluster_info(ClusterInfo("las", 360.0, ["v100", "k80"], None, False, {"v100": 3.0}))
    specs = [JobSpec("ResNet-18 (batch size 32)", 100, name="a", rules=JobRules(user="ann")),
             JobSpec("mine", 100, name="b", command=("x",), rules=JobRules(user="ann")),
             JobSpec("mine", 100, name="c", command=("x",), rules=JobRules(user="bob")),
             JobSpec("mine", 100, name="d", command=("x",))]
    ids = store.add_jobs(specs, T0)
    store.update_job(ids[0], status="done", first_start=T0 + 10, finished=T0 + 3610, attempts=2, preemptions=1,
                     gpu_seconds=json.dumps({"v100": 3600.0}), steps_done=100)
    store.update_job(ids[1], status="failed", first_start=T0 + 5, finished=T0 + 20, attempts=3,
                     gpu_seconds=json.dumps({"k80": 30.0}), error="attempt 3 on w: exit status 1")
    store.update_job(ids[2], status="running", first_start=T0 + 100, attempts=1)
    store.close()
    return ids


def test_metrics_per_job_and_window(tmp_path):
    ids = _state(tmp_path)
    rep = read_report(tmp_path)
    a, b, c, d = rep.jobs
    assert (a.jct, a.queueing_delay, a.attempts, a.preemptions) == (3610.0, 10.0, 2, 1)
    assert a.gpu_hours == {"v100": 1.0} and a.cost == pytest.approx(3.0) and a.user == "ann"
    assert b.cost is None                           # k80 has no price
    assert c.jct is None and c.queueing_delay == 100.0 and d.queueing_delay is None and d.first_start is None
    assert list(rep.done_jcts()) == [3610.0]
    # jobs alive in the window: b ended at T0 + 20, before it
    assert [j.job_id for j in read_report(tmp_path, since=T0 + 60).jobs] == [ids[0], ids[2], ids[3]]
    assert read_report(tmp_path, until=T0).jobs == []
    users = {g.group: g for g in rep.groups("user")}
    assert users["ann"].jobs == 2 and users["ann"].done == 1 and users["ann"].failed == 1
    assert users["ann"].mean_jct == 3610.0 and users["-"].jobs == 1 and users["bob"].mean_jct is None


def test_cli_csv_table_and_errors(tmp_path, capsys):
    _state(tmp_path)
    assert main(["report", "--state", str(tmp_path), "--format", "csv"]) == 0
    rows = list(csv.DictReader(io.StringIO(capsys.readouterr().out)))
    assert [r["name"] for r in rows] == ["a", "b", "c", "d"]
    assert rows[0]["jct_s"] == "3610.0" and rows[0]["gpu_hours_v100"] == "1.0" and rows[0]["cost_usd"] == "3.0"
    assert rows[0]["started"].startswith("2027-01-15T")       # ISO 8601 with its offset
    assert main(["report", "--state", str(tmp_path), "--by", "entity"]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[1].split()[:5] == ["entity", "jobs", "done", "failed", "cancelled"]
    assert main(["report", "--state", str(tmp_path)]) == 0
    assert " 1h00m " in capsys.readouterr().out
    for args, flag in ((["--since", "yesterday"], "--since"), (["--since", "2", "--until", "1"], "--until"),
                       (["--plot", str(tmp_path / "x.png"), "--since", str(T0 + 4000)], "--plot")):
        assert main(["report", "--state", str(tmp_path), *args]) == 2
        err = capsys.readouterr().err
        assert err.startswith(f"gavel-ng report: error: {flag}=") and err.count("\n") == 1, err
    assert main(["report", "--state", str(tmp_path / "nope")]) == 2
    assert "--state" in capsys.readouterr().err
