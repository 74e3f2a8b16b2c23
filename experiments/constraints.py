"""Constraints a policy adds, kept in the rounds that run (issue 37): the issue's budget cases.

Max-min fairness within a cost budget (examples/constrained_policies.py: `budget_las`, half the
cluster's list price per hour; `budget_las_20`, a fifth) and under a cap of 4 V100s (`v100_cap`),
on v100/p100/k80 = 8/8/8 with the built-in profiles, the single-GPU Poisson trace, jobs 0-40
measured, seed 0: the issue's `gavel-ng simulate` command. Each case under the mechanism, and the
budget also with `--no-backfill` and under `--ideal` (the allocation's exact shares, no rounds).

    python experiments/constraints.py [--cases NAME,...] [--out FILE.csv]

Prints, per run: what it spent per hour over the run (`run_cost_usd / simulated_hours`) against the
bound, the summary's measured excess (the largest of a round, and over the run: 0 when kept), the
JCTs, and the jobs of the window still unfinished when the run stopped (an overloaded run stops at
its time cap: its average JCT then leaves those jobs out). Several minutes a run.
"""

from __future__ import annotations

import argparse
import csv
import logging
import sys
from pathlib import Path

import numpy as np

from gavel_ng.cluster import Cluster
from gavel_ng.policies.plugins import load_plugins
from gavel_ng.simulator import SimConfig, simulate
from gavel_ng.simulator.tables import default_table
from gavel_ng.traces import TraceGenerator, TraceSpec

PLUGIN = Path(__file__).resolve().parents[1] / "examples" / "constrained_policies.py"
CLUSTER = "v100=8,p100=8,k80=8"
WINDOW = (0, 40)
# name -> (policy, jobs/h, SimConfig options)
CASES = {
    "budget-1.5": ("budget_las", 1.5, {}),
    "budget-1.5-no-backfill": ("budget_las", 1.5, {"backfill": False}),
    "budget-1.5-ideal": ("budget_las", 1.5, {"ideal": True}),
    "budget-2": ("budget_las", 2.0, {}),
    "budget20-1.5": ("budget_las_20", 1.5, {}),
    "cap-1.5": ("v100_cap", 1.5, {}),
}
FIELDS = ["case", "policy", "jobs_per_hour", "constraint", "bound", "spent_per_hour", "max_round_excess", "run_excess",
          "avg_jct_hours", "p50_jct_hours", "unfinished", "unstable", "wall_seconds"]


def bound(policy: str, cluster: Cluster) -> float:
    """The policy's bound: $/h for the budgets, V100s for the cap."""
    if policy == "v100_cap":
        return 4.0
    prices = cluster.priced({}).price_per_gpu_hour
    share = 0.2 if policy == "budget_las_20" else 0.5
    return share * sum(prices[w] * n for w, n in cluster.gpus.items())


def run(case: str) -> dict:
    policy, rate, options = CASES[case]
    cluster = Cluster.parse(CLUSTER)
    table = default_table(cluster.worker_types)
    res = simulate(cluster, table, TraceGenerator(TraceSpec(rate, seed=0), table),
                   SimConfig(policy=policy, window=WINDOW, seed=0, **options))
    s = res.summary
    [(name, measured)] = s["constraints"].items()
    b = bound(policy, cluster)
    spent = s["run_cost_usd"] / s["simulated_hours"] if policy != "v100_cap" else float("nan")
    return {"case": case, "policy": policy, "jobs_per_hour": rate, "constraint": name, "bound": round(b, 3),
            "spent_per_hour": round(spent, 2), "max_round_excess": measured["max_round_excess"],
            "run_excess": measured["run_excess"],
            "avg_jct_hours": s["avg_jct_hours"], "p50_jct_hours": s["p50_jct_hours"],
            "unfinished": int((~np.isfinite(res.jobs.finish[WINDOW[0]:WINDOW[1]])).sum()),
            "unstable": s["unstable"], "wall_seconds": s["wall_seconds"]}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cases", default=",".join(CASES), help=f"some of {', '.join(CASES)}")
    ap.add_argument("--out", help="also write the rows to this CSV file")
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.ERROR)
    load_plugins([str(PLUGIN)])
    rows = []
    print(" ".join(f"{f:>15}" for f in FIELDS))
    for case in args.cases.split(","):
        rows.append(run(case))
        print(" ".join(f"{rows[-1][f]!s:>15}" for f in FIELDS), flush=True)
    if args.out:
        with open(args.out, "w", newline="") as fh:
            w = csv.DictWriter(fh, fieldnames=FIELDS)
            w.writeheader()
            w.writerows(rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
