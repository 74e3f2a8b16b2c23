"""The standard figures of a results table (what `gavel-ng plot` draws).

Lines are told apart by every point setting that varies in the table except the x axis
and the seed; seeds make the band (min..max) around the mean.
"""

from __future__ import annotations

import logging
from pathlib import Path

import numpy as np
import pandas as pd

from .. import plots
from .grid import FIELDS
from .store import ResultsStore, table_format

log = logging.getLogger(__name__)
HOUR = 3600.0
SHORT = {"jobs_per_hour": "rate", "round_seconds": "round s", "heterogeneity": "het", "multi_gpu": "multi-GPU",
         "priorities": "prio", "gavel_compat": "compat", "throughputs": "table"}


BOOL_WORDS = {"ideal": ("ideal", "mechanism"), "estimate_throughputs": ("estimated", "oracle"),
              "space_sharing": ("space sharing", "no space sharing"), "multi_gpu": ("multi-GPU", "single-GPU"),
              "priorities": ("priorities", "no priorities"), "gavel_compat": ("gavel-compat", "default mode"),
              "slos": ("SLOs", "no SLOs"), "placement_sensitive": ("placement-sensitive", "placement-blind")}


def ok_rows(df: pd.DataFrame) -> pd.DataFrame:
    return df[df["status"] == "ok"].copy()


def varying(df: pd.DataFrame, exclude: tuple[str, ...] = ("seed",)) -> list[str]:
    cols = [c for c in FIELDS if c in df.columns and c not in exclude]
    return [c for c in cols if df[c].astype(str).nunique(dropna=False) > 1]


def labels(df: pd.DataFrame, keys: list[str]) -> pd.Series:
    """'las' or 'las, cluster=...': the policy first, other varying settings after."""
    def one(row) -> str:
        parts = [str(row["policy"])] if "policy" in keys else []
        for k in keys:
            if k == "policy":
                continue
            v = row[k]
            if k == "throughputs":
                v = "built-in" if pd.isna(v) or v == "" else Path(str(v)).stem
            if k in BOOL_WORDS:
                parts.append(BOOL_WORDS[k][0 if str(v) in ("True", "true") else 1])
                continue
            parts.append(f"{SHORT.get(k, k)}={v:g}" if isinstance(v, float) else f"{SHORT.get(k, k)}={v}")
        return ", ".join(parts) or "all"
    return df.apply(one, axis=1) if len(df) else pd.Series(dtype=str)


def metric_vs(df: pd.DataFrame, path: Path, x: str = "jobs_per_hour", metric: str = "avg_jct_hours",
              ylabel: str = "average JCT (hours)", xlabel: str = "input job rate (jobs/hour)", title: str = "",
              logy: bool = False) -> Path | None:
    df = ok_rows(df)
    df = df[df[x].notna() & df[metric].notna()]
    if df[x].nunique() < 2:
        return None
    keys = varying(df, exclude=("seed", x))
    rest = [k for k in keys if k != "policy"]
    if rest:   # lines in numeric order of their settings, policies in order of appearance
        df = df.sort_values(rest, kind="stable")
    df["_label"] = labels(df, keys)
    series, unstable = {}, {}
    for label, g in df.groupby("_label", sort=False):
        by = g.groupby(x)[metric]
        xs = np.array(sorted(by.groups), float)
        series[label] = (xs, by.mean().loc[xs].to_numpy(), by.min().loc[xs].to_numpy(), by.max().loc[xs].to_numpy())
        unstable[label] = g.groupby(x)["unstable"].apply(lambda s: s.astype(str).isin(["True", "true"]).any()) \
            .loc[xs].to_numpy()
    title = title or "band: min..max over seeds; hollow marker: a run hit a cap"
    return plots.plot_metric_vs_x(series, path, xlabel, ylabel, title=title, logy=logy, unstable=unstable)


