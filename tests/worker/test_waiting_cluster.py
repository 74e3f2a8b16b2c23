"""Why a job waits, as an operator sees it on loopback (real scheduler and workers, the CLI as a process):
a 4-GPU job on 1-GPU workers, `submit` warning and `--strict` refusing, a cancel keeping progress."""

from __future__ import annotations

import json
import subprocess
import sys

from loopback_cluster import ENV, wait_for

WIDE = "needs 4 GPUs of one type; the largest worker type it may run on has 1 (v100: 1 x 1 GPU)"


def cli(cl, *args: str) -> subprocess.CompletedProcess:
    conn = ["--scheduler", f"127.0.0.1:{cl.port}", "--token-file", str(cl.state / "token")]
    offline = "--state" in args
    return subprocess.run([sys.executable, "-m", "gavel_ng", *args, *([] if offline else conn)], env=ENV,
                          cwd=cl.root, capture_output=True, text=True, timeout=120)


def test_a_job_no_worker_can_run_says_why_and_a_cancel_keeps_progress(cluster_factory):
    cl = cluster_factory(round_seconds=3.0)
    cl.start(("w1", "v100", 1), ("w2", "k80", 1))
    wide = cl.root / "wide.json"
    wide.write_text(json.dumps({"job_type": "ResNet-18 (batch size 32)", "steps": 100, "size": "tiny",
                                "scale_factor": 4, "name": "wide"}))
    strict = cli(cl, "submit", str(wide), "--strict")
    assert strict.returncode == 2 and WIDE in strict.stderr and "nothing was submitted" in strict.stderr
    sub = cli(cl, "submit", str(wide))
    assert sub.returncode == 0, sub.stderr
    [job] = map(int, sub.stdout.split())
    assert f"warning: job {job} (wide): no current worker can run it: {WIDE}" in sub.stderr
    with cl.client() as c:
        assert c.status().job_counts == {"queued": 1}          # --strict added nothing
        wait_for(lambda: c.jobs(ids=[job])[0].reason.startswith(WIDE), 30, "no reason for the wide job")
    for args in (("status",), ("status", "--state", str(cl.state))):
        out = cli(cl, *args)
        assert out.returncode == 0 and f"waiting: {WIDE}" in out.stdout, (args, out.stdout, out.stderr)

    long = cl.root / "long.json"
    long.write_text(json.dumps({"job_type": "ResNet-18 (batch size 32)", "steps": 5000, "size": "tiny",
                                "allowed_types": ["v100"]}))
    [run] = map(int, cli(cl, "submit", str(long)).stdout.split())
    with cl.client() as c:
        seen = wait_for(lambda: c.jobs(ids=[run])[0].steps_live, 120, "the long job reported no progress")
        assert any(run in jobs for jobs, _ in c.status().allocation)
        assert cli(cl, "cancel", str(run)).returncode == 0
        after = c.jobs(ids=[run])[0]
        assert after.status == "cancelled" and after.steps_live >= seen > 0
        assert not any(run in jobs for jobs, _ in c.status().allocation)
    for args in (("status", "--all"), ("status", "--all", "--state", str(cl.state))):
        out = cli(cl, *args)
        line = next(x for x in out.stdout.splitlines() if x.split()[:1] == [str(run)])
        done = int(line.split("cancelled")[1].split("/")[0])
        assert done >= seen, (args, line)
        alloc = out.stdout.split("allocation (")[1] if "allocation (" in out.stdout else ""
        assert not any(x.split()[:1] == [str(run)] for x in alloc.splitlines()), (args, out.stdout)
