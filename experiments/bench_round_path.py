"""The simulator's round path on bench_simulator.py's point: CPU time a round in the mechanism and
the executor, apart from the policy's solves (issue 31).

    python experiments/bench_round_path.py [--loads 3.0,5.6]

Round path: SchedulerLoop.step less PolicyAllocator.allocate (so the mechanism's reset after each
solve counts), with plan, execute, reset and record apart; CPU time (time.process_time), which a
busy machine disturbs less than wall time. The methods are timed by wrapping them on their classes
for the run (a benchmark, not a test: timings are never asserted).
"""

from __future__ import annotations

import argparse
import sys
import time

PARTS = ("plan", "execute", "reset", "record")


def main(argv: list[str] | None = None) -> int:
    from gavel_ng.allocator import PolicyAllocator
    from gavel_ng.cluster import Cluster
    from gavel_ng.mechanism import RoundMechanism, SchedulerLoop
    from gavel_ng.profiles.table_io import resolve_table
    from gavel_ng.simulator import SimConfig, simulate
    from gavel_ng.simulator.executor import SimExecutor
    from gavel_ng.traces import TraceGenerator, TraceSpec

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--loads", default="3.0")
    ap.add_argument("--window", default="4000:5000")
    args = ap.parse_args(argv)
    seconds: dict[str, float] = {}

    def timed(cls, name: str, key: str) -> None:
        inner = getattr(cls, name)
        seconds[key] = 0.0

        def run(*a, **k):
            start = time.process_time()
            try:
                return inner(*a, **k)
            finally:
                seconds[key] += time.process_time() - start

        setattr(cls, name, run)

    timed(SchedulerLoop, "step", "step")
    timed(PolicyAllocator, "allocate", "solve")
    for cls, name in ((RoundMechanism, "plan"), (SimExecutor, "execute"), (RoundMechanism, "reset"),
                      (RoundMechanism, "record")):
        timed(cls, name, name)
    table = resolve_table("gavel-osdi20")
    cluster = Cluster.parse("v100=36,p100=36,k80=36", gpus_per_server=4)
    lo, hi = map(int, args.window.split(":"))
    print(f"{'jobs/h':>7} {'rounds':>7} {'round path us':>14} " + " ".join(f"{p:>8}" for p in PARTS)
          + f" {'rest':>6} {'avg JCT h':>10}")
    for load in [float(x) for x in args.loads.split(",")]:
        for k in seconds:
            seconds[k] = 0.0
        gen = TraceGenerator(TraceSpec(jobs_per_hour=load, seed=0), table)
        s = simulate(cluster, table, gen, SimConfig(policy="las", window=(lo, hi))).summary
        us = {k: 1e6 * v / s["rounds"] for k, v in seconds.items()}
        path = us["step"] - us["solve"]
        print(f"{load:7.1f} {s['rounds']:7d} {path:14.1f} " + " ".join(f"{us[p]:8.1f}" for p in PARTS)
              + f" {path - sum(us[p] for p in PARTS):6.1f} {s['avg_jct_hours']:10.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
