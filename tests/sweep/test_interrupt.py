"""A real interrupted sweep: Ctrl-C (SIGINT to the whole process group, as a terminal
sends it) after a few points, then the same command again finishes the rest."""

import os
import signal
import subprocess
import sys
import time

import pandas as pd
import pytest


def _rows(path) -> int:
    if not path.exists():
        return 0
    return max(0, sum(1 for line in path.read_text().splitlines() if line.strip()) - 1)


def _default_sigint() -> None:
    signal.signal(signal.SIGINT, signal.SIG_DFL)


@pytest.mark.slow
def test_ctrl_c_then_restart_continues(tmp_path, tiny_args):
    results = tmp_path / "r.csv"
    cmd = [sys.executable, "-m", "gavel_ng", "sweep", "--results", str(results), "--workers", "2",
           "--policy", "las,las_agnostic", "--jobs-per-hour", "1,1.5,2,2.5,3,3.5", "--seed", "0,1",
           *tiny_args]
    cmd[cmd.index("0:12")] = "0:40"
    # a shell's background job (nohup, `make test &`) starts with SIGINT ignored, and Python keeps an
    # ignored SIGINT ignored: give the sweep a terminal's default, whatever this process inherited
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True, preexec_fn=_default_sigint)
    deadline = time.monotonic() + 60
    while _rows(results) < 3 and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    assert proc.poll() is None, "the sweep finished before it could be interrupted"
    os.killpg(proc.pid, signal.SIGINT)
    _out, err = proc.communicate(timeout=30)
    assert proc.returncode == 130, err
    assert "interrupted" in err
    first = _rows(results)
    assert 3 <= first < 24
    before = pd.read_csv(results)
    assert (before["status"] == "ok").all()

    again = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert again.returncode == 0, again.stderr
    assert f"{first} already done, {24 - first} run" in again.stdout
    after = pd.read_csv(results)
    assert len(after) == 24 and after["point_id"].is_unique
    pd.testing.assert_frame_equal(after.iloc[:first], before)   # finished rows untouched
