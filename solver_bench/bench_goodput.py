"""Time of the best-batch search (Pollux Eq. 13) per configuration, scalar and vectorized.

    python -m solver_bench.bench_goodput [--jobs 1000] [--max-gpus 64] [--repeat 5]

Pollux reports 0.4 ms for one search (its ``optimize``: 50 sampled total batch sizes per
configuration). Ours is exact (every integer per-GPU batch and accumulation count is
covered, see gavel_ng/elastic/goodput.py). Three figures:

* one configuration per call (``best_goodput``), per family, on a T4 spanning 2 servers,
  at gamma = 1 (closed form) and gamma = 3 (bisection);
* one job's configuration table (``configuration_table``): every GPU count 1..max-gpus
  on each of 3 GPU types, time per configuration;
* a cluster's worth: ``--jobs`` jobs of the Pollux mix at random progress, every GPU
  count on 3 types, one ``best_goodput_many`` call per (family, type): total and per
  configuration.
"""

from __future__ import annotations

import argparse
import timeit

import numpy as np

from gavel_ng.elastic import FAMILIES, POLLUX_APPLICATIONS, best_goodput, best_goodput_many, configuration_table

POLLUX_MS = 0.4
TYPES = ("t4", "v100", "a100")


def _best_of(fn, repeat: int) -> float:
    """Seconds of the fastest of `repeat` calls."""
    return min(timeit.repeat(fn, number=1, repeat=repeat))


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--jobs", type=int, default=1000)
    ap.add_argument("--max-gpus", type=int, default=64)
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args(argv)
    for fam in FAMILIES:  # warm the per-(family, type) parameter cache: not part of a search
        for w in TYPES:
            best_goodput(fam, w, 1)

    print(f"one configuration per call (8 T4 GPUs on 2 servers); Pollux: {POLLUX_MS} ms")
    print(f"{'family':<12} {'gamma=1 (ms)':>13} {'gamma=3 (ms)':>13}")
    calls = 200
    for fam in POLLUX_APPLICATIONS:
        row = []
        for gamma in (1.0, 3.0):
            t = _best_of(lambda fam=fam, gamma=gamma: [best_goodput(fam, "t4", 8, 2, 0.3, gamma=gamma)
                                                       for _ in range(calls)], args.repeat)
            row.append(t / calls * 1e3)
        print(f"{fam:<12} {row[0]:>13.3f} {row[1]:>13.3f}")

    print(f"\none job's table: GPU counts 1..{args.max_gpus} on {len(TYPES)} types "
          f"({args.max_gpus * len(TYPES)} configurations)")
    print(f"{'family':<12} {'table (ms)':>11} {'per config (us)':>16}")
    for fam in POLLUX_APPLICATIONS:
        t = _best_of(lambda fam=fam: configuration_table(fam, TYPES, args.max_gpus, 4, 0.3), args.repeat)
        print(f"{fam:<12} {t * 1e3:>11.3f} {t / (args.max_gpus * len(TYPES)) * 1e6:>16.2f}")

    rng = np.random.default_rng(0)
    shares = np.array([FAMILIES[a].fraction for a in POLLUX_APPLICATIONS])
    apps = rng.choice(len(POLLUX_APPLICATIONS), size=args.jobs, p=shares / shares.sum())
    progress = rng.random(args.jobs)
    k = np.arange(1, args.max_gpus + 1)
    n = -(-k // 4)

    def cluster() -> None:
        for i, fam in enumerate(POLLUX_APPLICATIONS):
            p = progress[apps == i][:, None]
            if p.size:
                for w in TYPES:
                    best_goodput_many(fam, w, k[None, :], n[None, :], p)

    t = _best_of(cluster, args.repeat)
    configs = args.jobs * args.max_gpus * len(TYPES)
    print(f"\n{args.jobs} jobs x {args.max_gpus} GPU counts x {len(TYPES)} types = {configs} configurations: "
          f"{t * 1e3:.1f} ms, {t / configs * 1e6:.2f} us per configuration "
          f"({POLLUX_MS * 1e3 / (t / configs * 1e6):.0f}x under Pollux's {POLLUX_MS} ms)")


if __name__ == "__main__":
    main()
