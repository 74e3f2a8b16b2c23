"""Issue 14, item 7: Pollux's baselines and the goodput policy on the pollux workload.

(a) homogeneous, 64 T4 (16 servers x 4): pollux vs tiresias vs fixed-batch las, beside
    Pollux's Table 2 (Pollux p = -1 vs Tiresias+TunedJobs: 37 % lower average JCT,
    27 % lower p99, 33 % lower makespan);
(b) heterogeneous, 64 GPUs of three types (t4=32, v100=16, a100=16): goodput vs pollux
    vs las on average and p99 JCT, makespan and GPU hours (goal: goodput >= 30 % below
    the better baseline on average JCT, Sia's low end);
(c) the share of fast GPUs: 64 GPUs of t4 and a100, a100 share 0, 25, 50, 75 %;
(d) busier traces on the (b) cluster: the same 160 jobs arriving in 8 h (Pollux's rate, 20
    jobs/h), 4, 2 and 1 h (arrival times scaled, jobs unchanged), goodput vs pollux vs las,
    with the contention-free bound (the same at every load: it has no queueing). (d) runs
    through `gavel-ng sweep` (workload points, `load_sweep.csv` in the results directory,
    resumable); the same points from the command line:
    gavel-ng sweep --results R.csv --workload pollux --hours 8,4,2,1 --policy goodput,pollux,las
        --cluster t4=32,v100=16,a100=16 --preemption-overhead 30 --seed 0

    python experiments/elastic_baselines.py [--config reduced|full] [--part a,b,c,d] [--workers N]

Each policy runs at its own scheduling interval: the round policies (pollux,
tiresias, goodput) every 60 s (Pollux's and Sia's setting), the allocation policy
(las) in Gavel's rounds of 360 s, because a 60 s round would make Gavel's
mechanism time-slice jobs between configurations and pay the 30 s re-allocation delay
every minute. (b) also gives the contention-free bound: the average JCT were every job
alone on the cluster (best type and GPU count at each progress, one type at a time) plus
60 s (the 30 s start delay and half a 60 s interval of waiting for a decision).
Every restart costs 30 s: adaptive jobs pay
it at each change of GPU count or type, fixed jobs at each launch that is not a lease
renewal. The workload is Pollux's: 160 jobs in 8 hours (seed 0; full: seeds 0, 1, 2),
tuned GPU counts capped at the largest worker type. Results go to
experiments/results/elastic_baselines[-full]/ (results.csv, claims.csv).
"""

from __future__ import annotations

import argparse
import csv
import logging
import sys
import time
from pathlib import Path

import common as c
import numpy as np
import pandas as pd

NAME = "elastic_baselines"
HOMOGENEOUS = "t4=64"
HETEROGENEOUS = "t4=32,v100=16,a100=16"
FAST_SHARES = (0.0, 0.25, 0.5, 0.75)
LOAD_HOURS = (8.0, 4.0, 2.0, 1.0)     # (d): the arrival window of the 160 jobs
LOAD_POLICIES = ("goodput", "pollux", "las")
DELAY = 30.0
TABLE2 = {"avg_jct_hours": (0.76, 1.2), "p99_jct_hours": (11.0, 15.0), "makespan_hours": (16.0, 24.0)}
# results.csv's columns of a run (after part, cluster, seed, round_seconds): the simulator's summary keys it keeps
RESULT_KEYS = ("policy", "avg_jct_hours", "p99_jct_hours", "makespan_hours", "gpu_hours", "utilization",
               "jobs_measured", "reallocations", "policy_solves", "unstable", "wall_seconds")

log = logging.getLogger("experiments")


def share_cluster(share: float) -> str:
    fast = int(round(64 * share))
    return ",".join(f"{t}={n}" for t, n in (("t4", 64 - fast), ("a100", fast)) if n)


def points(parts: list[str]) -> list[tuple[str, str, str]]:
    out = []
    if "a" in parts:
        out += [("a", HOMOGENEOUS, p) for p in ("pollux", "tiresias", "las", "goodput")]
    if "b" in parts:
        out += [("b", HETEROGENEOUS, p) for p in ("goodput", "goodput_agnostic", "pollux", "las", "tiresias")]
    if "c" in parts:
        out += [("c", share_cluster(s), p) for s in FAST_SHARES for p in ("goodput", "pollux", "las")]
    return out


