"""Issues 29 and 40: goodput, sia, pollux, las, tiresias and Gavel+TunedJobs on Sia's cluster, beside Sia's Table 3.

Sia (SOSP'23) Table 3 compares Sia, Pollux and Gavel+TunedJobs on 64 GPUs of three types
(6 servers of 4 T4, 3 of 8 RTX 2080 Ti, 2 of 8 A100: `--cluster sia`) on three job mixes
(Philly- and Helios-like: 160 jobs in 8 h; newTrace-like: 960 jobs in 48 h). Here every job
runs on the profiles measured by Sia's artifact (`--elastic-profiles sia`: Pollux's throughput
model fitted per application and GPU type, measured gradient noise), and the mixes come from
our generators of Sia's description (`--workload sia-philly|sia-helios|sia-newtrace`):

* goodput: ours, one whole (type, GPU count) per job per 60 s round (gavel_ng.policies.builtin.goodput);
* sia: Sia's ILP (p = -0.5, lambda = 1.1, restart factor, power-of-two / whole-server
  configurations, 2x scale-up per round) (gavel_ng.policies.builtin.sia);
* pollux_sia: PolluxSched as Sia ran it on a mixed cluster (type-blind, 4-GPU virtual nodes, at most
  16 GPUs per job, a placement over several types keeps its majority type and idles the rest, a 30 s
  restart assumed for every job); pollux: ours (one type per job inside its search);
* las, tiresias: fixed jobs at their tuned GPU count and batch (TunedJobs);
* gavel_sia: Gavel's max-sum-throughput over raw steps/s on TunedJobs, 360 s rounds, under the round
  mechanism of Sia's artifact's Gavel (MechanismConfig.PRESETS["sia_gavel"]; Sia's Gavel+TJ);
  max_throughput: ours (throughput normalized per job).

A policy written ``NAME@learned`` runs with ``SimConfig.policy_model = "learned"``: it sees each adaptive
job's goodput as learned from the job's own runs (gavel_ng.simulator.learned) instead of the exact model.

Every job pays its application's measured restart delay (the `sia` profile set: 25-250 s) on every
start and change of placement, fixed jobs included; `DELAY` is the flat delay of the runs' settings,
which the set's figures replace. Seeds 0.. (`--seeds`, default 3), or every workload CSV of a directory
(`--trace-dir`: the artifact's format, e.g. Sia's own workload files; each file stands for a seed).
Results: experiments/results/sia_comparison/ (results.csv, table.md, claims).

    python experiments/sia_comparison.py [--seeds 3] [--mix sia-philly,...] [--policy goodput,sia@learned,...]
        [--workers 2] [--policy-option [POLICY.]KEY=VALUE ...] [--trace-dir DIR --mix NAME] [--out DIR]

`--policy-option` is `gavel-ng simulate`'s: it replaces the policy's defaults (a plain KEY goes to
every listed policy that declares it); use `--out` to keep such a variant's results apart.
"""

from __future__ import annotations

import argparse
import csv
import json
import logging
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import common as c
import numpy as np

from gavel_ng.cli.simulate_cmd import parse_policy_options
from gavel_ng.policies.registry import options_per_policy

NAME = "sia_comparison"
CLUSTER = "sia"
MIXES = ("sia-philly", "sia-helios", "sia-newtrace")
POLICIES = ("goodput", "sia", "goodput@learned", "sia@learned", "pollux_sia", "pollux", "las", "tiresias",
            "gavel_sia", "max_throughput")
OPTIONS: dict[str, dict] = {}   # each policy at its defaults (pollux_sia: Pollux as Sia ran it on a mixed cluster)
SETTINGS = {"gavel_sia": {"backfill": False}}   # Sia's Gavel has no mid-round backfill
DELAY = 30.0
METRICS = ("avg_jct_hours", "p99_jct_hours", "makespan_hours", "gpu_hours_per_job")
# Sia's Table 3 (64 GPUs, heterogeneous): avg JCT, p99 JCT, makespan (h), GPU hours per job
TABLE3 = {
    "sia-philly": {"sia": (0.6, 9.5, 14.2, 4.0), "pollux_sia": (1.0, 14.9, 24.5, 5.6),
                   "gavel_sia": (1.9, 30.0, 33.8, 9.0)},
    "sia-helios": {"sia": (0.7, 10.9, 14.9, 4.8), "pollux_sia": (1.0, 15.0, 25.5, 5.9),
                   "gavel_sia": (2.5, 38.7, 43.0, 12.1)},
    "sia-newtrace": {"sia": (0.7, 4.6, 52.2, 3.0), "pollux_sia": (1.5, 10.3, 62.3, 3.4),
                     "gavel_sia": (11.3, 98.1, 110.0, 6.4)},
}
TABLE3["philly"], TABLE3["helios"], TABLE3["newtrace"] = (TABLE3[f"sia-{m}"] for m in ("philly", "helios", "newtrace"))
PAPER_NAME = {"sia": "Sia", "pollux_sia": "Pollux", "gavel_sia": "Gavel+TJ"}
LEARNED = "@learned"

