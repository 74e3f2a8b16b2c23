"""Simulator speed: one continuous-single point (36/36/36, reference table, jobs 4000-5000).

    python experiments/bench_simulator.py [--loads 3.0,5.6] [--policy las] [--repeat 1]

Prints wall time per point against the target (< 10 s, and 10x the Gavel prototype's
97 s measured on the 2-core dev machine for the 3 jobs/h point). Not a test: timings
are never asserted.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
TABLE = "gavel-osdi20"   # Gavel's measured table, shipped with gavel_ng
PROTOTYPE_SECONDS = 97.0
TARGET_SECONDS = 10.0


def main(argv: list[str] | None = None) -> int:
    from gavel_ng.cluster import Cluster
    from gavel_ng.profiles.table_io import resolve_table
    from gavel_ng.simulator import SimConfig, simulate
    from gavel_ng.traces import TraceGenerator, TraceSpec

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--loads", default="3.0,5.6")
    ap.add_argument("--policy", default="las")
    ap.add_argument("--window", default="4000:5000")
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--gavel-compat", action="store_true")
    ap.add_argument("--cold-solves", action="store_true")
    ap.add_argument("--throughputs", default=TABLE, help="gavel-osdi20 (default), a .json or a .csv table")
    args = ap.parse_args(argv)
    table = resolve_table(args.throughputs)
    cluster = Cluster.parse("v100=36,p100=36,k80=36", gpus_per_server=4)
    lo, hi = map(int, args.window.split(":"))
    print(f"{'jobs/h':>7} {'wall s':>8} {'solve s':>8} {'solves':>7} {'rounds':>7} {'avg JCT h':>10}  vs target")
    for load in [float(x) for x in args.loads.split(",")]:
        best = None
        for _ in range(args.repeat):
            gen = TraceGenerator(TraceSpec(jobs_per_hour=load, seed=0), table)
            start = time.perf_counter()
            s = simulate(cluster, table, gen, SimConfig(policy=args.policy, window=(lo, hi),
                                                        gavel_compat=args.gavel_compat,
                                                        warm_start=not args.cold_solves)).summary
            wall = time.perf_counter() - start
            if best is None or wall < best[0]:
                best = (wall, s)
        wall, s = best
        verdict = f"{'OK' if wall < TARGET_SECONDS else 'SLOW'} (< {TARGET_SECONDS:g} s)"
        if load == 3.0:
            verdict += f", {PROTOTYPE_SECONDS / wall:.1f}x the prototype's {PROTOTYPE_SECONDS:g} s"
        print(f"{load:7.1f} {wall:8.2f} {s['solve_seconds']:8.2f} {s['policy_solves']:7d} {s['rounds']:7d} "
              f"{s['avg_jct_hours']:10.2f}  {verdict}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
