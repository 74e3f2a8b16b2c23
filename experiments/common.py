"""Shared pieces of the paper-reproduction scripts: configurations, running a grid through
`gavel_ng.sweep` (parallel, resumable), checking what the simulator supports, and
writing each script's 'paper vs ours' claims table.

Every script takes --config reduced|paper|full, --table reference|builtin, --workers,
--backend local|ray, --address, --out, --results-root. Results go under
RESULTS_ROOT/<name>/ (results.csv: one row per simulation, claims.csv: paper vs ours, *.png).
The root is out/experiments/ unless told: a run never writes over the tables committed under
experiments/results/ unless it is asked to (`--results-root experiments/results`).
"""

from __future__ import annotations

import argparse
import csv
import logging
import math
import sys
from dataclasses import dataclass, fields
from pathlib import Path

import numpy as np
import pandas as pd

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
REFERENCE = "gavel-osdi20"   # Gavel's measured table, shipped with gavel_ng (ThroughputTable.builtin)
COMMITTED = REPO / "experiments" / "results"   # the tables experiments/README.md quotes (tracked by git)
RESULTS = REPO / "out" / "experiments"          # where a script writes unless told (untracked)
PAPER_CLUSTER = "v100=36,p100=36,k80=36"
PENDING_SS = "pending: needs space sharing in the simulator"
PENDING_EST = "pending: needs the throughput estimator in the simulator"

log = logging.getLogger("experiments")


@dataclass(frozen=True)
class Config:
    """How big a reproduction is. `full` is the paper's setup (3 seeds, jobs 4000-5000)."""

    name: str
    window: str          # job ids measured on continuous traces
    seeds: tuple[int, ...]
    dense: bool          # all of the paper's input rates, or a few


CONFIGS = {
    "reduced": Config("reduced", "250:500", (0,), False),
    # the paper's window and seeds at the rates the claims name (plus one or two lower ones):
    # every claim at the paper's configuration, sized for one machine
    "paper": Config("paper", "4000:5000", (0, 1, 2), False),
    "full": Config("full", "4000:5000", (0, 1, 2), True),
}


def suffix(config: str, table: str) -> str:
    """The results directory's suffix for a configuration and table ('' for reduced, reference)."""
    return ("-builtin" if table == "builtin" else "") + ("" if config == "reduced" else f"-{config}")


