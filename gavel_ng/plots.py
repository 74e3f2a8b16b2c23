"""Plots written as PNG files (matplotlib, no display needed)."""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import matplotlib.ticker  # noqa: E402
import numpy as np  # noqa: E402

from .allocation import Allocation  # noqa: E402


def plot_allocation(allocations: Allocation | dict[str, Allocation], path: str | Path, title: str = "") -> Path:
    """Stacked bars of each job's time share per worker type; one panel per allocation."""
    if isinstance(allocations, Allocation):
        allocations = {"": allocations}
    fig, axes = plt.subplots(1, len(allocations), figsize=(max(5, 4 * len(allocations)), 3.6),
                             squeeze=False, sharey=True)
    for ax, (name, alloc) in zip(axes[0], allocations.items()):
        labels = [Allocation.label(r) for r in alloc.rows]
        bottom = np.zeros(len(labels))
        for j, w in enumerate(alloc.worker_types):
            ax.bar(labels, alloc.values[:, j], bottom=bottom, label=w)
            bottom += alloc.values[:, j]
        ax.set_title(name)
        ax.set_xlabel("job")
        ax.set_ylim(0, 1.05)
        if max(len(s) for s in labels) * len(labels) > 40:
            ax.set_xticks(range(len(labels)), labels, rotation=40, ha="right", fontsize="small")
    axes[0][0].set_ylabel("fraction of wall-clock time")
    axes[0][-1].legend(title="worker type", loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize="small")
    if title:
        fig.suptitle(title)
    return _save(fig, path)


def plot_jct_cdf(jcts_hours: dict[str, np.ndarray], path: str | Path, title: str = "") -> Path:
    """CDF of job completion times (hours, log scale), one line per run."""
    return plot_cdf(jcts_hours, path, "job completion time (hours)", title=title, unit=" h")


def _save(fig, path: str | Path) -> Path:
    fig.tight_layout()
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def plot_metric_vs_x(series: dict[str, tuple], path: str | Path, xlabel: str, ylabel: str, title: str = "",
                     logy: bool = False, unstable: dict[str, np.ndarray] | None = None) -> Path:
    """Mean line with a band (e.g. min..max or +-1 std over seeds), one series per label.

    series[label] = (x, mean, low, high). `unstable[label]` marks x values whose runs hit a
    cap (the queue grew without bound): they are drawn hollow, since their mean is a floor.
    """
    fig, ax = plt.subplots(figsize=(6, 4))
    for label, (x, mean, low, high) in series.items():
        x, mean = np.asarray(x, float), np.asarray(mean, float)
        (line,) = ax.plot(x, mean, marker="o", label=label)
        if low is not None and high is not None:
            ax.fill_between(x, np.asarray(low, float), np.asarray(high, float), color=line.get_color(), alpha=0.2)
        if unstable and label in unstable and np.any(unstable[label]):
            bad = np.asarray(unstable[label], bool)
            ax.plot(x[bad], mean[bad], "o", mfc="white", mec=line.get_color())
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    if logy:
        ax.set_yscale("log")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize="small")
    if title:
        ax.set_title(title, fontsize="medium")
    return _save(fig, path)


def plot_cdf(values: dict[str, np.ndarray], path: str | Path, xlabel: str, title: str = "", logx: bool = True,
             stat_name: str = "mean", unit: str = "") -> Path:
    """Empirical CDFs, one line per label, each labelled with its mean."""
    fig, ax = plt.subplots(figsize=(6, 4))
    for name, v in values.items():
        v = np.sort(np.asarray(v, dtype=float))
        v = v[np.isfinite(v)]
        if len(v):
            ax.step(v, np.arange(1, len(v) + 1) / len(v), where="post",
                    label=f"{name} ({stat_name} {v.mean():.2f}{unit})")
    if logx:
        ax.set_xscale("log")
        ax.xaxis.set_major_locator(matplotlib.ticker.LogLocator(subs=(1.0, 2.0, 5.0)))
        ax.xaxis.set_major_formatter(matplotlib.ticker.FuncFormatter(lambda v, _: f"{v:g}"))
        ax.xaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())
    ax.set_xlabel(xlabel)
    ax.set_ylabel("fraction of jobs")
    ax.set_ylim(0, 1.02)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(loc="lower right", fontsize="small")
    if title:
        ax.set_title(title)
    return _save(fig, path)


def plot_bars(panels: dict[str, dict[str, tuple[float, float]]], path: str | Path, title: str = "") -> Path:
    """One panel per metric (its name is the y label, with unit); one bar per label, with error bars.

    panels[metric][label] = (mean, std); a NaN mean draws an empty slot marked 'n/a'.
    """
    fig, axes = plt.subplots(1, len(panels), figsize=(max(6.5, 4.0 * len(panels)), 4.0), squeeze=False)
    for ax, (metric, bars) in zip(axes[0], panels.items()):
        labels = list(bars)
        means = np.array([bars[k][0] for k in labels], float)
        errs = np.array([bars[k][1] for k in labels], float)
        colors = [f"C{i}" for i in range(len(labels))]
        ax.bar(range(len(labels)), np.nan_to_num(means), yerr=np.nan_to_num(errs), color=colors, capsize=3)
        for i, m in enumerate(means):
            text = "n/a" if np.isnan(m) else f"{m:,.0f}" if abs(m) >= 1000 else f"{m:.3g}"
            ax.annotate(text, (i, 0 if np.isnan(m) else m), ha="center", va="bottom", fontsize="small")
        ax.set_xticks(range(len(labels)), labels, rotation=30, ha="right", fontsize="small")
        ax.set_ylabel(metric)
        ax.grid(True, axis="y", alpha=0.3)
    if title:
        fig.suptitle(title, fontsize="medium")
    return _save(fig, path)


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