def run_point(part: str, cluster_spec: str, policy: str, seed: int) -> dict:
    from gavel_ng.cluster import Cluster
    from gavel_ng.elastic.workload import load_workload
    from gavel_ng.policies import get_policy
    from gavel_ng.simulator import SimConfig, simulate

    cluster = Cluster.parse(cluster_spec, gpus_per_server=4)
    etrace = load_workload(cluster, seed=seed)   # Pollux's 160 jobs in 8 h, tuned GPU counts capped to the cluster
    config = SimConfig(policy=policy, realloc_delay=DELAY, preemption_overhead_s=DELAY, seed=seed)
    start = time.perf_counter()
    summary = simulate(cluster, None, etrace, config).summary   # at the policy's own interval
    row = {k: summary[k] for k in RESULT_KEYS}
    if part == "b" and policy == "goodput":
        row["bound_jct_hours"] = bound_hours(etrace, cluster)
    log.info("%s %s %s seed %d: avg JCT %.3f h (%.0f s)", part, cluster_spec, policy, seed, row["avg_jct_hours"],
             time.perf_counter() - start)
    rounds = get_policy(policy).round_seconds
    return {"part": part, "cluster": cluster_spec, "seed": seed, "round_seconds": rounds} | row


def bound_hours(etrace, cluster) -> float:
    """The contention-free average JCT (hours): each job alone, + 60 s (module docstring)."""
    from gavel_ng.elastic import contention_free_jct

    return round(float(contention_free_jct(etrace, cluster, 2 * DELAY).mean()) / 3600, 4)


def load_points(seeds) -> list:
    """(d)'s sweep points: each policy at its own interval (round_seconds left at None), as in (a)-(c)."""
    from gavel_ng.sweep import expand

    return expand({"hours": list(LOAD_HOURS), "policy": list(LOAD_POLICIES), "seed": list(seeds)},
                  {"workload": "pollux", "cluster": HETEROGENEOUS, "realloc_delay": DELAY,
                   "preemption_overhead": DELAY})


def run_load(seeds, out: Path, workers: int | None, keep_stale: bool = False) -> list[dict]:
    """Part (d) through the sweep runner; rows as run_point's, plus `hours` and the bound."""
    from gavel_ng.cluster import Cluster
    from gavel_ng.elastic.workload import load_workload
    from gavel_ng.policies import get_policy
    from gavel_ng.sweep import ResultsStore, run_sweep

    pts = load_points(seeds)
    store = ResultsStore(out / "load_sweep.csv")

    def progress(res, done, total):
        log.info("d [%d/%d] %s hours=%s seed %s: avg JCT %s h (%.0f s)%s", done, total, res.row["policy"],
                 res.row["hours"], res.row["seed"], res.row.get("avg_jct_hours"), res.row.get("wall_seconds") or 0,
                 "" if res.ok else f" FAILED {res.row['error']}")

    run_sweep(pts, store, workers=workers, on_result=progress, keep_stale=keep_stale)
    df = store.load().set_index("point_id")
    cluster = Cluster.parse(HETEROGENEOUS, gpus_per_server=4)
    bounds = {s: bound_hours(load_workload(cluster, seed=s), cluster) for s in seeds}   # arrivals do not matter
    rows = []
    for p in pts:
        if p.point_id not in df.index or df.loc[p.point_id, "status"] != "ok":
            log.warning("d: %s did not finish", p.describe())
            continue
        r = df.loc[p.point_id]
        row = {"part": "d", "cluster": HETEROGENEOUS, "seed": p.seed,
               "round_seconds": get_policy(p.policy).round_seconds,
               "hours": p.hours} | {k: (None if r[k] != r[k] else r[k]) for k in RESULT_KEYS if k != "policy"}
        rows.append(row | {"policy": p.policy, "bound_jct_hours": bounds[p.seed]})
    return rows


def kept_rows(path: Path, parts: list[str]) -> list[dict]:
    """The rows of other parts already in results.csv: `--part d` adds to (a)-(c), not replaces them."""
    if not path.exists():
        return []
    df = pd.read_csv(path)
    return [{k: v for k, v in r.items() if v == v} for r in df[~df["part"].isin(parts)].to_dict("records")]


def mean(rows: list[dict], metric: str, **where) -> float:
    vals = [r[metric] for r in rows if all(r.get(k) == v for k, v in where.items())]
    return float(np.mean(vals)) if vals else float("nan")


