"""SIGTERM to a running job process (the built-in runner, as a worker starts it): it commits a
checkpoint of the step it reached and exits 0, within the grace period before the SIGKILL."""

from __future__ import annotations

import json
import logging
import os
import signal
import socket
import subprocess
import sys
import time

import pytest

from gavel_ng.iterator import checkpoint as ckpt

log = logging.getLogger(__name__)


def _unused_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.slow
def test_sigterm_commits_the_current_step_and_exits_0(tmp_path):
    ck, result = tmp_path / "ck", tmp_path / "result.json"
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONUNBUFFERED": "1",
           "GAVEL_NG_SCHEDULER": f"127.0.0.1:{_unused_port()}", "GAVEL_NG_JOB_ID": "7", "GAVEL_NG_ATTEMPT": "2",
           "GAVEL_NG_JOB_TOKEN": "job:7:2:x", "GAVEL_NG_CHECKPOINT_DIR": str(ck), "GAVEL_NG_STEPS": "100000000",
           "GAVEL_NG_LEASE_DEADLINE": repr(time.time() + 3600), "GAVEL_NG_RESULT_FILE": str(result),
           "GAVEL_NG_GRACE_SECONDS": "30", "RUN_JOB_SAVE_DELAY": "1"}
    ck.mkdir()                                    # as the worker does
    out = open(tmp_path / "job.log", "wb")
    proc = subprocess.Popen([sys.executable, "-m", "gavel_ng.worker.run_job", "--job-type",
                             "ResNet-18 (batch size 32)", "--size", "tiny"], env=env, stdout=out,
                            stderr=subprocess.STDOUT)
    try:
        end = time.monotonic() + 120
        while not (ck / "train.jsonl").exists() or '"step": 20' not in (ck / "train.jsonl").read_text():
            assert proc.poll() is None, (tmp_path / "job.log").read_text()
            assert time.monotonic() < end, "the job never reached step 20"
            time.sleep(0.2)
        sent = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        rc = proc.wait(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        out.close()
    print(f"SIGTERM to exit: {time.monotonic() - sent:.2f} s (grace 30 s, save 1 s)")
    assert rc == 0, (tmp_path / "job.log").read_text()
    steps = [e["step"] for e in map(json.loads, (ck / "train.jsonl").read_text().splitlines()) if "loss" in e]
    step, path = ckpt.latest(ck)
    assert step == steps[-1] > 20 and path.name.endswith("-a2")
    assert json.loads(result.read_text())["step"] == step