log = logging.getLogger("experiments")


def run_point(mix: str, policy: str, seed: int, options: dict | None = None, trace: str | None = None) -> dict:
    """One simulation: the mix at `seed` (or the workload CSV `trace`) on Sia's cluster under the measured
    profiles (`options`: the policy's, else `OPTIONS`'s; ``NAME@learned``: the learned-model option)."""
    from gavel_ng.cluster import Cluster
    from gavel_ng.elastic.workload import load_workload
    from gavel_ng.policies import get_policy
    from gavel_ng.simulator import SimConfig, simulate

    name = policy.removesuffix(LEARNED)
    cluster = Cluster.parse(CLUSTER)
    etrace = load_workload(cluster, trace=trace, workload=mix if trace is None else "pollux", seed=seed,
                           profiles="sia")
    options = OPTIONS.get(name, {}) if options is None else options
    config = SimConfig(policy=name, options=options, realloc_delay=DELAY, preemption_overhead_s=DELAY, seed=seed,
                       policy_model="learned" if policy.endswith(LEARNED) else "exact", **SETTINGS.get(name, {}))
    start = time.perf_counter()
    s = simulate(cluster, None, etrace, config).summary
    wall = time.perf_counter() - start
    # the file by its folder and name only: committed results name no machine's paths
    shown = f"{Path(trace).parent.name}/{Path(trace).name}" if trace else ""
    row = {"mix": mix, "policy": policy, "seed": seed, "trace": shown,
           "round_seconds": get_policy(name).round_seconds or 360.0,
           "jobs": len(etrace), "avg_jct_hours": s["avg_jct_hours"], "p99_jct_hours": s["p99_jct_hours"],
           "makespan_hours": s["makespan_hours"], "gpu_hours_per_job": s["gpu_hours"] / max(1, s["jobs_measured"]),
           "reallocations": s["reallocations"], "jobs_measured": s["jobs_measured"], "unstable": s["unstable"],
           "wall_seconds": round(wall, 2), "options": json.dumps(options, sort_keys=True)}
    log.info("%s %s seed %d: avg JCT %.3f h, p99 %.2f h, %.1f GPU h/job (%.1f s)", mix, policy, seed,
             row["avg_jct_hours"], row["p99_jct_hours"], row["gpu_hours_per_job"], wall)
    return row


def _run(args: tuple) -> dict:
    logging.basicConfig(level=logging.INFO, format="%(message)s", stream=sys.stderr)
    return run_point(*args)


def mean(rows: list[dict], metric: str, **where) -> float:
    vals = [r[metric] for r in rows if all(r.get(k) == v for k, v in where.items())]
    return float(np.mean(vals)) if vals else float("nan")


def spread(rows: list[dict], metric: str, **where) -> str:
    vals = [r[metric] for r in rows if all(r.get(k) == v for k, v in where.items())]
    if not vals:
        return "-"
    return f"{np.mean(vals):.2f}" + (f" [{min(vals):.2f}-{max(vals):.2f}]" if len(vals) > 1 else "")


def table(rows: list[dict], mixes, policies) -> str:
    """Markdown: ours (mean [min-max] over seeds) beside Sia's Table 3 where it has the policy, and the
    ratio of our average JCT to Table 3's."""
    lines = ["| mix | policy | avg JCT h | p99 JCT h | makespan h | GPU h/job | re-alloc./job | wall s | "
             "Sia's Table 3 | JCT ratio |", "|---|---|---|---|---|---|---|---|---|---|"]
    for mix in mixes:
        for pol in policies:
            mine = [r for r in rows if r["mix"] == mix and r["policy"] == pol]
            if not mine:
                continue
            paper = TABLE3.get(mix, {}).get(pol)
            ref = f"{PAPER_NAME[pol]}: " + " / ".join(f"{v:g}" for v in paper) if paper else "-"
            ratio = f"{mean(rows, 'avg_jct_hours', mix=mix, policy=pol) / paper[0]:.2f}" if paper else "-"
            cells = [spread(rows, m, mix=mix, policy=pol) for m in METRICS]
            per_job = np.mean([r["reallocations"] / max(1, r["jobs_measured"]) for r in mine])
            lines.append(f"| {mix} | {pol} | " + " | ".join(cells) + f" | {per_job:.1f} | "
                         f"{mean(rows, 'wall_seconds', mix=mix, policy=pol):.1f} | {ref} | {ratio} |")
    return "\n".join(lines)


