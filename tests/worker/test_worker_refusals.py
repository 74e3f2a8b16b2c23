"""A worker the scheduler will never take (wrong token, unknown GPU type) exits 2 with one line
instead of retrying forever; one started before its scheduler says so once and joins it later.
Real scheduler and worker processes on loopback."""

from __future__ import annotations

import re
import subprocess
import sys
import time

import pytest
from loopback_cluster import ENV, wait_for

from gavel_ng.worker.proc import free_port


def _worker(cluster, gpu_type: str, token_file, *extra: str, log=None) -> subprocess.Popen:
    argv = [sys.executable, "-m", "gavel_ng", "worker", "--scheduler", f"127.0.0.1:{cluster.port}", "--gpu-type",
            gpu_type, "--gpus", "1", "--bind", "127.0.0.1", "--advertise", "127.0.0.1", "--token-file",
            str(token_file), "--standby", "0", *extra]
    out = open(log, "ab") if log else subprocess.PIPE
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=out, env=ENV, cwd=cluster.root)
    cluster.procs.append(proc)              # stopped at teardown if still running
    return proc


@pytest.mark.parametrize("case", ["token", "type"])
def test_a_refused_worker_exits_2_with_one_line(cluster_factory, tmp_path, case):
    cl = cluster_factory()
    cl.start()
    token = tmp_path / "wrong-token"
    token.write_text("not-the-token\n")
    proc = _worker(cl, "v100", token) if case == "token" else _worker(cl, "a100", cl.state / "token")
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 2, err
    expected = (rf"gavel-ng worker: error: --token-file='{re.escape(str(token))}': scheduler 127\.0\.0\.1:\d+ "
                r"refused the token \(UNAUTHENTICATED: missing or invalid token\)\n" if case == "token" else
                r"gavel-ng worker: error: --scheduler='127\.0\.0\.1:\d+': refused this worker \(INVALID_ARGUMENT: "
                r"gpu_type='a100': not a worker type of this cluster \(v100, p100, k80\)\)\n")
    assert re.fullmatch(expected, err.decode()), err


def test_a_worker_started_before_its_scheduler_says_so_once_and_registers(cluster_factory, tmp_path):
    cl = cluster_factory()
    cl.port = free_port()
    cl.state.mkdir()
    (cl.state / "token").write_text("shared-token\n")         # the scheduler keeps a token it finds
    log = tmp_path / "early-worker.log"
    proc = _worker(cl, "v100", cl.state / "token", log=log)
    unreachable = f"scheduler 127.0.0.1:{cl.port} unreachable (UNAVAILABLE); retrying"
    wait_for(lambda: unreachable in log.read_text(), 60, "the unreachable line")
    time.sleep(2.0)                          # a few retries (0.5 s, 1 s, ...), none of them logged
    cl.start_scheduler()
    cl.wait_workers(1, timeout=60)
    text = wait_for(lambda: "reachable again" in log.read_text() and log.read_text(), 30, "the reachable line")
    assert text.count("unreachable") == 1, text
    again = re.search(r"WARNING \S+: scheduler 127\.0\.0\.1:\d+ reachable again after \d+ s \((\d+) failed attempts\)",
                      text)
    assert again and int(again[1]) >= 2, text
    assert proc.poll() is None


def test_backoff_doubles_to_its_cap_and_tells_an_outage_in_two_lines(caplog):
    from gavel_ng.worker.backoff import Backoff

    now = [100.0]
    b = Backoff("sched:1", clock=lambda: now[0])
    with caplog.at_level("WARNING"):
        delays = [b.failed("UNAVAILABLE") for _ in range(7)]
        now[0] += 42
        b.succeeded()
        b.succeeded()                    # no outage: nothing to say
        assert b.failed("DEADLINE_EXCEEDED") == 0.5      # a new outage starts over
    assert delays == [0.5, 1, 2, 4, 8, 10, 10]
    assert [r.getMessage() for r in caplog.records] == [
        "scheduler sched:1 unreachable (UNAVAILABLE); retrying",
        "scheduler sched:1 reachable again after 42 s (7 failed attempts)",
        "scheduler sched:1 unreachable (DEADLINE_EXCEEDED); retrying"]
