"""`gavel-ng plot RESULTS`: the standard figures of a sweep's results table, as PNG."""

from __future__ import annotations

from pathlib import Path

from ..errors import InputError


def add_parser(sub) -> None:
    p = sub.add_parser(
        "plot", help="draw the standard figures of a sweep results table",
        description="Average JCT along the swept axis (the input rate, else the first other setting that varies: "
                    "heterogeneity, round length, cluster, ...; band over seeds), JCT and finish-time-fairness CDFs "
                    "at one rate, "
                    "makespan/cost/SLO bars for static or SLO runs; a table with time,job,entity,share columns "
                    "(written by experiments/hierarchical.py) gives the allocation share over time.")
    p.add_argument("results", metavar="RESULTS", help="results table written by `gavel-ng sweep` (.csv/.parquet)")
    p.add_argument("--out", metavar="DIR", help="where the PNGs go (default: beside RESULTS, in RESULTS_plots/)")
    p.add_argument("--rate", type=float, help="input rate (jobs/h) of the CDFs (default: the highest)")
    p.add_argument("--x", metavar="SETTING", help="the sweep setting along which average JCT is drawn, e.g. "
                                                  "heterogeneity, round_seconds, cluster (default: jobs_per_hour if "
                                                  "it varies, else the first setting that does)")
    p.set_defaults(run=run)


def run(args) -> int:
    from ..sweep.figures import standard_figures

    path = Path(args.results)
    if not path.exists():
        raise InputError("RESULTS", args.results, "no such file")
    out = Path(args.out) if args.out else path.with_name(path.stem + "_plots")
    made = standard_figures(path, out, rate=args.rate, x=args.x)
    if not made:
        raise InputError("RESULTS", args.results, "has no finished points to plot")
    for p in made:
        print(p)
    return 0
