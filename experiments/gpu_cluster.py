"""The runtime end to end on a real GPU: a scheduler, a worker per GPU type name, CUDA jobs.

    python experiments/gpu_cluster.py [--gpu-types v100,h100] [--job-types ...] [--job-seconds 60]
        [--round-seconds 20] [--policy las] [--space-sharing] [--isolated results/gpu/gpu_isolated.csv]

Starts a scheduler on loopback and one worker per name in --gpu-types, each offering
GPU 0 of this machine (on a one-GPU machine the workers share it, so two jobs that run at
once on two workers contend for one GPU). Submits one built-in job per job type, sized
to last --job-seconds alone (steps/s from --isolated, as gpu_pairs.py writes it, or a
short probe), waits for all and reads the scheduler's SQLite store:

* per job: completion time, attempts, the worker types it ran on, and the device its
  train log names (the check that jobs trained on CUDA);
* per attempt: steps/s over its compute time, and whether another job's attempt
  overlapped it (every worker offers GPU 0); an attempt alone on the GPU against the plain loop's rate is the
  whole runtime's cost per step (iterator, lease, reporting);
* the scheduler's measured throughput table, which the policy used after the first
  measurements.

Writes DIR/gpu_cluster_jobs.csv and DIR/gpu_cluster_attempts.csv.
"""

from __future__ import annotations

import argparse
import csv
import json
import logging
import sqlite3
import sys
import tempfile
import time
from pathlib import Path

from common import write_rows
from gpu_pairs import JOB_TYPES
from local_cluster import LocalProcesses

log = logging.getLogger("gpu_cluster")


def probe(job_type: str, size: str, seconds: float = 2.0) -> float:
    """steps/s of the model alone (plain loop) when no gpu_pairs results are at hand."""
    import torch

    from gavel_ng.workloads import get_workload, parse_job_type

    family, bs = parse_job_type(job_type)
    w = get_workload(family)
    dev = torch.device("cuda", 0) if torch.cuda.is_available() else torch.device("cpu")
    model = w.build_model(size).to(dev)
    opt = w.make_optimizer(model)
    batch = w.make_batch(bs, size, seed=0, device=dev)
    for _ in range(5):
        w.train_step(model, opt, batch)
    n, t0 = 0, time.perf_counter()
    while time.perf_counter() - t0 < seconds:
        w.train_step(model, opt, batch)
        n += 1
    return n / (time.perf_counter() - t0)


def isolated_rates(path: Path | None, job_types: list[str], size: str) -> dict[str, float]:
    known = {}
    if path is not None and path.exists():
        with open(path) as f:
            known = {r["job_type"]: float(r["plain_steps_per_s"]) for r in csv.DictReader(f)}
    return {t: known[t] if t in known else probe(t, size) for t in job_types}