def paired(rows: list[dict], mix: str, a: str, b: str) -> tuple[float, float]:
    """Average JCT of policies a and b on the mix, over the seeds (files) both ran."""
    seeds = ({r["seed"] for r in rows if r["mix"] == mix and r["policy"] == a}
             & {r["seed"] for r in rows if r["mix"] == mix and r["policy"] == b})
    both = [r for r in rows if r["seed"] in seeds]
    return mean(both, "avg_jct_hours", mix=mix, policy=a), mean(both, "avg_jct_hours", mix=mix, policy=b)


def claims(rows: list[dict], mixes) -> list:
    out = []
    for mix in mixes:
        for suffix in ("", LEARNED):
            g, s = paired(rows, mix, "goodput" + suffix, "sia" + suffix)
            if g == g and s == s:
                out.append(c.Claim(f"{mix}: goodput{suffix} vs sia{suffix}, avg JCT", "goodput <= sia",
                                   f"{g:.3f} vs {s:.3f} h ({g / s - 1:+.1%})", "reproduced" if g <= s * 1.005 else
                                   "not reproduced"))
        for pol, paper in TABLE3.get(mix, {}).items():
            ours = mean(rows, "avg_jct_hours", mix=mix, policy=pol)
            if ours == ours:
                out.append(c.Claim(f"{mix}: {pol} vs Sia's simulator ({PAPER_NAME[pol]}, Table 3), avg JCT",
                                   f"{paper[0]:g} h", f"{ours:.2f} h (x{ours / paper[0]:.2f})",
                                   "reproduced" if abs(ours / paper[0] - 1) <= 0.15 else "not reproduced"))
        for base in ("pollux_sia", "las", "gavel_sia"):
            g, b = paired(rows, mix, "goodput", base)
            paper = TABLE3.get(mix, {})
            if g == g and b == b:
                cut = 1 - g / b
                pcut = (1 - paper["sia"][0] / paper[base][0]) if base in paper else None
                want = f"Sia {pcut:.0%} below {PAPER_NAME[base]}" if pcut is not None else ">= 30 % below"
                goal = min(0.30, pcut) if pcut is not None else 0.30
                out.append(c.Claim(f"{mix}: goodput vs {base}, avg JCT", want, f"{g:.3f} vs {b:.3f} h ({cut:.0%} "
                                   "lower)", "reproduced" if cut >= goal else ("partly" if cut > 0 else
                                                                               "not reproduced")))
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, default=3, help="seeds 0..N-1 (default 3)")
    ap.add_argument("--mix", default=",".join(MIXES), help="comma-separated workloads")
    ap.add_argument("--policy", default=",".join(POLICIES), help="comma-separated policies")
    ap.add_argument("--workers", type=int, default=2, help="parallel processes (default 2)")
    ap.add_argument("--policy-option", action="append", metavar="[POLICY.]KEY=VALUE",
                    help="a policy option, as `gavel-ng simulate --policy-option` (repeatable)")
    ap.add_argument("--trace-dir", help="run every workload CSV of this directory (the artifact's format) "
                    "instead of generated seeds; --mix names it (one name)")
    ap.add_argument("--out", help="results directory (default RESULTS_ROOT/sia_comparison)")
    c.results_root_option(ap)
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s", stream=sys.stderr)
    mixes = [m.strip() for m in args.mix.split(",") if m.strip()]
    policies = [p.strip() for p in args.policy.split(",") if p.strip()]
    given = options_per_policy(list(dict.fromkeys(p.removesuffix(LEARNED) for p in policies)),
                               parse_policy_options(args.policy_option), "--policy-option")
    out = Path(args.out) if args.out else c.root(args) / NAME
    out.mkdir(parents=True, exist_ok=True)
    names = [p.removesuffix(LEARNED) for p in policies]
    given = dict(zip(policies, (given[n] for n in names)))
    if args.trace_dir:
        files = sorted(Path(args.trace_dir).glob("*.csv"), key=lambda f: (len(f.stem), f.stem))
        if len(mixes) != 1 or not files:
            raise SystemExit("--trace-dir needs one --mix name and a directory with workload CSVs")
        points = [(mixes[0], p, i, {**OPTIONS.get(n, {}), **given[p]}, str(f))
                  for i, f in enumerate(files) for p, n in zip(policies, names)]
    else:
        points = [(m, p, s, {**OPTIONS.get(n, {}), **given[p]}) for m in mixes for s in range(args.seeds)
                  for p, n in zip(policies, names)]
    with ProcessPoolExecutor(max_workers=max(1, args.workers)) as pool:
        rows = list(pool.map(_run, points))
    with (out / "results.csv").open("w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    md = table(rows, mixes, policies)
    (out / "table.md").write_text(md + "\n")
    print(md)
    args.out, args.config, args.table = str(out), "seeds", "sia"
    c.report(NAME, claims(rows, mixes), args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
