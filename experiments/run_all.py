"""Run every paper-reproduction script in one configuration and collect the claims.

    python experiments/run_all.py [--config reduced|paper|full] [--table reference|builtin] [--only a,b]
        [--backend ray --address HOST:PORT]

Each script is resumable (finished simulations are skipped), so an interrupted run_all
continues where it stopped. Writes RESULTS_ROOT/summary[-paper|-full].md: every claim and
each script's wall time (RESULTS_ROOT: out/experiments/ unless --results-root says, e.g.
experiments/results to refresh the committed tables).
"""

from __future__ import annotations

import argparse
import csv
import importlib
import sys
import time
from pathlib import Path

import common as c
import pandas as pd

SCRIPTS = ["fig09_las_single", "fig10_las_multi", "fig11_ftf", "fifo", "las_priorities", "makespan", "cost",
           "hierarchical", "fig15_mechanism", "fig16_estimator", "builtin_heterogeneity", "window_effect"]
# the paper configuration runs every claim at the paper's window; these add nothing there:
# window_effect compares windows (reduced vs the paper's is that comparison), builtin_heterogeneity
# is a study of ours on built-in profiles, and Fig 16 is a 12-GPU experiment with a window of its own
NOT_IN = {"paper": {"window_effect", "builtin_heterogeneity", "fig16_estimator"}}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--config", choices=sorted(c.CONFIGS), default="reduced")
    ap.add_argument("--table", choices=("reference", "builtin"), default="reference")
    ap.add_argument("--only", help="comma-separated script names")
    ap.add_argument("--workers", type=int)
    ap.add_argument("--backend", choices=("local", "ray"), default="local")
    ap.add_argument("--address")
    c.results_root_option(ap)
    args = ap.parse_args(argv)
    names = args.only.split(",") if args.only else [s for s in SCRIPTS if s not in NOT_IN.get(args.config, ())]
    common = ["--config", args.config, "--table", args.table, "--backend", args.backend]
    common += ["--workers", str(args.workers)] if args.workers else []
    common += ["--address", args.address] if args.address else []
    common += ["--results-root", str(args.results_root)]
    times = {}
    for name in names:
        start = time.perf_counter()
        importlib.import_module(name).main(common)
        times[name] = time.perf_counter() - start
        print(f"== {name}: {times[name]:.0f} s", flush=True)
    write_summary(args, times)
    return 0


def script_dir(script: str, args) -> Path:
    """Where a script of this configuration wrote (builtin_heterogeneity always uses built-in profiles)."""
    table = "builtin" if script == "builtin_heterogeneity" else args.table
    return c.root(args) / (script + c.suffix(args.config, table))


def write_summary(args, times: dict[str, float]) -> Path:
    lines = [f"# {args.config} configuration, {args.table} table\n",
             "| script | result | paper | ours | verdict | note |", "|---|---|---|---|---|---|"]
    for script in SCRIPTS:
        claims = script_dir(script, args) / "claims.csv"
        if claims.exists():
            with claims.open() as f:
                for r in csv.DictReader(f):
                    lines.append(f"| {script} | {r['result']} | {r['paper']} | {r['ours']} | {r['verdict']} | "
                                 f"{r['note']} |")
    lines += ["", "| script | wall time this run (s) | simulation time in its results.csv (s, summed over points) |",
              "|---|---|---|"]
    compute = {}
    for k in SCRIPTS:   # every script with results, also those an earlier (interrupted) run_all ran
        res = script_dir(k, args) / "results.csv"
        if k not in times and not res.exists():
            continue
        compute[k] = float(pd.read_csv(res)["wall_seconds"].sum()) if res.exists() else 0.0
        ran = f"{times[k]:.0f}" if k in times else "-"
        lines.append(f"| {k} | {ran} | {compute[k]:.0f} |")
    lines.append(f"| total | {sum(times.values()):.0f} | {sum(compute.values()):.0f} |")
    path = c.root(args) / f"summary{c.suffix(args.config, args.table)}.md"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines) + "\n")
    print(path)
    return path


if __name__ == "__main__":
    sys.exit(main())
