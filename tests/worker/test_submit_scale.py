"""Many jobs against a real scheduler process: status and ListJobs stay within the client's 4 MiB
at any queue size, and a submission survives kill -9 of the scheduler exactly once."""

from __future__ import annotations

import json
import signal
import sqlite3
import statistics
import subprocess
import sys
import time

from loopback_cluster import ENV, wait_for

from gavel_ng.cli import main

PLAIN = {"job_type": "ResNet-18 (batch size 32)", "steps": 100, "size": "tiny"}
# ~300 bytes of spec each: 20,000 of them are far over 4 MiB when a reply carries every spec
HEAVY = {**PLAIN, "name": "heavy", "env": {"PAYLOAD": "p" * 250}}


def _timed(fn, n: int = 5) -> float:
    times = []
    for _ in range(n):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def test_twenty_thousand_queued_jobs_keep_status_working(cluster_factory, capsys):
    cl = cluster_factory(round_seconds=30.0)
    cl.start_scheduler()
    with cl.client() as c:
        t = time.perf_counter()
        first = c.submit([PLAIN] * 2000)
        took = time.perf_counter() - t
        figures = [f"submit of 2,000 jobs: {took:.2f} s ({2000 / took:.0f} jobs/s)",
                   f"status with 2,000 queued: {1000 * _timed(c.status):.1f} ms (median of 5)"]
        more = c.submit([HEAVY] * 10_000) + c.submit([HEAVY] * 8000)
        ids = first + more
        assert len(set(ids)) == 20_000
        st = c.status()
        figures.append(f"status with 20,000 queued: {1000 * _timed(c.status):.1f} ms (median of 5)")
        assert st.job_counts == {"queued": 20_000} and st.jobs_total == 20_000
        assert [j.job_id for j in st.jobs] == ids[:100]              # the first unfinished ones
        t = time.perf_counter()
        listed = c.jobs()
        figures.append(f"ListJobs of 20,000 (every page): {time.perf_counter() - t:.2f} s")
        assert [j.job_id for j in listed] == ids
        assert c.cancel(ids[-1]) == "cancelled"
        assert [j.status for j in c.wait([ids[-1]], timeout=60)] == ["cancelled"]   # asks for its ids only
    with capsys.disabled():
        print("\n" + "\n".join(figures))
    token = str(cl.state / "token")
    assert main(["status", "--scheduler", f"127.0.0.1:{cl.port}", "--token-file", token]) == 0
    out = capsys.readouterr().out
    assert "jobs (20000 submitted, 0 done)" in out and "1 cancelled, 19999 queued" in out
    assert "listing 100 of 19999 unfinished jobs (status --all lists every job)" in out
    assert main(["status", "--scheduler", f"127.0.0.1:{cl.port}", "--token-file", token, "--all", "--json"]) == 0
    assert len(json.loads(capsys.readouterr().out)["jobs"]) == 20_000
    assert main(["status", "--state", str(cl.state)]) == 0            # the state directory reads alike
    out = capsys.readouterr().out
    assert "1 cancelled, 19999 queued" in out and "listing 100 of 19999 unfinished jobs" in out


def test_submit_survives_kill9_of_the_scheduler_exactly_once(cluster_factory, tmp_path):
    cl = cluster_factory(round_seconds=30.0)
    cl.start_scheduler()
    jobfile = tmp_path / "jobs.json"
    jobfile.write_text(json.dumps([{**PLAIN, "name": f"j{i}"} for i in range(10_000)]))
    cmd = [sys.executable, "-m", "gavel_ng", "submit", str(jobfile), "--scheduler", f"127.0.0.1:{cl.port}",
           "--token-file", str(cl.state / "token"), "--idempotency-key", "batch-1", "--json"]
    cli = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=ENV)
    db = cl.state / "gavel.sqlite"

    def committed() -> int:
        conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=30)
        try:
            return conn.execute("SELECT COUNT(*) FROM jobs").fetchone()[0]
        finally:
            conn.close()

    wait_for(committed, 120, "the submission was never committed", poll=0.01)
    cl.scheduler.send_signal(signal.SIGKILL)            # mid-call or right after its commit
    cl.scheduler.wait(10)
    cl.start_scheduler()                                # the client retries with its key meanwhile
    out, err = cli.communicate(timeout=180)
    assert cli.returncode == 0, err
    print("\nclient retried:", "UNAVAILABLE" in err, err.strip()[-300:])
    ids = json.loads(out)
    with cl.client() as c:
        again = c.submit([{**PLAIN, "name": f"j{i}"} for i in range(10_000)], key="batch-1")
        jobs = c.jobs()
    assert again == ids and len(set(ids)) == 10_000
    assert sorted(j.job_id for j in jobs) == sorted(ids)             # no duplicates
    submits = [e["job_id"] for e in cl.events("submit")]
    assert sorted(submits) == sorted(ids)                             # one submit event per job
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=30)
    try:
        assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    finally:
        conn.close()
