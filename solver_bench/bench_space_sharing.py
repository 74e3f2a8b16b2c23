"""Space-sharing policies at 128-2048 jobs, plain LAS at 10,000, and partitioned (POP) solves.

    python -m solver_bench.bench_space_sharing [--sizes 128,256,512,1024,2048] [--seeds 3]
        [--partitions 4] [--out solver_bench/results]

Every solve runs in its own subprocess, which reports the solve's wall time (problem
build included) and its peak RSS (resource.getrusage: the interpreter and imports
included, about 100 MB). Instances are solver_bench.instances.random_problem with the
table's pair throughputs; `hierarchical` gets 5 entities. Prints medians over seeds
with the issue's targets beside them and writes space_sharing.csv and space_sharing.png.

`hierarchical` at 2,048 jobs (issue 17: at most 5 s), measured on this 2-core machine while
other work shared it (load 3), `python -m solver_bench.bench_space_sharing --sizes 512,2048
--seeds 1`: 170 s at first (a cold dual simplex of 31k+ iterations), then 3.1-3.9 s, but with
FIFO entities taking all spare capacity (entity shares 9.2, 214, 28, 203, 46 at 512 jobs).
Since FIFO entities keep to their weight (shares 31.2, 62.4, 93.6, 124.9, 156.1: proportional
to the weights 1-5) the water filling takes ~60 true rounds at 2,048 jobs (24 at 512): 2.2 s at
512 and 13.4 s at 2,048 (9-11 s in separate runs of seeds 0 and 1): MISSED the 5 s target.
Then, with the rounds that end with a unit at its cap settled by the priority LP alone (61 of
62 at 2,048 jobs, seed 0) and both LPs unscaled: 0.7-0.8 s at 512 and 3.5-3.7 s at 2,048
(seed 1: 1.2 s and 2.9-3.2 s) against 1.3-1.4 s and 10.1-10.4 s (1.9 s and 8.7 s) for the
code before, run back to back (load 1): meets the target. Entity shares are as before within
4e-8 relative, units' levels after each round within 1e-6; jobs' allocations may differ where
the optimum is not unique.
How: gavel_ng/policies/builtin/hierarchical.py's docstring.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

import pandas as pd

CHILD = r"""
import json, resource, sys, time
from gavel_ng.policies import solve
from gavel_ng.policies.lp.pipeline import solve_partitioned
from gavel_ng.profiles.table_io import resolve_table
from solver_bench.instances import random_problem
ref, policy, n, seed = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
ss, k = sys.argv[5] == "1", int(sys.argv[6])
table = resolve_table(ref)
solve(random_problem(table, 8, 0, space_sharing=ss), "las")  # warm imports
inp = random_problem(table, n, seed, entities=5 if policy == "hierarchical" else 0, space_sharing=ss)
start = time.perf_counter()
sol = solve_partitioned(inp, policy, k) if k > 1 else solve(inp, policy)
seconds = time.perf_counter() - start
sol.allocation.check()
pairs = sum(len(r) == 2 for r in sol.allocation.rows)
print(json.dumps({"seconds": seconds, "rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
                  "objective": sol.objective, "ok": bool(sol.ok), "pair_rows": pairs}))