def run(args, root: Path, alone: dict[str, float]) -> tuple[list[dict], list[dict], dict]:
    from gavel_ng.protocol.client import SchedulerClient
    from gavel_ng.runtime.records import job_dir

    types = args.gpu_types.split(",")
    (root / "cluster.json").write_text(json.dumps({
        "worker_types": types, "policy": args.policy, "round_seconds": args.round_seconds,
        "heartbeat_seconds": 1.0, "space_sharing": args.space_sharing, "grace_seconds": 30}))
    specs = [{"job_type": t, "steps": max(20, int(alone[t] * args.job_seconds)), "size": args.size}
             for t in args.job_types]
    start = time.time()
    with LocalProcesses(root) as procs:
        port = procs.start("scheduler", ["-v", "scheduler", "--cluster-config", "cluster.json", "--state", "state",
                                         "--port", "0", "--bind", "127.0.0.1"])
        for t in types:
            procs.start(f"worker-{t}", ["-v", "worker", "--scheduler", f"127.0.0.1:{port}", "--gpu-type", t,
                                        "--gpus", "1", "--gpu-ids", "0", "--bind", "127.0.0.1", "--advertise",
                                        "127.0.0.1", "--token-file", "state/token", "--threads-per-gpu", "2"])
        token = (root / "state" / "token").read_text().strip()
        with SchedulerClient(f"127.0.0.1:{port}", token=token) as c:
            ids = c.submit(specs)
            try:
                c.wait(ids, timeout=args.timeout)
            except TimeoutError as e:    # report what did finish; unfinished jobs show no JCT
                log.warning("%s", e)
    total = time.time() - start
    db = sqlite3.connect(root / "state" / "gavel.sqlite")
    jobs_db = {j: (json.loads(spec), sub, fin, status) for j, spec, sub, fin, status in
               db.execute("SELECT job_id, spec, submitted, finished, status FROM jobs")}
    att = db.execute("SELECT job_id, attempt, worker_type, launched, ended, steps_run, compute_seconds, renewals, "
                     "placement FROM attempts ORDER BY launched").fetchall()
    table = db.execute("SELECT job_type, worker_type, consolidated, steps_per_s, samples FROM throughputs").fetchall()
    state_id = (db.execute("SELECT value FROM meta WHERE key = 'state_id'").fetchone() or [""])[0]
    db.close()
    attempts = []
    for j, a, wt, launched, ended, steps, compute, renewals, placement in att:
        job_type = jobs_db[j][0]["job_type"]
        # every worker offers GPU 0: any other job's attempt in the same interval shared the GPU
        overlap = any(o[0] != j and o[3] < (ended or 1e18) and (o[4] or 1e18) > launched for o in att)
        rate = steps / compute if steps and compute else float("nan")
        attempts.append({"job_id": j, "attempt": a, "job_type": job_type, "worker_type": wt, "placement": placement,
                         "launched_s": round(launched - start, 1), "wall_s": round((ended or launched) - launched, 1),
                         "steps": steps, "steps_per_s": round(rate, 2), "renewals": renewals,
                         "gpu_shared": overlap, "vs_alone": round(rate / alone[job_type], 3)})
    jobs = []
    for j, (spec, sub, fin, status) in sorted(jobs_db.items()):
        path = job_dir(root / "state" / "checkpoints", j, state_id) / "train.jsonl"
        lines = [json.loads(x) for x in path.read_text().splitlines()] if path.exists() else []
        devices = sorted({f"{e['device']} ({e['name']})" for e in lines if e.get("event") == "device"})
        mine = [a for a in attempts if a["job_id"] == j]
        alone_s = spec["steps"] / alone[spec["job_type"]]
        jobs.append({"job_id": j, "job_type": spec["job_type"], "steps": spec["steps"],
                     "status": status,
                     "jct_s": round(fin - sub, 1) if fin and status == "done" else None, "alone_s": round(alone_s, 1),
                     "attempts": len(mine), "worker_types": "+".join(dict.fromkeys(a["worker_type"] for a in mine)),
                     "devices": "; ".join(devices)})
    return jobs, attempts, {"total_s": total, "table": table}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--gpu-types", default="v100,h100", help="one worker per name, each on GPU 0")
    p.add_argument("--job-types", nargs="+", default=JOB_TYPES[:5])
    p.add_argument("--job-seconds", type=float, default=60.0, help="each job's length alone on the GPU")
    p.add_argument("--round-seconds", type=float, default=20.0)
    p.add_argument("--policy", default="las")
    p.add_argument("--space-sharing", action="store_true")
    p.add_argument("--size", default="full", choices=("full", "tiny"), help="tiny: a dry run on the CPU")
    p.add_argument("--isolated", type=Path, help="gpu_pairs.py's gpu_isolated.csv (else a 2 s probe per type)")
    p.add_argument("--timeout", type=float, default=1200.0)
    p.add_argument("--keep", type=Path, help="keep the cluster's state and logs here")
    p.add_argument("--out", type=Path, default=Path(__file__).resolve().parents[1] / "out" / "experiments" / "gpu",
                   help="default out/experiments/gpu (the committed results: experiments/results/gpu)")
    args = p.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    alone = isolated_rates(args.isolated, args.job_types, args.size)
    with tempfile.TemporaryDirectory(prefix="gavel-gpu-") as tmp:
        root = args.keep or Path(tmp)
        root.mkdir(parents=True, exist_ok=True)
        jobs, attempts, info = run(args, root, alone)
    for j in jobs:
        log.info("job %d %-34s %6d steps, %s: JCT %6.1f s (alone %5.1f s), %d attempts on %s; ran on %s", j["job_id"],
                 j["job_type"], j["steps"], j["status"], j["jct_s"] or float("nan"), j["alone_s"], j["attempts"],
                 j["worker_types"], j["devices"] or "?")
    solo = [a for a in attempts if not a["gpu_shared"] and a["steps"]]
    for a in solo:
        log.info("alone on the GPU: job %d attempt %d %-34s %8.1f steps/s = %.3f of the plain loop's", a["job_id"],
                 a["attempt"], a["job_type"], a["steps_per_s"], a["vs_alone"])
    log.info("%d jobs in %.0f s; makespan alone, back to back: %.0f s", len(jobs), info["total_s"],
             sum(j["alone_s"] for j in jobs))
    for job_type, wt, cons, rate, n in info["table"]:
        log.info("measured table: %-34s on %-5s %8.1f steps/s (%d samples)", job_type, wt, rate, n)
    write_rows(args.out / "gpu_cluster_jobs.csv", jobs)
    write_rows(args.out / "gpu_cluster_attempts.csv", attempts)
    return 0 if all(j["jct_s"] for j in jobs) else 1


if __name__ == "__main__":
    sys.exit(main())
