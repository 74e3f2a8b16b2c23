"""Plots written as PNG files (matplotlib, no display needed)."""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
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
    fig.tight_layout()
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def plot_jct_cdf(jcts_hours: dict[str, np.ndarray], path: str | Path, title: str = "") -> Path:
    """CDF of job completion times (hours, log scale), one line per run."""
    fig, ax = plt.subplots(figsize=(5.5, 3.8))
    for name, values in jcts_hours.items():
        v = np.sort(np.asarray(values, dtype=float))
        if len(v):
            ax.step(v, np.arange(1, len(v) + 1) / len(v), where="post",
                    label=f"{name} (mean {v.mean():.1f} h)")
    ax.set_xscale("log")
    ax.set_xlabel("job completion time (hours)")
    ax.set_ylabel("fraction of jobs")
    ax.set_ylim(0, 1.02)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(loc="lower right", fontsize="small")
    if title:
        ax.set_title(title)
    fig.tight_layout()
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path
