"""Accuracy report: leave-one-job-type-out on a full throughput table.

For every job type h (at scale factor 1, where pairs exist): build the reference set
from the other types, profile h at a fraction f of its (worker type, reference job)
cells, complete the rest and score the unprofiled cells where the pair can share.

    python -m gavel_ng.estimator.report [--throughputs gavel-osdi20|FILE.json|FILE.csv] [--fractions 0.1,...]
        [--repeats 5] [--out out/estimator_accuracy]

Methods scored on the same cells:
  completion         the fold-in completed row (what the estimator uses)
  nearest_reference  Gavel: copy the nearest reference job's measurements
  reference_mean     no profiling: the mean over reference jobs
Relative errors are on pair throughputs in steps/s given the job's isolated steps/s
(measured while profiling): |est - true| / true, both jobs' sides of every pair.
`same_family` is how often the nearest reference is of the held-out job's model
family, over types that have a sibling in the reference set. `iso_*` is part 2: the
job measured alone on one worker type, its steps/s on the other types estimated from
its fingerprint's nearest reference jobs (and, for comparison, from all of them).
"""

from __future__ import annotations

import argparse
import csv
import logging
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from ..errors import InputError
from ..profiles.table_io import resolve_table
from ..throughputs import ThroughputTable
from .fingerprint import PairModel
from .isolated import IsolatedModel
from .profiling import cells_to_feature_mask, sample_cells
from .reference import IsolatedReference, ReferenceSet, family, true_row

log = logging.getLogger(__name__)
METHODS = ("completion", "nearest_reference", "reference_mean")
DEFAULT_TABLE = "gavel-osdi20"   # Gavel's measured table, shipped with gavel_ng


@dataclass(frozen=True)
class AccuracyRow:
    fraction: float
    method: str
    median_rel_error: float
    p90_rel_error: float
    cells: int
    same_family: float
    feasibility_accuracy: float
    iso_median_rel_error: float
    iso_p90_rel_error: float
    iso_all_refs_median_rel_error: float
    rank: float          # mean selected rank over held-out types
    seconds: float


def evaluate(table: ThroughputTable, fractions: tuple[float, ...] = (0.1, 0.2, 0.3, 0.4, 0.5),
             repeats: int = 5, seed: int = 0, job_types: list[str] | None = None,
             rank: int | None = None, ridge: float | None = None) -> list[AccuracyRow]:
    """Leave-one-type-out accuracy; `job_types` limits the held-out types (default all)."""
    all_types = [k[0] for k in table.job_keys if k[1] == 1]
    held = job_types or all_types
    rows = []
    for f in fractions:
        start = time.perf_counter()
        errs = {m: [] for m in METHODS}
        fam, feas_ok, iso_err, iso_all, ranks = [], [], [], [], []
        for h in held:
            ref = ReferenceSet.from_table(table, 1, exclude_types=(h,))
            pm = PairModel(ref, f, rank, ridge, seed)
            ranks.append(pm.model.rank)
            iso_model = IsolatedModel(IsolatedReference.from_table(table, (h,)))
            truth, true_feas = true_row(table, (h, 1), ref)
            siblings = {family(k[0]) for k in ref.keys}
            rng = np.random.default_rng([seed, int(f * 1000), all_types.index(h)])
            for _ in range(repeats):
                cells = sample_cells(ref, f, rng)
                shown = cells_to_feature_mask(ref, cells)
                fp = pm.fingerprint(np.nan_to_num(truth), shown & np.isfinite(truth), cells, true_feas & cells)
                score = ~shown & np.isfinite(truth)
                true_thr = np.exp(truth[score])
                for method, pred in (("completion", fp.row), ("nearest_reference", pm.ref_rows[fp.nearest]),
                                     ("reference_mean", pm.model.mean)):
                    errs[method].append(np.abs(np.exp(np.minimum(pred[score], 0.0)) - true_thr) / true_thr)
                if family(h) in siblings:
                    fam.append(family(ref.keys[fp.nearest][0]) == family(h))
                feas_ok.append((fp.feasible == true_feas)[~cells])
                e_nb, e_all = _isolated_errors(table, h, iso_model, [k[0] for k in ref.keys], fp.distances,
                                               ref.worker_types)
                iso_err.append(e_nb)
                iso_all.append(e_all)
        secs = time.perf_counter() - start
        ie, ia = np.concatenate(iso_err), np.concatenate(iso_all)
        for m in METHODS:
            e = np.concatenate(errs[m])
            rows.append(AccuracyRow(f, m, float(np.median(e)), float(np.percentile(e, 90)), int(e.size),
                                    float(np.mean(fam)) if fam else float("nan"),
                                    float(np.mean(np.concatenate(feas_ok))),
                                    float(np.median(ie)), float(np.percentile(ie, 90)), float(np.median(ia)),
                                    float(np.mean(ranks)), secs))
        log.info("fraction %.2f done in %.1f s", f, secs)
    return rows


