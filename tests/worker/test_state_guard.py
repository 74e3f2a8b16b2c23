"""Scheduler processes and their state directory: a second one refuses to start naming the first, a kill -9
releases the lock, and a damaged state file is one line with the way back, never a traceback."""

from __future__ import annotations

import signal
import sqlite3

import pytest

pytestmark = pytest.mark.slow


def _exits(cl, name: str) -> tuple[int, str]:
    proc, log = cl._spawn(["scheduler", "--cluster-config", str(cl.config), "--state", str(cl.state), "--port", "0",
                           "--bind", "127.0.0.1"], name)
    rc = proc.wait(60)
    return rc, log.read_text()


def test_one_scheduler_per_state_and_a_damaged_state_in_one_line(cluster_factory):
    cl = cluster_factory()
    cl.start_scheduler()
    first = cl.scheduler
    rc, out = _exits(cl, "second")
    assert rc == 2 and f"in use by another scheduler (pid {first.pid} on " in out and f":{cl.port}" in out, out
    first.send_signal(signal.SIGKILL)                   # a crash: the kernel drops its lock
    first.wait(10)
    cl.port = 0
    cl.start_scheduler()                               # starts: nothing to clean up by hand
    cl.stop_process(cl.scheduler)
    db = sqlite3.connect(cl.state / "gavel.sqlite")
    db.execute("INSERT INTO jobs (spec, status, steps_done, submitted) VALUES ('{not json', 'queued', 0, 0)")
    db.commit()
    db.close()
    rc, out = _exits(cl, "damaged")
    lines = [x for x in out.splitlines() if x.startswith("gavel-ng scheduler: error:")]
    assert rc == 2 and len(lines) == 1 and "Traceback" not in out, out
    assert "gavel.sqlite is damaged (job 1's stored row cannot be read" in lines[0] and "gavel.sqlite.bak" in lines[0]
