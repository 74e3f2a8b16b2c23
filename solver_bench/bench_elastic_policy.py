"""Decision time of the `goodput` round policies (gavel_ng.policies.builtin.goodput) at cluster scale.

    python -m solver_bench.bench_elastic_policy [--jobs 1000] [--gpus 1000,600,400] [--repeat 3]

Issue 14's target: 2,000 GPUs of three types (t4, v100, a100 by default) and 1,000
adaptive jobs of the Pollux mix at random progress decide in under 1 s. One decision is what
the simulator does every round: the entries (best goodput of every job on every
configuration column: 3 types x the default GPU counts 1..64, by one vectorized search
per (family, type): `RoundContext.speedups`) and the solve (HiGHS): for `goodput` and
`goodput_agnostic` the 0/1 program that gives each job one whole configuration. The
context is the one the simulator's planner builds, on a first round (no job ran before).
Printed: entries, solve and total, best of `--repeat`, beside the 1 s target.
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from gavel_ng.cluster import Cluster
from gavel_ng.columns import Columns
from gavel_ng.elastic import pollux_workload
from gavel_ng.elastic.goodput import best_goodput_many
from gavel_ng.elastic.workload import POLLUX_NETWORK_GBPS
from gavel_ng.policies import get_policy
from gavel_ng.policies.rounds import RoundContext, RoundJobs
from gavel_ng.round_planner import DEFAULT_GPU_COUNTS
from gavel_ng.topology import Topology

TARGET_S = 1.0
TYPES = ("t4", "v100", "a100")
PER_SERVER = (4, 4, 8)


class Progressed:
    """A RoundSource of adaptive jobs at given progress (what the simulator's job arrays give)."""

    def __init__(self, etrace, progress: np.ndarray):
        self.etrace = etrace
        self.progress = progress

    def round_jobs(self, jobs: list[int]) -> RoundJobs:
        n = len(jobs)
        return RoundJobs(np.ones(n, bool), self.etrace.gpus[jobs], np.zeros((n, len(TYPES))), np.zeros(n),
                         np.zeros(n, np.int64))

    def goodput(self, jobs, worker_type, gpus, servers) -> np.ndarray:
        out = np.zeros((len(jobs), len(gpus)))
        by_spec: dict = {}
        for i, m in enumerate(jobs):
            by_spec.setdefault(self.etrace.specs[m], []).append(i)
        for spec, rows in by_spec.items():   # one vectorized search per (spec, type)
            prog = self.progress[np.asarray(jobs)[rows]][:, None]
            g, _, _ = best_goodput_many(spec, worker_type, gpus[None, :], servers[None, :], prog, POLLUX_NETWORK_GBPS)
            out[rows] = g
        return out


def context(etrace, progress: np.ndarray, cluster: Cluster, seed: int) -> RoundContext:
    topo = Topology.from_cluster(cluster)
    M = len(etrace)
    source = Progressed(etrace, progress)
    return RoundContext(0.0, np.arange(M), Columns.configurations(list(TYPES), topo.capacity, DEFAULT_GPU_COUNTS),
                        topo, source.round_jobs(list(range(M))), [()] * M, np.zeros(M), np.zeros(M), np.zeros(M),
                        30.0, np.random.default_rng(seed), source, None)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--jobs", type=int, default=1000)
    ap.add_argument("--gpus", default="1000,600,400", help="GPUs of t4,v100,a100 (default 1000,600,400)")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    counts = [int(x) for x in args.gpus.split(",")]
    cluster = Cluster(dict(zip(TYPES, counts)), dict(zip(TYPES, PER_SERVER)))
    et = pollux_workload(num_jobs=args.jobs, hours=8, seed=args.seed)
    progress = np.random.default_rng(args.seed).random(len(et))
    ctx = context(et, progress, cluster, args.seed)
    print(f"{len(et)} jobs, {sum(counts)} GPUs ({', '.join(f'{t}={c}' for t, c in zip(TYPES, counts))}), "
          f"{ctx.columns.num} allocation columns")
    for name in ("goodput", "goodput_agnostic"):
        decide = get_policy(name).decider()
        best = None
        for _ in range(args.repeat):
            ctx = context(et, progress, cluster, args.seed)   # fresh: the entries are cached per context
            t0 = time.perf_counter()
            S, need = ctx.speedups, ctx.need
            t1 = time.perf_counter()
            choice = np.asarray(decide(ctx))
            t2 = time.perf_counter()
            if best is None or t2 - t0 < best[2]:
                best = (t1 - t0, t2 - t1, t2 - t0, choice, S, need, ctx.columns)
        e, lp, tot, choice, S, need, cols = best
        on = np.flatnonzero(choice >= 0)
        used = [need[on, choice[on]][cols.pool[choice[on]] == t].sum() for t in range(len(TYPES))]
        print(f"{name:17s} entries {e:6.3f} s  solve {lp:6.3f} s  total {tot:6.3f} s  (target {TARGET_S:.0f} s: "
              f"{'ok' if tot < TARGET_S else 'MISSED'})  sum of speedups {float(S[on, choice[on]].sum()):.1f}  "
              f"GPUs used {', '.join(f'{u:.0f}' for u in used)}")


if __name__ == "__main__":
    main()