"""
REFERENCE = "gavel-osdi20"   # Gavel's measured table, shipped with gavel_ng
# (policy, space sharing, partitions): label
SERIES = {("las", True, 1): "las (space sharing)", ("hierarchical", True, 1): "hierarchical (space sharing)",
          ("makespan", True, 1): "makespan (space sharing)"}
# Gavel prototype's space-sharing max-min fairness on this machine (issue 5)
PROTOTYPE = {256: 6.0, 512: 87.0, 1024: 300.0}
MINIMIZED = {"makespan", "ftf"}  # reported objectives where smaller is better


def run_one(policy: str, n: int, seed: int, ss: bool, k: int, timeout: float) -> dict:
    root = Path(__file__).resolve().parents[1]
    try:
        out = subprocess.run([sys.executable, "-c", CHILD, REFERENCE, policy, str(n), str(seed),
                              "1" if ss else "0", str(k)], capture_output=True, text=True, timeout=timeout,
                             cwd=root, env={"PYTHONPATH": str(root), "PATH": "/usr/bin:/bin"})
        res = json.loads(out.stdout.strip().splitlines()[-1])
    except subprocess.TimeoutExpired:
        res = {"seconds": float("inf"), "rss_mb": float("nan"), "objective": float("nan"), "ok": False,
               "pair_rows": 0}
    except (json.JSONDecodeError, IndexError):
        raise RuntimeError(f"{policy} {n} {seed}: {out.stderr[-2000:]}") from None
    return {"policy": policy, "space_sharing": ss, "partitions": k, "jobs": n, "seed": seed, **res}


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="128,256,512,1024,2048")
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--policies", default="las,makespan,hierarchical")
    ap.add_argument("--partitions", type=int, default=4, help="k for the POP rows (at the largest size)")
    ap.add_argument("--plain-las-jobs", type=int, default=10_000)
    ap.add_argument("--timeout", type=float, default=600)
    ap.add_argument("--out", default=str(Path(__file__).parent / "results"))
    args = ap.parse_args(argv)
    sizes = [int(s) for s in args.sizes.split(",")]
    policies = args.policies.split(",")
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    rows = []
    for seed in range(args.seeds):
        for policy in policies:
            for n in sizes:
                rows.append(run_one(policy, n, seed, True, 1, args.timeout))
                print(f"  {policy:<13} ss {n:>5} seed {seed}: {rows[-1]['seconds']:.3f} s", file=sys.stderr)
            if args.partitions > 1:
                rows.append(run_one(policy, max(sizes), seed, True, args.partitions, args.timeout))
        rows.append(run_one("las", args.plain_las_jobs, seed, False, 1, args.timeout))
    df = pd.DataFrame(rows)
    df.to_csv(out / "space_sharing.csv", index=False)
    med = df.groupby(["policy", "space_sharing", "partitions", "jobs"])[["seconds", "rss_mb", "pair_rows"]].median()
    print("median over seeds: solve seconds, peak RSS (MB), concrete pair rows\n" + med.to_string(
        float_format=lambda v: f"{v:.3f}"))

    def median(policy, n, ss=True, k=1, col="seconds"):
        sel = df[(df.policy == policy) & (df.jobs == n) & (df.space_sharing == ss) & (df.partitions == k)]
        return float(sel[col].median()) if len(sel) else float("nan")

    def verdict(ok):
        return "meets" if ok else "MISSES"

    print("\ntargets (medians over seeds):")
    checks = [("las", 1024, True, 5.0), ("las", 2048, True, 20.0), ("hierarchical", 2048, True, 5.0),
              ("las", args.plain_las_jobs, False, 1.0)]
    for policy, n, ss, target in checks:
        s = median(policy, n, ss)
        proto = f"   Gavel prototype {PROTOTYPE[n]:g} s{'+' if n == 1024 else ''}" if ss and policy == "las" and \
            n in PROTOTYPE else ""
        print(f"  {policy:<13} {'space sharing' if ss else 'plain':<13} {n:>6} jobs: {s:8.3f} s "
              f"(target < {target:g} s: {verdict(s < target)}){proto}")
    rss = df[df.space_sharing & (df.policy == "las")].rss_mb.max()
    print(f"  peak RSS of any space-sharing las solve: {rss:.0f} MB (target < 2048 MB: {verdict(rss < 2048)})")
    if args.partitions > 1:
        big = max(sizes)
        for policy in policies:
            full = df[(df.policy == policy) & (df.jobs == big) & (df.partitions == 1)].set_index("seed")
            part = df[(df.policy == policy) & (df.jobs == big) & (df.partitions == args.partitions)].set_index("seed")
            sign = -1.0 if policy in MINIMIZED else 1.0   # > 0: the partitioned objective is worse
            gap = (sign * (full.objective - part.objective) / full.objective.abs()).max()
            t_pop = median(policy, big, k=args.partitions)
            print(f"  {policy:<13} POP k={args.partitions} at {big} jobs: {t_pop:.3f} s "
                  f"vs {median(policy, big):.3f} s full; worst objective shortfall {gap:+.2%} "
                  f"(target < 2 %: {verdict(gap < 0.02)})")
    plot(df, out / "space_sharing.png", args.partitions)
    print(f"\nwrote {out / 'space_sharing.csv'} and {out / 'space_sharing.png'}")


def plot(df: pd.DataFrame, path: Path, k: int) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6.4, 4.2))
    for (policy, ss, parts), label in SERIES.items():
        sel = df[(df.policy == policy) & (df.space_sharing == ss) & (df.partitions == parts)]
        m = sel.groupby("jobs").seconds.median()
        ax.plot(m.index, m.values, marker="o", label=label)
    pop = df[df.partitions > 1].groupby(["policy", "jobs"]).seconds.median()
    for (policy, n), s in pop.items():
        ax.scatter([n], [s], marker="x", color="k")
        ax.annotate(f"{policy} POP k={k}", (n, s), fontsize=7, xytext=(-60, -12), textcoords="offset points")
    plain = df[~df.space_sharing].groupby("jobs").seconds.median()
    ax.plot(plain.index, plain.values, marker="s", linestyle="none", label="las (plain)")
    ax.plot(list(PROTOTYPE), list(PROTOTYPE.values()), marker="^", linestyle="--", color="grey",
            label="Gavel prototype, las space sharing (1024: > 300 s)")
    ax.set(xscale="log", yscale="log", xlabel="jobs", ylabel="solve seconds (median)",
           title="Space-sharing policies: solve time vs jobs")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


if __name__ == "__main__":
    main()