def cdf_at(store: ResultsStore, df: pd.DataFrame, path: Path, column: str = "jct_s", rate: float | None = None,
           xlabel: str = "job completion time (hours)", scale: float = HOUR, title: str = "") -> Path | None:
    """CDF of a per-job column at one input rate (default: the highest), seeds pooled."""
    df = ok_rows(df)
    if rate is None and df["jobs_per_hour"].notna().any():
        rate = float(df["jobs_per_hour"].max())
    if rate is not None:
        df = df[np.isclose(df["jobs_per_hour"].astype(float), rate)]
    if df.empty:
        return None
    df = df.assign(_label=labels(df, varying(df, exclude=("seed", "jobs_per_hour"))))
    values = {}
    for label, g in df.groupby("_label", sort=False):
        v = [store.jobs(pid)[column].dropna().to_numpy(float) / scale for pid in g["point_id"]]
        if v and sum(len(a) for a in v):
            values[label] = np.concatenate(v)
    if not values:
        return None
    where = f" at {rate:g} jobs/h" if rate is not None else ""
    unit = " h" if scale == HOUR else ""
    return plots.plot_cdf(values, path, xlabel, title=title or f"{xlabel.split(' (')[0]}{where}", unit=unit)


BAR_METRICS = {"makespan_hours": "makespan (hours)", "total_cost_usd": "total cost (USD)",
               "slo_violation_fraction": "jobs missing their SLO (fraction)",
               "avg_jct_hours": "average JCT (hours)"}


def bars(df: pd.DataFrame, path: Path, metrics: list[str] | None = None, title: str = "") -> Path | None:
    """Mean (std over seeds) per line of the chosen metrics, e.g. makespan and cost/SLO bars."""
    df = ok_rows(df)
    if df.empty:
        return None
    metrics = metrics or [m for m in ("makespan_hours", "total_cost_usd", "slo_violation_fraction")
                          if df[m].notna().any()]
    df = df.assign(_label=labels(df, varying(df)))
    panels = {}
    for m in metrics:
        g = df.groupby("_label", sort=False)[m]
        panels[BAR_METRICS.get(m, m)] = {k: (float(v.mean()), float(v.std()) if len(v) > 1 else 0.0)
                                         for k, v in g}
    return plots.plot_bars(panels, path, title=title)


def shares(df: pd.DataFrame, path: Path, title: str = "") -> Path:
    """Allocation share over time from a long table: time, job, entity, share[, variant, total]."""
    times = np.array(sorted(df["time"].unique()), float)
    jobs = list(dict.fromkeys(df["job"].astype(str)))
    first = df.drop_duplicates("job").set_index(df.drop_duplicates("job")["job"].astype(str))
    wide = df.pivot_table(index="time", columns=df["job"].astype(str), values="share", aggfunc="sum") \
        .reindex(index=times, columns=jobs).fillna(0.0)
    totals = None
    if "total" in df.columns and "variant" in df.columns:
        t = df.drop_duplicates(["variant", "time"]).pivot(index="time", columns="variant", values="total")
        totals = {v: t[v].reindex(times).ffill().to_numpy() for v in t.columns}
    return plots.plot_share_over_time(times, wide.to_numpy(), jobs, [str(first.loc[j, "entity"]) for j in jobs],
                                      path, totals=totals, title=title)


def standard_figures(results: str | Path, out_dir: str | Path, rate: float | None = None) -> list[Path]:
    """Every figure the table supports; figures a table cannot make are skipped (logged)."""
    out = Path(out_dir)
    if Path(results).stat().st_size and table_format(Path(results), "RESULTS") == "csv":
        head = pd.read_csv(results, nrows=1)
        if {"time", "job", "share"} <= set(head.columns):   # an allocation-share table
            return [shares(pd.read_csv(results), out / "allocation_share.png")]
    store = ResultsStore(results, field="RESULTS")
    df = store.load()
    made: list[Path | None] = []
    made.append(metric_vs(df, out / "jct_vs_rate.png"))
    made.append(cdf_at(store, df, out / "jct_cdf.png", rate=rate))
    made.append(cdf_at(store, df, out / "ftf_cdf.png", column="ftf_rho", rate=rate, scale=1.0,
                       xlabel="finish-time fairness rho (JCT / JCT on 1/n of the cluster)"))
    if df["jobs_per_hour"].isna().any() or df["slos"].astype(str).isin(["True", "true"]).any():
        made.append(bars(df[df["jobs_per_hour"].isna() | df["slos"].astype(str).isin(["True", "true"])],
                         out / "bars.png"))
    for m, p in zip(("jct_vs_rate", "jct_cdf", "ftf_cdf", "bars"), made):
        if p is None:
            log.info("%s: not enough data in %s", m, results)
    return [p for p in made if p is not None]
