"""The standard figures of a results table (what `gavel-ng plot` draws).

Lines are told apart by every point setting that varies in the table except the x axis
and the seed; seeds make the band (min..max) around the mean. The x axis is the load, or any
other swept setting (heterogeneity, round length, cluster). A point whose runs left measured
jobs unfinished is never drawn as a result: its average leaves those jobs out.
"""

from __future__ import annotations

import logging
from pathlib import Path

import numpy as np
import pandas as pd

from .. import plots
from ..errors import InputError
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


def _setting(k: str, v) -> str:
    """`key=value` of one point setting; an unset one (None, read back as NaN) is the default, never 'nan'."""
    if v is None or (isinstance(v, float) and np.isnan(v)):
        v = "default"
    elif isinstance(v, float):
        v = f"{v:g}"
    return f"{SHORT.get(k, k)}={v}"


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
            parts.append(_setting(k, v))
        return ", ".join(parts) or "all"
    return df.apply(one, axis=1) if len(df) else pd.Series(dtype=str)


XLABELS = {"jobs_per_hour": "input job rate (jobs/hour)", "heterogeneity": "heterogeneity (exponent on speedups)",
           "round_seconds": "round length (seconds)", "cluster": "cluster", "policy_options": "policy options",
           "static": "jobs (static trace)", "gpus_per_server": "GPUs per server"}


def unfinished_mask(df: pd.DataFrame) -> pd.Series:
    """Rows whose run left measured jobs unfinished (it hit a cap): their averages are floors."""
    flag = df["unstable"].astype(str).isin(["True", "true"]) if "unstable" in df.columns else \
        pd.Series(False, index=df.index)
    if "jobs_unfinished" in df.columns:
        flag |= pd.to_numeric(df["jobs_unfinished"], errors="coerce").fillna(0) > 0
    return flag


def metric_vs(df: pd.DataFrame, path: Path, x: str = "jobs_per_hour", metric: str = "avg_jct_hours",
              ylabel: str = "average JCT (hours)", xlabel: str | None = None, title: str = "",
              logy: bool = False) -> Path | None:
    """`metric` along the swept axis `x`, one line per other varying setting (seeds make the band).

    A numeric axis (load, heterogeneity, round length) is drawn to scale; any other (clusters, policy
    option sets) at evenly spaced named positions, in order of appearance. Points whose runs left
    jobs unfinished are floors, drawn apart from the lines (plots.plot_metric_vs_x)."""
    df = ok_rows(df)
    if x not in df.columns:
        return None
    df = df.assign(_bad=unfinished_mask(df))
    df = df[df[x].notna() & df[metric].notna()]
    if df[x].astype(str).nunique() < 2:
        return None
    numeric = pd.to_numeric(df[x], errors="coerce")
    categories = None
    if numeric.notna().all():
        df = df.assign(_x=numeric.astype(float))
    else:
        categories = list(dict.fromkeys(df[x].astype(str)))
        df = df.assign(_x=df[x].astype(str).map({c: float(i) for i, c in enumerate(categories)}))
    keys = varying(df, exclude=("seed", x))
    rest = [k for k in keys if k != "policy"]
    if rest:   # lines in numeric order of their settings, policies in order of appearance
        df = df.sort_values(rest, kind="stable")
    df["_label"] = labels(df, keys)
    has_counts = {"jobs_unfinished", "jobs_in_window"} <= set(df.columns)
    series, unstable, notes = {}, {}, {}
    for label, g in df.groupby("_label", sort=False):
        by = g.groupby("_x")[metric]
        xs = np.array(sorted(by.groups), float)
        series[label] = (xs, by.mean().loc[xs].to_numpy(), by.min().loc[xs].to_numpy(), by.max().loc[xs].to_numpy())
        unstable[label] = g.groupby("_x")["_bad"].any().loc[xs].to_numpy()
        if has_counts:   # over the seeds of each point: "5 of 60 unfinished"
            left, total = (pd.to_numeric(g[c], errors="coerce").groupby(g["_x"]).sum(min_count=1).loc[xs]
                           for c in ("jobs_unfinished", "jobs_in_window"))
            notes[label] = [f"{int(a)} of {int(b)} unfinished" if pd.notna(a) and pd.notna(b) else ""
                            for a, b in zip(left, total)]
    title = title or "band: min..max over seeds"
    return plots.plot_metric_vs_x(series, path, xlabel or XLABELS.get(x, x.replace("_", " ")), ylabel, title=title,
                                  logy=logy, unstable=unstable, notes=notes or None, categories=categories)


def swept_axis(df: pd.DataFrame) -> str | None:
    """The axis `gavel-ng plot` draws along: the load when it varies, else the first other setting that
    varies (heterogeneity, round length, cluster, ...), the policy and the seed aside."""
    keys = varying(ok_rows(df), exclude=("seed", "policy"))
    if "jobs_per_hour" in keys:
        return "jobs_per_hour"
    return keys[0] if keys else None


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
    values, totals = {}, {}
    for label, g in df.groupby("_label", sort=False):
        records = [store.jobs(pid) for pid in g["point_id"]]
        v = [r[column].dropna().to_numpy(float) / scale for r in records]
        if v and sum(len(a) for a in v):
            values[label] = np.concatenate(v)
            # every measured job, finished or not: a run that left some unfinished ends below 1.0
            totals[label] = sum(int(n) if pd.notna(n) else len(r) for r, n in
                                zip(records, g["jobs_in_window"] if "jobs_in_window" in g else [None] * len(g)))
    if not values:
        return None
    where = f" at {rate:g} jobs/h" if rate is not None else ""
    unit = " h" if scale == HOUR else ""
    return plots.plot_cdf(values, path, xlabel, title=title or f"{xlabel.split(' (')[0]}{where}", unit=unit,
                          totals=totals)


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


def standard_figures(results: str | Path, out_dir: str | Path, rate: float | None = None,
                     x: str | None = None) -> list[Path]:
    """Every figure the table supports; figures a table cannot make are skipped (logged). The line figure
    runs along `x`, by default the swept axis (`swept_axis`): jct_vs_rate.png along the load,
    jct_vs_AXIS.png along any other."""
    out = Path(out_dir)
    if Path(results).stat().st_size and table_format(Path(results), "RESULTS") == "csv":
        head = pd.read_csv(results, nrows=1)
        if {"time", "job", "share"} <= set(head.columns):   # an allocation-share table
            return [shares(pd.read_csv(results), out / "allocation_share.png")]
    store = ResultsStore(results, field="RESULTS")
    df = store.load()
    made: list[Path | None] = []
    x = x or swept_axis(df) or "jobs_per_hour"
    if x not in FIELDS:
        raise InputError("--x", x, f"not a sweep setting; known: {', '.join(FIELDS)}")
    made.append(metric_vs(df, out / f"jct_vs_{'rate' if x == 'jobs_per_hour' else x}.png", x=x))
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
