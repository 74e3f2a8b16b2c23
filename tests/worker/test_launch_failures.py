"""A job that cannot start is a failure, not a relaunch loop: on loopback, a missing working
directory, a command that is not found, an interpreter without the module the script imports
and a script that never iterates a GavelIterator each end `failed` after at most max_failures
tries (with backoff), the reason in status, in `gavel-ng logs` and in the event log."""

from __future__ import annotations

import subprocess
import sys
import time

from loopback_cluster import ENV

from gavel_ng.cli.status_cmd import format_status

MAX_FAILURES = 3
BAD = {
    "no_dir": ({"command": [sys.executable, "-c", "pass"], "working_dir": "/nonexistent/gavel-ng-test"},
               "working_dir '/nonexistent/gavel-ng-test' does not exist"),
    "no_cmd": ({"command": ["gavel-ng-no-such-command", "--x"]}, "command 'gavel-ng-no-such-command' not found"),
    "no_import": ({"command": [sys.executable, "-c", "import gavel_ng_no_such_module"]},
                  "ModuleNotFoundError: No module named 'gavel_ng_no_such_module'"),
    "no_iterator": ({"command": [sys.executable, "-c", "print('trained nothing')"]},
                    "exited with status 0 before GavelIterator's end-of-run report"),
}


def test_jobs_that_cannot_start_fail_within_max_failures(cluster_factory):
    cl = cluster_factory(round_seconds=3.0, max_failures=MAX_FAILURES)
    cl.start(("w-v100", "v100", 2))
    jobs = [{"job_type": f"my-{name}", "steps": 100, "name": name, **spec} for name, (spec, _) in BAD.items()]
    t0 = time.monotonic()
    with cl.client() as c:
        ids = c.submit(jobs)
        done = c.wait(ids, timeout=60)
        took = time.monotonic() - t0
        status = c.status()
    assert took < 60 and all(j.status == "failed" for j in done), done
    launches = cl.events("launch")
    for (name, (_, why)), job in zip(BAD.items(), done):
        tries = [e for e in launches if e["job_id"] == job.job_id]
        assert len(tries) == job.attempts == MAX_FAILURES, (name, tries)
        starts = [e["ts"] for e in tries]
        assert all(b - a >= 1.9 for a, b in zip(starts, starts[1:])), (name, starts)   # the backoff: 2 s, 4 s
        assert why in job.error, (name, job.error)
        [failed] = [e for e in cl.events("failed") if e["job_id"] == job.job_id]
        assert why in failed["error"], failed
        ends = [e for e in cl.events("end") if e["job_id"] == job.job_id]
        assert [e["status"] for e in ends] == ["crashed"] * MAX_FAILURES and all(why in e["error"] for e in ends)
        logs = subprocess.run([sys.executable, "-m", "gavel_ng", "logs", str(job.job_id), "--state", str(cl.state)],
                              env=ENV, capture_output=True, text=True, timeout=60)
        assert logs.returncode == 0 and why in logs.stdout, (name, logs)
    text = format_status(status)
    for name, (_, why) in BAD.items():
        line = next(x for x in text.splitlines() if f"[{name}] after {MAX_FAILURES} tries: " in x)
        assert why in line, (name, line)
    print(f"{len(BAD)} jobs that cannot start: {MAX_FAILURES} launches each, all failed within {took:.1f}s")


def test_submit_refuses_a_command_string_and_a_relative_working_dir(tmp_path):
    for job, field, fix in (({"command": "python train.py"}, "jobs[0].command", '["python", "train.py"]'),
                            ({"command": ["python", "t.py"], "working_dir": "code"}, "jobs[0].working_dir",
                             "must be an absolute path")):
        path = tmp_path / "jobs.json"
        path.write_text(__import__("json").dumps([{"job_type": "mine", "steps": 10, **job}]))
        out = subprocess.run([sys.executable, "-m", "gavel_ng", "submit", str(path), "--token-file", str(path)],
                             env=ENV, capture_output=True, text=True, timeout=60)
        assert out.returncode == 2 and field in out.stderr and fix in out.stderr, out.stderr
        assert out.stderr.count("\n") == 1