def _isolated_errors(table: ThroughputTable, h: str, model: IsolatedModel, ref_types: list[str],
                     distances: np.ndarray, workers: tuple[str, ...]) -> tuple[np.ndarray, np.ndarray]:
    """Measured alone on each base type in turn: relative error on the other base types."""
    truth = np.array([table.get((h, 1), w) for w in workers])
    cols = [model.windex[w] for w in workers]
    near = model.neighbors_from_types(ref_types, distances, 1)
    everyone = model.neighbors_from_ratios({}, 1)
    out_nb, out_all = [], []
    for s, w in enumerate(workers):
        if truth[s] <= 0:
            continue
        other = [i for i in range(len(workers)) if i != s and truth[i] > 0]
        for nb, out in ((near, out_nb), (everyone, out_all)):
            est = model.estimate({w: truth[s]}, nb)[cols]
            out.extend(np.abs(est[other] - truth[other]) / truth[other])
    return np.array(out_nb), np.array(out_all)


def format_table(rows: list[AccuracyRow]) -> str:
    head = ("| fraction | method | median rel err | p90 rel err | cells | nearest same family | "
            "feasibility acc | isolated median / p90 (all refs median) | rank |")
    lines = [head, "|" + "---|" * 9]
    for r in rows:
        lines.append(f"| {r.fraction:.1f} | {r.method} | {r.median_rel_error:.1%} | {r.p90_rel_error:.1%} | "
                     f"{r.cells} | {r.same_family:.0%} | {r.feasibility_accuracy:.1%} | "
                     f"{r.iso_median_rel_error:.1%} / {r.iso_p90_rel_error:.1%} "
                     f"({r.iso_all_refs_median_rel_error:.1%}) | {r.rank:.1f} |")
    return "\n".join(lines)


def write_outputs(rows: list[AccuracyRow], out: Path) -> list[Path]:
    out.mkdir(parents=True, exist_ok=True)
    csv_path = out / "estimator_accuracy.csv"
    with csv_path.open("w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=list(asdict(rows[0])))
        w.writeheader()
        w.writerows(asdict(r) for r in rows)
    md = out / "estimator_accuracy.md"
    md.write_text(format_table(rows) + "\n")
    png = out / "estimator_accuracy.png"
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(5.5, 3.5))
    for m in METHODS:
        sel = [r for r in rows if r.method == m]
        x = [r.fraction for r in sel]
        line, = ax.plot(x, [r.median_rel_error for r in sel], marker="o", label=f"{m} median")
        ax.plot(x, [r.p90_rel_error for r in sel], ls="--", color=line.get_color(), label=f"{m} p90")
    ax.set_xlabel("profiled fraction of (worker type, reference job) cells")
    ax.set_ylabel("relative error of pair throughput")
    ax.legend(fontsize="x-small")
    fig.tight_layout()
    fig.savefig(png, dpi=120)
    plt.close(fig)
    return [csv_path, md, png]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m gavel_ng.estimator.report", description=__doc__.splitlines()[0])
    ap.add_argument("--throughputs", default=DEFAULT_TABLE,
                    help="a full table with pairs: gavel-osdi20 (default), a Gavel-format .json or a .csv")
    ap.add_argument("--fractions", default="0.1,0.2,0.3,0.4,0.5")
    ap.add_argument("--repeats", type=int, default=5, help="random profiles per held-out type and fraction")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--types", default=[], action="append",
                    help="held-out job type (repeatable; default: all types)")
    ap.add_argument("--rank", type=int, default=None, help="fixed rank (default: chosen by validation)")
    ap.add_argument("--ridge", type=float, default=None)
    ap.add_argument("--out", default="out/estimator_accuracy")
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    try:
        table = resolve_table(args.throughputs)
    except InputError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    types = [t for t in args.types if t] or None
    rows = evaluate(table, tuple(float(x) for x in args.fractions.split(",")), args.repeats, args.seed,
                    types, args.rank, args.ridge)
    print(format_table(rows))
    for p in write_outputs(rows, Path(args.out)):
        print(f"wrote {p}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
