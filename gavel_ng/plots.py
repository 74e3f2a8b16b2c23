"""Plots written as PNG files (matplotlib, no display needed)."""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import matplotlib.ticker  # noqa: E402
import numpy as np  # noqa: E402

from .allocation import Allocation  # noqa: E402

MANY_JOBS = 16   # more rows than this: the figure grows with them and labels stand upright
MOST_LABELS = 180   # past this many rows, every k-th job is named (the figure stops growing at about 36 inches)


def plot_allocation(allocations: Allocation | dict[str, Allocation], path: str | Path, title: str = "") -> Path:
    """Stacked bars of each job's time share per worker type; one panel per allocation. Past MANY_JOBS
    rows a panel widens with its rows (about 0.2 inch each) and its job labels stand upright, so that
    40 jobs or more stay readable; past MOST_LABELS, every k-th job is named."""
    if isinstance(allocations, Allocation):
        allocations = {"": allocations}
    rows = [max(len(a.rows), 1) for a in allocations.values()]
    many = max(rows) > MANY_JOBS
    size = (max(5.0, 4.0 * len(rows)), 3.6) if not many else \
        (sum(max(4.0, 0.2 * min(n, MOST_LABELS) + 1.0) for n in rows) + 1.8, 4.6)
    fig, axes = plt.subplots(1, len(allocations), figsize=size, squeeze=False, sharey=True,
                             gridspec_kw={"width_ratios": rows} if many else None)
    for ax, (name, alloc) in zip(axes[0], allocations.items()):
        labels = [Allocation.label(r) for r in alloc.rows]
        bottom = np.zeros(len(labels))
        for j, w in enumerate(alloc.worker_types):
            ax.bar(labels, alloc.values[:, j], bottom=bottom, label=w)
            bottom += alloc.values[:, j]
        ax.set_title(name)
        ax.set_xlabel("job")
        ax.set_ylim(0, 1.05)
        if many:
            every = -(-len(labels) // MOST_LABELS)
            ax.set_xticks(range(0, len(labels), every), labels[::every], rotation=90, fontsize="x-small")
            ax.set_xlim(-0.7, len(labels) - 0.3)
        elif max(len(s) for s in labels) * len(labels) > 40:
            ax.set_xticks(range(len(labels)), labels, rotation=40, ha="right", fontsize="small")
    axes[0][0].set_ylabel("fraction of wall-clock time")
    axes[0][-1].legend(title="worker type", loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize="small")
    if title:
        fig.suptitle(title)
    return _save(fig, path)


def plot_jct_cdf(jcts_hours: dict[str, np.ndarray], path: str | Path, title: str = "",
                 totals: dict[str, int] | None = None) -> Path:
    """CDF of job completion times (hours, log scale), one line per run; `totals` as in plot_cdf."""
    return plot_cdf(jcts_hours, path, "job completion time (hours)", title=title, unit=" h", totals=totals)


def _save(fig, path: str | Path) -> Path:
    fig.tight_layout()
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def readable_log(axis) -> None:
    """A log axis with plain numbers at 1, 2 and 5 of each decade (not 10^k only, and not none at all
    when the data spans less than a decade)."""
    axis.set_major_locator(matplotlib.ticker.LogLocator(subs=(1.0, 2.0, 5.0)))
    axis.set_major_formatter(matplotlib.ticker.FuncFormatter(lambda v, _: f"{v:g}"))
    axis.set_minor_formatter(matplotlib.ticker.NullFormatter())


FLOOR_NOTE = "hollow triangle, dotted: jobs unfinished at the cap; the value is a floor, not a result"


def metric_vs_x_figure(series: dict[str, tuple], xlabel: str, ylabel: str, title: str = "", logy: bool = False,
                       unstable: dict[str, np.ndarray] | None = None, notes: dict[str, list[str]] | None = None,
                       categories: list[str] | None = None):
    """The figure of plot_metric_vs_x (returned for tests to read its lines)."""
    fig, ax = plt.subplots(figsize=(6, 4))
    floors = False
    for k, (label, (x, mean, low, high)) in enumerate(series.items()):
        x, mean = np.asarray(x, float), np.asarray(mean, float)
        bad = np.asarray(unstable[label], bool) if unstable and label in unstable else np.zeros(len(x), bool)
        good = ~bad
        color = f"C{k % 10}"
        # the clean line and its band run through clean points only: a floor never reads as a result
        ax.plot(x[good], mean[good], marker="o", color=color,
                label=label if good.any() else f"{label} (no point without unfinished jobs)")
        if low is not None and high is not None and good.any():
            ax.fill_between(x[good], np.asarray(low, float)[good], np.asarray(high, float)[good], color=color,
                            alpha=0.2)
        if bad.any():
            floors = True
            near = bad | np.r_[bad[1:], False] | np.r_[False, bad[:-1]]   # a floor and its neighbours, dotted
            ax.plot(x, np.where(near, mean, np.nan), ":", color=color)
            ax.plot(x[bad], mean[bad], "^", ms=8, mfc="white", mec=color, mew=1.5, color=color, linestyle="none")
            texts = (notes or {}).get(label)
            for i in np.flatnonzero(bad):
                ax.annotate(texts[i] if texts and texts[i] else "floor", (x[i], mean[i]), xytext=(4, 6),
                            textcoords="offset points", fontsize="x-small", color=color)
    if floors:
        ax.plot([], [], "^", ms=8, mfc="white", mec="0.3", linestyle=":", color="0.3", label=FLOOR_NOTE)
    if categories is not None:
        wide = max(map(len, categories)) > 8
        ax.set_xticks(range(len(categories)), categories, rotation=20 if wide else 0, ha="right" if wide else "center",
                      fontsize="small")
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    if logy:
        ax.set_yscale("log")
        readable_log(ax.yaxis)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize="x-small" if floors else "small")
    if title:
        ax.set_title(title, fontsize="medium")
    return fig