def claims(rows: list[dict]) -> list:
    out = []
    if any(r["part"] == "a" for r in rows):
        for metric, (paper_pollux, paper_tiresias) in TABLE2.items():
            ours_p = mean(rows, metric, part="a", policy="pollux")
            ours_t = mean(rows, metric, part="a", policy="tiresias")
            paper_cut, ours_cut = 1 - paper_pollux / paper_tiresias, 1 - ours_p / ours_t
            ok = abs(ours_cut - paper_cut) <= 0.25 * paper_cut
            out.append(c.Claim(f"(a) 64 T4: pollux vs tiresias, {metric}",
                               f"{paper_pollux:g} vs {paper_tiresias:g} h ({paper_cut:.0%} lower)",
                               f"{ours_p:.2f} vs {ours_t:.2f} h ({ours_cut:.0%} lower)",
                               "reproduced" if ok else ("partly" if ours_cut > 0 else "not reproduced")))
        ours_l = mean(rows, "avg_jct_hours", part="a", policy="las")
        ours_p = mean(rows, "avg_jct_hours", part="a", policy="pollux")
        out.append(c.Claim("(a) 64 T4: pollux vs fixed-batch las, avg JCT", "-",
                           f"{ours_p:.2f} vs {ours_l:.2f} h ({1 - ours_p / ours_l:.0%} lower)", "ours only"))
    if any(r["part"] == "b" for r in rows):
        g = mean(rows, "avg_jct_hours", part="b", policy="goodput")
        best = min((mean(rows, "avg_jct_hours", part="b", policy=p), p) for p in ("pollux", "las"))
        cut = 1 - g / best[0]
        out.append(c.Claim(f"(b) {HETEROGENEOUS}: goodput vs better baseline ({best[1]}), avg JCT",
                           ">= 30 % lower (Sia: 30-93 % vs Pollux, Gavel)", f"{g:.2f} vs {best[0]:.2f} h "
                           f"({cut:.0%} lower)", "reproduced" if cut >= 0.30 else ("partly" if cut > 0 else
                                                                                    "not reproduced")))
        bound = mean(rows, "bound_jct_hours", part="b", policy="goodput")
        out.append(c.Claim(f"(b) {HETEROGENEOUS}: contention-free bound on avg JCT (one type per job, +60 s)",
                           "-", f"{bound:.3f} h = {1 - bound / best[0]:.0%} below {best[1]}; goodput "
                           f"{g / bound - 1:.0%} above it", "ours only"))
    for share in FAST_SHARES if any(r["part"] == "c" for r in rows) else ():
        cl = share_cluster(share)
        vals = {p: mean(rows, "avg_jct_hours", part="c", cluster=cl, policy=p) for p in ("goodput", "pollux", "las")}
        out.append(c.Claim(f"(c) {cl}: avg JCT goodput / pollux / las", "-",
                           " / ".join(f"{v:.2f}" for v in vals.values()) + " h", "ours only"))
    for hours in LOAD_HOURS if any(r["part"] == "d" for r in rows) else ():
        g, pol, las = (mean(rows, "avg_jct_hours", part="d", hours=hours, policy=p) for p in LOAD_POLICIES)
        bound = mean(rows, "bound_jct_hours", part="d", hours=hours, policy="goodput")
        out.append(c.Claim(f"(d) {HETEROGENEOUS}, 160 jobs in {hours:g} h: avg JCT goodput / pollux / las "
                           "(contention-free bound)", "-", f"{g:.3f} / {pol:.3f} / {las:.3f} h ({bound:.3f} h); "
                           f"goodput {1 - g / pol:.0%} below pollux", "ours only"))
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--config", choices=("reduced", "full"), default="reduced")
    ap.add_argument("--part", default="a,b,c,d", help="comma-separated parts to run (a, b, c, d)")
    ap.add_argument("--out", help="results directory (default RESULTS_ROOT/elastic_baselines[-full])")
    c.results_root_option(ap)
    ap.add_argument("--workers", type=int, help="(d): parallel processes (default: all cores)")
    ap.add_argument("--keep-stale", action="store_true", help="(d): reuse rows computed by other code or inputs")
    args = ap.parse_args(argv)
    args.table = "builtin"   # elastic jobs always run on the built-in profiles
    logging.basicConfig(level=logging.INFO, format="%(message)s", stream=sys.stderr)
    seeds = (0, 1, 2) if args.config == "full" else (0,)
    parts = [p.strip() for p in args.part.split(",") if p.strip()]
    out = Path(args.out) if args.out else c.root(args) / (NAME + ("-full" if args.config == "full" else ""))
    out.mkdir(parents=True, exist_ok=True)
    rows = [run_point(part, cl, pol, seed) for part, cl, pol in points(parts) for seed in seeds]
    if "d" in parts:
        rows += run_load(seeds, out, args.workers, args.keep_stale)
    rows = kept_rows(out / "results.csv", parts) + rows
    with (out / "results.csv").open("w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(dict.fromkeys(k for r in rows for k in r)))
        w.writeheader()
        w.writerows(rows)
    args.out = str(out)
    c.report(NAME, claims(rows), args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
