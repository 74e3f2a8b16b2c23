"""Simulator speed: one continuous-single point (36/36/36, reference table, jobs 4000-5000).

    python experiments/bench_simulator.py [--loads 3.0,5.6] [--policy las] [--repeat 1] [--profile]

Prints wall time per point against the targets (issue 17: at most 3 s for the 3 jobs/h point;
earlier < 10 s) and the Gavel prototype's 97 s measured on the 2-core dev machine.
`--profile` runs each point under cProfile and prints where the time goes: the share in
HiGHS itself and the functions with the most time of their own. Not a test: timings are
never asserted.
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import sys
import time
from functools import partial
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
TABLE = "gavel-osdi20"   # Gavel's measured table, shipped with gavel_ng
PROTOTYPE_SECONDS = 97.0
TARGET_SECONDS = 3.0     # issue 17, for the 3 jobs/h point


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
    ap.add_argument("--profile", action="store_true", help="also print where the time goes (cProfile)")
    args = ap.parse_args(argv)
    table = resolve_table(args.throughputs)
    cluster = Cluster.parse("v100=36,p100=36,k80=36", gpus_per_server=4)
    lo, hi = map(int, args.window.split(":"))
    print(f"{'jobs/h':>7} {'wall s':>8} {'solve s':>8} {'solves':>7} {'rounds':>7} {'avg JCT h':>10}")
    for load in [float(x) for x in args.loads.split(",")]:
        best = None
        for _ in range(args.repeat):
            gen = TraceGenerator(TraceSpec(jobs_per_hour=load, seed=0), table)
            config = SimConfig(policy=args.policy, window=(lo, hi), gavel_compat=args.gavel_compat,
                               warm_start=not args.cold_solves)
            start = time.perf_counter()
            s = simulate(cluster, table, gen, config).summary
            wall = time.perf_counter() - start
            if best is None or wall < best[0]:
                best = (wall, s)
        wall, s = best
        verdict = ""   # the targets are for the 3 jobs/h point
        if load == 3.0:
            verdict = (f"{'OK' if wall <= TARGET_SECONDS else 'SLOW'} (target {TARGET_SECONDS:g} s), "
                       f"{PROTOTYPE_SECONDS / wall:.1f}x faster than the prototype's {PROTOTYPE_SECONDS:g} s")
        print(f"{load:7.1f} {wall:8.2f} {s['solve_seconds']:8.2f} {s['policy_solves']:7d} {s['rounds']:7d} "
              f"{s['avg_jct_hours']:10.2f}  {verdict}")
        if args.profile:
            gen = TraceGenerator(TraceSpec(jobs_per_hour=load, seed=0), table)
            profile(partial(simulate, cluster, table, gen, config), s["rounds"])
    return 0


def profile(run, rounds: int, top: int = 12) -> None:
    """Where one run's time goes, by the functions' own time. cProfile slows Python calls, not the
    one C call into HiGHS, so the HiGHS share printed is a lower bound of its share unprofiled."""
    prof = cProfile.Profile()
    prof.runcall(run)
    st = pstats.Stats(prof)
    total = sum(v[2] for v in st.stats.values())
    highs = sum(v[2] for k, v in st.stats.items() if k[2] == "<built-in method highspy._core.run>")
    calls = sum(v[1] for k, v in st.stats.items() if k[2] == "<built-in method highspy._core.run>")
    print(f"    profiled: {total:.2f} s; HiGHS run() {highs:.2f} s in {calls} calls "
          f"({1e3 * highs / max(calls, 1):.3f} ms each); {1e3 * (total - highs) / max(rounds, 1):.3f} ms of "
          f"Python per round over {rounds} rounds")
    for (path, line, name), v in sorted(st.stats.items(), key=lambda kv: -kv[1][2])[:top]:
        print(f"    {v[2]:7.2f} s  {v[1]:8d}  {Path(path).name}:{line} {name}")


if __name__ == "__main__":
    sys.exit(main())