def plot_metric_vs_x(series: dict[str, tuple], path: str | Path, xlabel: str, ylabel: str, title: str = "",
                     logy: bool = False, unstable: dict[str, np.ndarray] | None = None,
                     notes: dict[str, list[str]] | None = None, categories: list[str] | None = None) -> Path:
    """Mean line with a band (e.g. min..max or +-1 std over seeds), one series per label.

    series[label] = (x, mean, low, high). `unstable[label]` marks x values whose runs left measured
    jobs unfinished (they hit a cap: the queue grew without bound): their mean leaves those jobs out, so
    it is a floor. They are kept off the line and its band, drawn as hollow triangles joined by a dotted
    line, each labelled with `notes[label][i]` (e.g. "5 of 60 unfinished") or "floor". `categories`:
    names of the x positions 0, 1, ... when the swept axis is not a number (clusters, option sets)."""
    return _save(metric_vs_x_figure(series, xlabel, ylabel, title, logy, unstable, notes, categories), path)


def plot_cdf(values: dict[str, np.ndarray], path: str | Path, xlabel: str, title: str = "", logx: bool = True,
             stat_name: str = "mean", unit: str = "", totals: dict[str, int] | None = None) -> Path:
    """Empirical CDFs, one line per label, each labelled with its mean.

    `totals[label]`: how many jobs the line is over, those with no value (unfinished) included: the
    line then ends below 1.0 by their share, and its label says how many."""
    return _save(cdf_figure(values, xlabel, title, logx, stat_name, unit, totals), path)


def cdf_figure(values: dict[str, np.ndarray], xlabel: str, title: str = "", logx: bool = True,
               stat_name: str = "mean", unit: str = "", totals: dict[str, int] | None = None):
    """The figure of plot_cdf (returned for tests to read its lines)."""
    fig, ax = plt.subplots(figsize=(6, 4))
    for name, v in values.items():
        v = np.sort(np.asarray(v, dtype=float))
        v = v[np.isfinite(v)]
        total = max(len(v), int((totals or {}).get(name, len(v))))
        missing = f", {total - len(v)} of {total} unfinished" if total > len(v) else ""
        if len(v):
            ax.step(v, np.arange(1, len(v) + 1) / total, where="post",
                    label=f"{name} ({stat_name} {v.mean():.2f}{unit}{missing})")
        elif total:
            ax.plot([], [], label=f"{name} (none of {total} finished)")
    if logx:
        ax.set_xscale("log")
        readable_log(ax.xaxis)
    ax.set_xlabel(xlabel)
    ax.set_ylabel("fraction of jobs")
    ax.set_ylim(0, 1.02)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(loc="lower right", fontsize="small")
    if title:
        ax.set_title(title)
    return fig


def plot_bars(panels: dict[str, dict[str, tuple[float, float]]], path: str | Path, title: str = "") -> Path:
    """One panel per metric (its name is the y label, with unit); one bar per label, with error bars.

    panels[metric][label] = (mean, std); a NaN mean draws an empty slot marked 'n/a'. Each value is
    written above its error bar, not across it."""
    return _save(bars_figure(panels, title), path)


