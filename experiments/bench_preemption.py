"""Preemption overhead per round, with and without lease renewals (cf. Gavel Table 4).

    python experiments/bench_preemption.py [--round-seconds 6] [--rounds 4] [--job-types ...] [--standby 1]

For each job type, a real scheduler and one worker (one "v100" on this CPU) run one tiny
job sized to last about `--rounds` rounds, once with lease renewals (the job keeps its
GPU and never stops) and once with `--no-lease-renewals` (it checkpoints, exits and is
relaunched every round). Overhead = job completion time (first launch to finish) minus
the time its steps take at the throughput measured in the same run; reported per round
and as a share of the round. Writes experiments/results/preemption.csv.
"""

from __future__ import annotations

import argparse
import csv
import json
import sqlite3
import sys
import tempfile
import time
from pathlib import Path

from local_cluster import LocalProcesses

TABLE4 = {"ResNet-18": (0.94, 0.17), "ResNet-50": (1.58, 0.25), "A3C": (0.22, 0.0), "LM": (2.91, 0.47),
          "Transformer": (0.77, 0.11), "CycleGAN": (0.77, 0.11)}
JOB_TYPES = {"ResNet-18": "ResNet-18 (batch size 32)", "ResNet-50": "ResNet-50 (batch size 32)", "A3C": "A3C",
             "LM": "LM (batch size 20)", "Transformer": "Transformer (batch size 32)", "CycleGAN": "CycleGAN"}


def step_seconds(job_type: str) -> float:
    """Seconds per training step of the tiny model on one CPU thread (sizes the job)."""
    import torch

    from gavel_ng.workloads import get_workload, parse_job_type

    torch.set_num_threads(1)
    family, bs = parse_job_type(job_type)
    w = get_workload(family)
    model = w.build_model("tiny")
    opt = w.make_optimizer(model)
    batch = w.make_batch(bs, "tiny", seed=0)
    w.train_step(model, opt, batch)
    start = time.perf_counter()
    for _ in range(10):
        w.train_step(model, opt, batch)
    return (time.perf_counter() - start) / 10


def run_one(job_type: str, steps: int, renewals: bool, round_s: float, standby: int, root: Path) -> dict:
    from gavel_ng.protocol.client import SchedulerClient

    root.mkdir(parents=True)
    (root / "cluster.json").write_text(json.dumps({"worker_types": ["v100"], "round_seconds": round_s,
                                                   "heartbeat_seconds": 0.5, "lease_renewals": renewals}))
    with LocalProcesses(root) as procs:     # one thread per process, as on a CPU worker
        port = procs.start("scheduler", ["scheduler", "--cluster-config", "cluster.json", "--state", "state",
                                         "--port", "0", "--bind", "127.0.0.1"])
        procs.start("worker", ["worker", "--scheduler", f"127.0.0.1:{port}", "--gpu-type", "v100", "--gpus", "1",
                               "--bind", "127.0.0.1", "--advertise", "127.0.0.1", "--token-file", "state/token",
                               "--standby", str(standby)])
        time.sleep(2.0)                               # let the standby interpreter warm up
        token = (root / "state" / "token").read_text().strip()
        with SchedulerClient(f"127.0.0.1:{port}", token=token) as c:
            [job] = c.submit({"job_type": job_type, "steps": steps, "size": "tiny"})
            c.wait([job], timeout=60 * round_s + 600)
    db = sqlite3.connect(root / "state" / "gavel.sqlite")
    launched, finished = db.execute("SELECT MIN(launched), MAX(ended) FROM attempts WHERE job_id = ?",
                                    (job,)).fetchone()
    run, compute, attempts = db.execute("SELECT SUM(steps_run), SUM(compute_seconds), COUNT(*) FROM attempts "
                                        "WHERE job_id = ?", (job,)).fetchone()
    renewed = db.execute("SELECT COUNT(*) FROM events WHERE kind = 'renew'").fetchone()[0]
    db.close()
    jct = finished - launched
    pure = steps / (run / compute)              # the steps at the measured steps/s
    rounds = jct / round_s
    return {"jct_s": jct, "compute_s": pure, "attempts": attempts, "renewals": renewed, "rounds": rounds,
            "overhead_s_per_round": (jct - pure) / rounds, "overhead_pct": 100 * (jct - pure) / jct}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--round-seconds", type=float, default=6.0)
    p.add_argument("--rounds", type=float, default=4.0, help="rounds each job should last")
    p.add_argument("--job-types", nargs="+", default=["ResNet-18", "LM", "Transformer"], choices=list(JOB_TYPES))
    p.add_argument("--standby", type=int, default=1, help="warm interpreters on the worker (0: cold starts)")
    p.add_argument("--out", type=Path,
                   default=Path(__file__).resolve().parents[1] / "out" / "experiments" / "preemption.csv",
                   help="default out/experiments/preemption.csv (committed: experiments/results/preemption.csv)")
    args = p.parse_args(argv)
    rows = []
    with tempfile.TemporaryDirectory(prefix="gavel-bench-") as tmp:
        for name in args.job_types:
            job_type = JOB_TYPES[name]
            steps = max(50, int(args.rounds * args.round_seconds / step_seconds(job_type)))
            for renewals in (False, True):
                r = run_one(job_type, steps, renewals, args.round_seconds, args.standby,
                            Path(tmp) / f"{name}-{int(renewals)}")
                rows.append({"job_type": name, "lease_renewals": renewals, "steps": steps,
                             "round_seconds": args.round_seconds, "standby": args.standby,
                             **{k: round(v, 3) if isinstance(v, float) else v for k, v in r.items()},
                             "paper_pct_360s": TABLE4[name][1 if renewals else 0]})
                print(f"{name:<12} renewals={'yes' if renewals else 'no ':<3} attempts={r['attempts']:>2} "
                      f"overhead {r['overhead_s_per_round']:6.2f} s/round = {r['overhead_pct']:5.1f}% of "
                      f"{args.round_seconds:g}s rounds (Gavel, 360 s rounds on GPUs: "
                      f"{TABLE4[name][1 if renewals else 0]}%)", flush=True)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    with open(args.out, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
