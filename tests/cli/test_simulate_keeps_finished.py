"""A multi-policy `simulate` prints and writes each policy's results as soon as it finishes, and a
SIGTERM or SIGINT keeps what finished (issue 37): a real process, a real signal."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time

import pytest

# fifo finishes in about a second; las with cold solves on a larger window takes far longer
ARGS = ["--policy", "fifo,las", "--cluster", "v100=8,a100=8,h100=8", "--jobs-per-hour", "2", "--window", "0:400",
        "--cold-solves"]


@pytest.mark.slow
@pytest.mark.parametrize("sig, status", [(signal.SIGTERM, 143), (signal.SIGINT, 130)])
def test_a_signal_keeps_the_policies_that_finished(tmp_path, sig, status):
    out = tmp_path / "out"
    proc = subprocess.Popen([sys.executable, "-c", "import sys; from gavel_ng.cli import main; sys.exit(main())",
                             "simulate", *ARGS, "--out", str(out)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 120
        while not (out / "fifo" / "jct.png").exists():   # the last file of fifo's outputs
            assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
            time.sleep(0.05)
        time.sleep(0.5)   # into las's run
        assert proc.poll() is None, "las finished before the signal: make its run longer"
        proc.send_signal(sig)
        stdout, stderr = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == status, stderr
    assert stdout.startswith("policy fifo ") and "policy las " not in stdout      # printed as it finished
    assert f"stopped by {signal.Signals(sig).name} after 1 of 2 policies" in stderr and "Traceback" not in stderr
    summary = json.loads((out / "fifo" / "summary.json").read_text())
    assert summary["policy"] == "fifo" and summary["jobs_measured"] == 400
    assert (out / "fifo" / "jobs.csv").stat().st_size > 0 and not (out / "las").exists()