def bars_figure(panels: dict[str, dict[str, tuple[float, float]]], title: str = ""):
    """The figure of plot_bars (returned for tests to read its labels)."""
    fig, axes = plt.subplots(1, len(panels), figsize=(max(6.5, 4.0 * len(panels)), 4.0), squeeze=False)
    for ax, (metric, bars) in zip(axes[0], panels.items()):
        labels = list(bars)
        means = np.array([bars[k][0] for k in labels], float)
        errs = np.nan_to_num(np.array([bars[k][1] for k in labels], float))
        colors = [f"C{i}" for i in range(len(labels))]
        ax.bar(range(len(labels)), np.nan_to_num(means), yerr=errs, color=colors, capsize=3)
        for i, m in enumerate(means):
            text = "n/a" if np.isnan(m) else f"{m:,.0f}" if abs(m) >= 1000 else f"{m:.3g}"
            top = 0 if np.isnan(m) else m + errs[i] if m >= 0 else m
            ax.annotate(text, (i, top), xytext=(0, 2), textcoords="offset points", ha="center", va="bottom",
                        fontsize="small")
        ax.margins(y=0.12)
        ax.set_xticks(range(len(labels)), labels, rotation=30, ha="right", fontsize="small")
        ax.set_ylabel(metric)
        ax.grid(True, axis="y", alpha=0.3)
    if title:
        fig.suptitle(title, fontsize="medium")
    return fig


def plot_share_over_time(times: np.ndarray, shares: np.ndarray, job_labels: list[str], groups: list[str],
                         path: str | Path, totals: dict[str, np.ndarray] | None = None, title: str = "",
                         xlabel: str = "time (timesteps)") -> Path:
    """Paper Figs 12-13: each job's fraction of total effective throughput over time, stacked
    and coloured by entity (shades within an entity); optionally total throughput per variant.

    shares: (len(times), jobs), rows summing to 1 where anything runs; groups[i]: job i's entity.
    """
    ncols = 2 if totals else 1
    fig, axes = plt.subplots(1, ncols, figsize=(6.2 * ncols, 4.2), squeeze=False)
    ax = axes[0][0]
    entities = list(dict.fromkeys(groups))
    cmaps = ["Blues", "Oranges", "Greens", "Purples", "Reds", "Greys"]
    colors = []
    for i, g in enumerate(groups):
        members = [k for k, h in enumerate(groups) if h == g]
        rank = members.index(i)
        cmap = plt.get_cmap(cmaps[entities.index(g) % len(cmaps)])
        colors.append(cmap(0.35 + 0.55 * rank / max(len(members) - 1, 1)))
    ax.stackplot(times, np.asarray(shares, float).T, colors=colors, step="post", linewidth=0.3, edgecolor="white")
    handles = [plt.Rectangle((0, 0), 1, 1, color=plt.get_cmap(cmaps[i % len(cmaps)])(0.7))
               for i in range(len(entities))]
    ax.legend(handles, entities, title="entity", fontsize="small", loc="upper right")
    ax.set_xlabel(xlabel)
    ax.set_ylabel("fraction of total effective throughput")
    ax.set_ylim(0, 1.0)
    ax.set_xlim(times[0], times[-1])
    ax.set_title(f"share of each of {len(job_labels)} jobs")
    if totals:
        ax2 = axes[0][1]
        for name, v in totals.items():
            ax2.step(times, v, where="post", label=name)
        ax2.set_xlabel(xlabel)
        ax2.set_ylabel("total effective throughput (normalized)")
        ax2.grid(True, alpha=0.3)
        ax2.legend(fontsize="small")
        ax2.set_title("total throughput")
    if title:
        fig.suptitle(title)
    return _save(fig, path)


def plot_grouped_bars(groups: dict[str, dict[str, float]], path: str | Path, xlabel: str, ylabel: str,
                      title: str = "", marks: dict[str, set[str]] | None = None) -> Path:
    """Bars grouped by x label (groups[x][series] = value), one color per series.

    `marks[x]` names series whose bar at x is hatched (e.g. runs marked unstable)."""
    xs = list(groups)
    names = list(dict.fromkeys(n for d in groups.values() for n in d))
    width = 0.8 / max(len(names), 1)
    fig, ax = plt.subplots(figsize=(max(5, 1.6 * len(xs) * max(len(names), 1) / 2), 4))
    for i, name in enumerate(names):
        pos = np.arange(len(xs)) + (i - (len(names) - 1) / 2) * width
        vals = [groups[x].get(name, np.nan) for x in xs]
        bars = ax.bar(pos, vals, width, label=name)
        for x, b in zip(xs, bars):
            if marks and name in marks.get(x, set()):
                b.set_hatch("//")
        for p, v in zip(pos, vals):
            if np.isfinite(v):
                ax.annotate(f"{v:.1f}", (p, v), ha="center", va="bottom", fontsize="x-small")
    ax.set_xticks(np.arange(len(xs)), xs)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.grid(True, axis="y", alpha=0.3)
    ax.legend(fontsize="small")
    if title:
        ax.set_title(title, fontsize="medium")
    return _save(fig, path)
