"""Heterogeneity-aware vs agnostic LAS on the continuous-single trace (paper Fig 9a).

36 V100 + 36 P100 + 36 K80, reference throughput table, JCT of jobs 4000-5000.

    python experiments/las_het_vs_agnostic.py [--loads 1,2,3,4,5,5.6,6] [--window 4000:5000]
        [--seeds 0] [--ideal] [--out experiments/results/las_het_vs_agnostic]

Writes a CSV and a Markdown table (and prints the table). Runs take minutes in all.
"""

from __future__ import annotations

import argparse
import csv
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
TABLE = REPO.parent / "shared" / "reference" / "gavel" / "simulation_throughputs.json"


def main(argv: list[str] | None = None) -> int:
    from gavel_ng.cluster import Cluster
    from gavel_ng.simulator import SimConfig, simulate
    from gavel_ng.throughputs import ThroughputTable
    from gavel_ng.traces import TraceGenerator, TraceSpec

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--loads", default="1,2,3,4,5,5.6,6")
    ap.add_argument("--window", default="4000:5000")
    ap.add_argument("--seeds", default="0")
    ap.add_argument("--ideal", action="store_true", help="also run het-aware LAS in ideal mode")
    ap.add_argument("--throughputs", default=str(TABLE))
    ap.add_argument("--max-active-jobs", type=int, default=1500)
    ap.add_argument("--out", default=str(REPO / "experiments" / "results" / "las_het_vs_agnostic"))
    args = ap.parse_args(argv)
    lo, hi = map(int, args.window.split(":"))
    table = ThroughputTable.load(args.throughputs)
    cluster = Cluster.parse("v100=36,p100=36,k80=36", gpus_per_server=4)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    rows = []
    variants = [("las", False), ("las_agnostic", False)] + ([("las", True)] if args.ideal else [])
    with (out / "runs.csv").open("w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["jobs_per_hour", "seed", "policy", "ideal", "avg_jct_hours", "p99_jct_hours", "unstable",
                    "utilization", "policy_solves", "wall_seconds"])
        for load in [float(x) for x in args.loads.split(",")]:
            for seed in [int(s) for s in args.seeds.split(",")]:
                for policy, ideal in variants:
                    gen = TraceGenerator(TraceSpec(jobs_per_hour=load, seed=seed), table)
                    cfg = SimConfig(policy=policy, window=(lo, hi), seed=seed, ideal=ideal,
                                    max_active_jobs=args.max_active_jobs)
                    s = simulate(cluster, table, gen, cfg).summary
                    row = [load, seed, policy, ideal, s["avg_jct_hours"], s["p99_jct_hours"], s["unstable"],
                           s["utilization"], s["policy_solves"], s["wall_seconds"]]
                    w.writerow(row)
                    f.flush()
                    rows.append(row)
                    print(*row, sep="\t", file=sys.stderr, flush=True)
    md = markdown(rows)
    (out / "table.md").write_text(md)
    print(md)
    return 0


def markdown(rows: list[list]) -> str:
    by = {}
    for load, seed, policy, ideal, jct, _p99, unstable, *_ in rows:
        name = policy + (" (ideal)" if ideal else "")
        by.setdefault(load, {}).setdefault(name, []).append((jct, unstable))

    def cell(v):
        if not v:
            return "-"
        jcts = [j for j, _ in v if j is not None]
        text = f"{sum(jcts) / len(jcts):.2f}" if jcts else "n/a"
        return text + (" (unstable)" if any(u for _, u in v) else "")

    names = list(dict.fromkeys(n for d in by.values() for n in d))
    lines = ["| jobs/h | " + " | ".join(f"{n} avg JCT (h)" for n in names) + " | agnostic / het |",
             "|---" * (len(names) + 2) + "|"]
    for load, d in by.items():
        het, agn = d.get("las"), d.get("las_agnostic")
        ratio = "-"
        if het and agn and not any(u for _, u in het + agn):
            ratio = f"{sum(j for j, _ in agn) / sum(j for j, _ in het):.2f}x"
        lines.append(f"| {load:g} | " + " | ".join(cell(d.get(n)) for n in names) + f" | {ratio} |")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    sys.exit(main())
