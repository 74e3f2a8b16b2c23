"""A job that cannot start: how many launches it costs, and how it ends (issue 38).

    python experiments/launch_failures.py [--seconds 40] [--round-seconds 6] [--max-failures 3]

A real scheduler and one worker (one "v100" on this CPU) get one job whose `working_dir` does not
exist on the worker. Counted from the store's event log: launches within `--seconds` (or until the
job ended), the job's final status, and the reason recorded. Before issue 38 such a launch was not
counted as a failure and the job was relaunched at every tick (781 launches in 40 s, status
`running`); now each launch counts toward `max_failures`, with backoff, and the job ends `failed`.
"""

from __future__ import annotations

import argparse
import json
import sqlite3
import sys
import tempfile
import time
from pathlib import Path

from local_cluster import LocalProcesses


def run(seconds: float, round_s: float, max_failures: int, root: Path) -> dict:
    from gavel_ng.protocol.client import SchedulerClient

    (root / "cluster.json").write_text(json.dumps({"worker_types": ["v100"], "round_seconds": round_s,
                                                   "heartbeat_seconds": 0.5, "max_failures": max_failures}))
    job = {"job_type": "ResNet-18 (batch size 32)", "steps": 100, "size": "tiny",
           "command": [sys.executable, "-c", "pass"], "working_dir": "/nonexistent/gavel-ng"}
    with LocalProcesses(root) as procs:
        port = procs.start("scheduler", ["scheduler", "--cluster-config", "cluster.json", "--state", "state",
                                         "--port", "0", "--bind", "127.0.0.1"])
        procs.start("worker", ["worker", "--scheduler", f"127.0.0.1:{port}", "--gpu-type", "v100", "--gpus", "1",
                               "--bind", "127.0.0.1", "--advertise", "127.0.0.1", "--token-file", "state/token"])
        token = (root / "state" / "token").read_text().strip()
        with SchedulerClient(f"127.0.0.1:{port}", token=token) as c:
            while not c.status().workers:
                time.sleep(0.1)
            t0 = time.monotonic()
            [job_id] = c.submit(job)
            while time.monotonic() - t0 < seconds:
                [j] = c.jobs(ids=[job_id])
                if j.finished:
                    break
                time.sleep(0.2)
            took = time.monotonic() - t0
            [j] = c.jobs(ids=[job_id])
    db = sqlite3.connect(f"file:{root / 'state' / 'gavel.sqlite'}?mode=ro", uri=True)
    launches = db.execute("SELECT COUNT(*) FROM events WHERE kind = 'launch' AND job_id = ?", (job_id,)).fetchone()[0]
    db.close()
    return {"seconds": round(took, 1), "launches": launches, "status": j.status, "attempts": j.attempts,
            "reason": getattr(j, "error", "") or "(none recorded)"}


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--seconds", type=float, default=40.0, help="how long to watch at most (default 40)")
    p.add_argument("--round-seconds", type=float, default=6.0)
    p.add_argument("--max-failures", type=int, default=3)
    args = p.parse_args()
    with tempfile.TemporaryDirectory(prefix="gavel-launch-failures-") as tmp:
        out = run(args.seconds, args.round_seconds, args.max_failures, Path(tmp))
    print(f"missing working_dir: {out['launches']} launches in {out['seconds']} s, status {out['status']} "
          f"after {out['attempts']} attempts; reason: {out['reason']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
