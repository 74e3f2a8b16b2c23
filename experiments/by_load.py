"""Per-load means and grouped bars shared by the full-window scripts (space_sharing, estimator_vs_oracle)."""

from __future__ import annotations

import csv
import sys
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path


def mean_jct(rows: list[dict], load: float, key: str, name: str) -> tuple[float | None, bool]:
    """Mean average JCT over seeds of rows[key] == name at this load, and whether any run was unstable."""
    v = [r for r in rows if r["jobs_per_hour"] == load and r[key] == name]
    jcts = [r["avg_jct_hours"] for r in v if r["avg_jct_hours"] is not None]
    return (sum(jcts) / len(jcts) if jcts else None), any(r["unstable"] for r in v)


def jct_cells(rows: list[dict], load: float, key: str, names: list[str]) -> tuple[list[str], dict]:
    """Table cells ('12.34', '12.34 (unstable)' or '-') per name at this load, and the stable means."""
    cells, vals = [], {}
    for name in names:
        m, bad = mean_jct(rows, load, key, name)
        vals[name] = None if bad else m
        cells.append("-" if m is None else f"{m:.2f}" + (" (unstable)" if bad else ""))
    return cells, vals


def plot_by_load(rows: list[dict], key: str, path: Path, title: str) -> None:
    """Grouped bars of average JCT per load, one bar per rows[key]; unstable runs marked."""
    from gavel_ng.plots import plot_grouped_bars

    groups, marks = {}, {}
    for r in rows:
        x = f"{r['jobs_per_hour']:g} jobs/h"
        m, bad = mean_jct(rows, r["jobs_per_hour"], key, r[key])
        if m is not None:
            groups.setdefault(x, {})[r[key]] = m
        if bad:
            marks.setdefault(x, set()).add(r[key])
    plot_grouped_bars(groups, path, "input job rate", "average JCT (hours)", title, marks)


def run_points(run_point, points: list, fields: list[str], workers: int, out_csv: Path) -> list[dict]:
    """Run points in a process pool, writing each row to out_csv as it finishes."""
    rows = []
    with out_csv.open("w", newline="") as f, ProcessPoolExecutor(max(1, workers)) as pool:
        w = csv.DictWriter(f, fields)
        w.writeheader()
        for row in pool.map(run_point, points):
            w.writerow(row)
            f.flush()
            rows.append(row)
            print(*row.values(), sep="\t", file=sys.stderr, flush=True)
    return rows