def parse_args(doc: str, argv: list[str] | None, extra=None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=doc.splitlines()[0], epilog="\n".join(doc.splitlines()[1:]),
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--config", choices=sorted(CONFIGS), default="reduced")
    ap.add_argument("--table", choices=("reference", "builtin"), default="reference",
                    help="the Gavel artifact's measured table (gavel-osdi20) or gavel_ng's built-in profiles")
    ap.add_argument("--workers", type=int, help="parallel processes (default: all cores)")
    ap.add_argument("--backend", choices=("local", "ray"), default="local")
    ap.add_argument("--address", help="Ray cluster address")
    results_root_option(ap)
    ap.add_argument("--out", help="results directory (default RESULTS_ROOT/NAME[-builtin][-paper|-full])")
    ap.add_argument("--keep-stale", action="store_true",
                    help="reuse rows computed by other code or inputs (to reprint claims without re-running; "
                         "by default such points run again)")
    if extra:
        extra(ap)
    args = ap.parse_args(argv)
    args.cfg = CONFIGS[args.config]
    logging.basicConfig(level=logging.INFO, format="%(message)s", stream=sys.stderr)
    return args


def results_root_option(ap: argparse.ArgumentParser) -> None:
    """--results-root: where results go by default (out/experiments; experiments/results refreshes the
    committed tables)."""
    ap.add_argument("--results-root", type=Path, default=RESULTS,
                    help=f"where each script's directory goes (default {RESULTS.relative_to(REPO)}/, untracked; "
                         f"{COMMITTED.relative_to(REPO)} refreshes the committed tables)")


def root(args) -> Path:
    """The results root a script of these arguments writes under."""
    return Path(getattr(args, "results_root", None) or RESULTS)


MULTI_GPU_SERVER = 8   # GPUs per server for traces with multi-GPU jobs (experiments/README.md, "Server size")


def server_size_option(ap: argparse.ArgumentParser) -> None:
    """--gpus-per-server, for the scripts whose traces have multi-GPU jobs (where it matters)."""
    ap.add_argument("--gpus-per-server", type=int, default=MULTI_GPU_SERVER,
                    help=f"GPUs per server of every type (default {MULTI_GPU_SERVER}: every job of the trace fits "
                         "one server, as the Gavel prototype charges it; 4 splits 8-GPU jobs). Results of "
                         "another size go to NAME...-<N>gps")


def servers(args) -> int | None:
    """GPUs per server a script's points name (None: the script has no such option)."""
    n = getattr(args, "gpus_per_server", None)
    if n is not None and n < 1:
        raise SystemExit(f"--gpus-per-server must be at least 1, got {n}")
    return n


def throughputs(args) -> str | None:
    """The table a point names (None: built-in profiles)."""
    return None if args.table == "builtin" else REFERENCE


def out_dir(name: str, args) -> Path:
    if args.out:
        return Path(args.out)
    size = "" if servers(args) in (None, MULTI_GPU_SERVER) else f"-{servers(args)}gps"
    return root(args) / (name + suffix(args.config, args.table) + size)


def run(name: str, points: list, args) -> pd.DataFrame:
    """Run the points not yet in results.csv; return the rows of exactly these points."""
    from gavel_ng.sweep import ResultsStore, run_sweep

    store = ResultsStore(out_dir(name, args) / "results.csv")

    def progress(res, done, total):
        log.info("[%s %d/%d] %s  avg JCT %s h  (%.0f s)%s", name, done, total, res.row["policy"],
                 res.row.get("avg_jct_hours"), res.row.get("wall_seconds") or 0,
                 "" if res.ok else f"  FAILED {res.row['error']}")

    run_sweep(points, store, backend=args.backend, workers=args.workers, address=args.address, on_result=progress,
              keep_stale=getattr(args, "keep_stale", False))
    df = store.load()
    ids = {p.point_id for p in points}
    return df[df["point_id"].isin(ids) & (df["status"] == "ok")].reset_index(drop=True)


def job_records(name: str, args, rows: pd.DataFrame, policies, seed) -> dict[str, pd.DataFrame]:
    """Per-job records (indexed by job id) of each policy's run among `rows` with this seed; a
    policy whose records are missing is left out (they are not committed: .gitignore)."""
    jobs_dir = store_of(name, args).jobs_dir
    out = {}
    for pol in policies:
        pid = rows[(rows["policy"] == pol) & (rows["seed"] == seed)]["point_id"]
        path = jobs_dir / f"{pid.iloc[0]}.csv" if len(pid) else None
        if path is not None and path.exists():
            out[pol] = pd.read_csv(path).set_index("job_id")
    return out


def store_of(name: str, args):
    from gavel_ng.sweep import ResultsStore

    return ResultsStore(out_dir(name, args) / "results.csv")


# ----- what the simulator supports ----------------------------------------------------------
def supports(feature: str) -> bool:
    """'space_sharing': a packed policy really packs in simulate; 'estimator': SimConfig has it."""
    from gavel_ng.simulator import SimConfig

    names = {f.name for f in fields(SimConfig)}
    if feature == "estimator":
        return "estimate_throughputs" in names
    if feature != "space_sharing":
        raise ValueError(feature)
    from gavel_ng.cluster import Cluster
    from gavel_ng.policies import list_policies
    from gavel_ng.simulator import simulate
    from gavel_ng.throughputs import ThroughputTable
    from gavel_ng.traces import Trace

    if "gandiva" not in list_policies():
        return False
    table = ThroughputTable(isolated={"v100": {("A", 1): 2.0, ("B", 1): 1.0}},
                            pairs={"v100": {("A", 1): {("B", 1): (1.6, 0.8)}, ("B", 1): {("A", 1): (0.8, 1.6)}}})
    trace = Trace(["A", "B"], np.array([1, 1]), np.ones(2), np.array([720.0, 720.0]), np.full(2, math.inf),
                  np.zeros(2))
    try:
        r = simulate(Cluster.parse("v100=1", gpus_per_server=1), table, trace, SimConfig(policy="las_packed"))
    except Exception as exc:  # noqa: BLE001 - any failure means "not yet"
        log.info("space sharing probe failed: %s", exc)
        return False
    return bool(r.summary.get("paired_fraction", 0) > 0)


# ----- selecting and comparing -------------------------------------------------------------
def mean_of(df: pd.DataFrame, metric: str, **where) -> float:
    """Mean over seeds of one metric at the rows matching `where` (NaN when none)."""
    sel = df
    for k, v in where.items():
        col = sel[k]
        sel = sel[np.isclose(col.astype(float), float(v))] if isinstance(v, float) else sel[col.astype(str) == str(v)]
    vals = sel[metric].astype(float).dropna()
    return float(vals.mean()) if len(vals) else math.nan


def any_unstable(df: pd.DataFrame, **where) -> bool:
    sel = df
    for k, v in where.items():
        col = sel[k]
        sel = sel[np.isclose(col.astype(float), float(v))] if isinstance(v, float) else sel[col.astype(str) == str(v)]
    return bool(sel["unstable"].astype(str).isin(["True", "true"]).any())


def ratio(a: float, b: float) -> float:
    return a / b if b and not (math.isnan(a) or math.isnan(b)) else math.nan


def fmt_x(v: float) -> str:
    return "n/a" if v is None or (isinstance(v, float) and math.isnan(v)) else f"{v:.2f}x"


@dataclass
class Claim:
    """One number of the paper beside ours."""

    result: str
    paper: str
    ours: str
    verdict: str          # reproduced | partly | not reproduced | pending
    note: str = ""


def report(name: str, claims: list[Claim], args, figures: list[Path] | None = None) -> None:
    out = out_dir(name, args)
    out.mkdir(parents=True, exist_ok=True)
    with (out / "claims.csv").open("w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["result", "paper", "ours", "verdict", "note", "config", "table"])
        for c in claims:
            w.writerow([c.result, c.paper, c.ours, c.verdict, c.note, args.config, args.table])
    print(f"\n{name} ({args.config} configuration, {args.table} table)")
    print("| result | paper | ours | verdict | note |\n|---|---|---|---|---|")
    for c in claims:
        print(f"| {c.result} | {c.paper} | {c.ours} | {c.verdict} | {c.note} |")
    for p in figures or []:
        if p is not None:
            print(f"figure: {p}")


def write_rows(path: Path, rows: list[dict]) -> None:
    """rows (dicts, keys in column order) as a CSV file at path, its folder made. Rows of different kinds may
    have columns the others lack (sim_vs_cluster's allocation policies and `goodput`): the header is every
    key in the order first seen, and a row's missing cells are empty."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fields = list(dict.fromkeys(k for r in rows for k in r))
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=fields, restval="")
        w.writeheader()
        w.writerows(rows)


def verdict(ours: float, paper: float, tol: float = 0.25) -> str:
    """Within tol (relative) of the paper: reproduced; same direction (> 1): partly, marked
    "(larger)" when our effect exceeds the paper's (a gain the paper did not claim)."""
    if math.isnan(ours):
        return "not reproduced"
    if paper != 1.0 and (ours > 1) != (paper > 1):
        return "not reproduced"
    if abs(ours - paper) <= tol * paper:
        return "reproduced"
    if (ours > 1) != (paper > 1):
        return "not reproduced"
    return "partly (larger)" if abs(ours - 1) > abs(paper - 1) else "partly"


# ----- the continuous "average JCT vs input rate" experiments (Figs 9, 10, 11, FIFO, priorities) ----
def rate_points(args, policies: list[str], rates: list[float], **base) -> list:
    from gavel_ng.sweep import expand

    base = {"cluster": PAPER_CLUSTER, "window": args.cfg.window, "throughputs": throughputs(args), **base}
    if servers(args) is not None:   # (4, the sweep's default, leaves a point's id as it was)
        base["gpus_per_server"] = servers(args)
    return expand({"policy": policies, "jobs_per_hour": rates, "seed": list(args.cfg.seeds)}, base)


def jct_figures(name: str, df: pd.DataFrame, args, rate: float, title: str, ftf: bool = False) -> list[Path]:
    from gavel_ng.sweep.figures import cdf_at, metric_vs

    out, store = out_dir(name, args), store_of(name, args)
    figs = [metric_vs(df, out / "jct_vs_rate.png", title=f"{title}: average JCT vs load"),
            cdf_at(store, df, out / "jct_cdf.png", rate=rate, title=f"{title}: JCT CDF at {rate:g} jobs/h")]
    if ftf:
        figs.append(cdf_at(store, df, out / "ftf_cdf.png", column="ftf_rho", rate=rate, scale=1.0,
                           xlabel="finish-time fairness rho", title=f"{title}: FTF CDF at {rate:g} jobs/h"))
    return [f for f in figs if f is not None]


def jct_claim(df: pd.DataFrame, result: str, paper: float, base: str, better: str, rate: float,
              metric: str = "avg_jct_hours", note: str = "") -> Claim:
    """'better' improves 'base' by paper-x at `rate`: ours = base / better."""
    a, b = mean_of(df, metric, policy=base, jobs_per_hour=rate), mean_of(df, metric, policy=better, jobs_per_hour=rate)
    r = ratio(a, b)
    flags = [p for p in (base, better) if any_unstable(df, policy=p, jobs_per_hour=rate)]
    extra = f"{', '.join(flags)} hit a cap (queue unbounded): its mean is a floor" if flags else ""
    ours = f"{fmt_x(r)} ({a:.1f} h vs {b:.1f} h)" if metric.endswith("hours") else f"{fmt_x(r)} ({a:.2f} vs {b:.2f})"
    return Claim(result, f"{paper:g}x", ours + seed_band(df, metric, base, better, jobs_per_hour=rate),
                 verdict(r, paper), "; ".join(filter(None, [note, extra])))


def seed_band(df: pd.DataFrame, metric: str, base: str, better: str, **where) -> str:
    """' ; seeds a-b x': the range over seeds of base / better, where more than one seed ran both."""
    if "seed" not in df or df["seed"].nunique() < 2:
        return ""
    per = [ratio(mean_of(df, metric, policy=base, seed=int(s), **where),
                 mean_of(df, metric, policy=better, seed=int(s), **where)) for s in sorted(df["seed"].unique())]
    per = [v for v in per if not math.isnan(v)]
    if len(per) < 2:
        return ""
    return f"; seeds {min(per):.2f}-{max(per):.2f}x"
