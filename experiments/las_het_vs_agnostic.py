"""Heterogeneity-aware vs agnostic LAS on the continuous-single trace (paper Fig 9a).

36 V100 + 36 P100 + 36 K80, reference throughput table, JCT of jobs 4000-5000.

    python experiments/las_het_vs_agnostic.py [--loads 1,2,3,4,5,5.6,6] [--window 4000:5000]
        [--seeds 0] [--ideal] [--out experiments/results/las_het_vs_agnostic]

Writes a CSV and a Markdown table (and prints the table). Runs go through gavel_ng.sweep:
in parallel, and resumable (results.csv in --out; finished runs are skipped). The paper
reproduction with AlloX and Gandiva baselines is fig09_las_single.py.
"""

from __future__ import annotations

import argparse
import csv
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
TABLE = "gavel-osdi20"   # Gavel's measured table, shipped with gavel_ng
COLUMNS = ["jobs_per_hour", "seed", "policy", "ideal", "avg_jct_hours", "p99_jct_hours", "unstable",
           "utilization", "policy_solves", "wall_seconds"]


def main(argv: list[str] | None = None) -> int:
    from gavel_ng.sweep import ResultsStore, expand, run_sweep

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--loads", default="1,2,3,4,5,5.6,6")
    ap.add_argument("--window", default="4000:5000")
    ap.add_argument("--seeds", default="0")
    ap.add_argument("--ideal", action="store_true", help="also run het-aware LAS in ideal mode")
    ap.add_argument("--throughputs", default=TABLE, help="gavel-osdi20 (default), a .json or a .csv table")
    ap.add_argument("--max-active-jobs", type=int, default=1500)
    ap.add_argument("--workers", type=int, help="parallel processes (default: all cores)")
    ap.add_argument("--keep-stale", action="store_true", help="reuse rows computed by other code or inputs")
    ap.add_argument("--out", default=str(REPO / "out" / "experiments" / "las_het_vs_agnostic"))
    args = ap.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    base = {"cluster": "v100=36,p100=36,k80=36", "window": args.window, "throughputs": args.throughputs,
            "max_active_jobs": args.max_active_jobs}
    axes = {"jobs_per_hour": [float(x) for x in args.loads.split(",")], "seed": [int(s) for s in args.seeds.split(",")]}
    points = expand({**axes, "policy": ["las", "las_agnostic"]}, base)
    if args.ideal:
        points += expand({**axes, "policy": ["las"], "ideal": [True]}, base)
    store = ResultsStore(out / "results.csv")
    run_sweep(points, store, workers=args.workers, keep_stale=args.keep_stale)
    df = store.load().set_index("point_id")
    rows = []
    with (out / "runs.csv").open("w", newline="") as f:
        w = csv.writer(f)
        w.writerow(COLUMNS)
        for p in sorted(points, key=lambda p: (p.jobs_per_hour, p.seed)):
            r = df.loc[p.point_id]
            row = [p.jobs_per_hour, p.seed, p.policy, p.ideal, r["avg_jct_hours"], r["p99_jct_hours"],
                   str(r["unstable"]) == "True", r["utilization"], r["policy_solves"], r["wall_seconds"]]
            w.writerow(row)
            rows.append(row)
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
