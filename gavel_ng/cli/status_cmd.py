"""`gavel-ng status`: workers, jobs with progress, the allocation and the round of a running scheduler."""

from __future__ import annotations

import dataclasses
import json
import sys

from .submit_cmd import add_connection_args, client_from_args


def add_parser(sub) -> None:
    p = sub.add_parser("status", help="show a running scheduler's workers, jobs and allocation",
                       description="Workers, jobs (progress, placement), the current allocation and round.")
    add_connection_args(p)
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.add_argument("--all", action="store_true", help="include finished jobs in the table")
    p.set_defaults(run=run)


def run(args) -> int:
    from ..worker.client import SchedulerError

    with client_from_args(args) as client:
        try:
            st = client.status()
        except SchedulerError as exc:
            print(f"gavel-ng status: error: {exc}", file=sys.stderr)
            return 2
    if args.json:
        print(json.dumps(dataclasses.asdict(st), indent=1))
        return 0
    print(f"policy {st.policy}, round {st.round} ({st.round_seconds:g}s, ends in {st.round_ends_in:.1f}s), "
          f"{st.launches} launches, {st.renewals} lease renewals")
    print(f"\nworkers ({sum(w.alive for w in st.workers)} alive)")
    print(f"  {'id':<14}{'address':<24}{'type':<8}{'gpus':>5}  {'state':<6}{'jobs'}")
    for w in st.workers:
        jobs = ",".join(str(j) for j in w.running_jobs) or "-"
        print(f"  {w.worker_id:<14}{w.address:<24}{w.gpu_type:<8}{w.gpus:>5}  {'up' if w.alive else 'down':<6}{jobs}")
    shown = [j for j in st.jobs if args.all or not j.finished]
    done = sum(j.status == "done" for j in st.jobs)
    print(f"\njobs ({len(st.jobs)} submitted, {done} done)")
    print(f"  {'id':>4}  {'job type':<34}{'gpus':>4}  {'status':<10}{'progress':>18}  {'tries':>5}  placement")
    for j in shown:
        pct = 100.0 * j.steps_live / j.steps_total if j.steps_total else 0.0
        prog = f"{j.steps_live}/{j.steps_total} {pct:3.0f}%"
        label = j.job_type + (f" [{j.name}]" if j.name else "")
        print(f"  {j.job_id:>4}  {label[:33]:<34}{j.scale_factor:>4}  {j.status:<10}{prog:>18}  {j.attempts:>5}  "
              f"{j.placement or '-'}")
    if st.allocation:
        print("\nallocation (fraction of time per worker type)")
        print("  " + f"{'jobs':<10}" + "".join(f"{w:>8}" for w in st.worker_types))
        for jobs, share in st.allocation:
            label = "+".join(str(j) for j in jobs)
            print("  " + f"{label:<10}" + "".join(f"{share.get(w, 0.0):>8.3f}" for w in st.worker_types))
    return 0
