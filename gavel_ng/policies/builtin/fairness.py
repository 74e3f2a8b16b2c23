"""Least attained service (weighted max-min fairness) and the isolated baseline."""

from __future__ import annotations

import time

import numpy as np

from ..lp.problem import Problem
from ..lp.solving import finish
from ..registry import policy


@policy("las", "maximize min_m sf_m thr_m / (w_m thr_equal_m)",
        aliases=("max_min_fairness_perf",), agnostic_aliases=("max_min_fairness",), symmetric=True,
        per_job=True)
def las(p: Problem):
    """Weighted max-min fairness over normalized effective throughput (Gavel §4.1), one LP as
    in the paper; `las_pareto` adds a second phase (see there for when it helps)."""
    return p.maximize_min(p.normalized_thr / p.input.weights)


@policy("las_pareto", "las, then (its minimum held) maximize sum_m sf_m thr_m / thr_equal_m", symmetric=True,
        per_job=True)
def las_pareto(p: Problem):
    """LAS made Pareto-efficient: the max-min LP pins only the bottleneck, and the vertex the
    simplex returns may park every other job at that level too (on slower types, in pairs).
    Measured (experiments/README.md): better average JCT on single-GPU traces, worse with
    space sharing on the multi-GPU trace, so it is not `las`'s default."""
    return p.maximize_min(p.normalized_thr / p.input.weights, then=p.normalized_thr)


def _min_normalized(p: Problem, x: np.ndarray) -> float:
    v = (p.normalized_thr / p.input.weights).value(x)
    return float(v.min()) if len(v) else 0.0


@policy("isolated", "X_isolated: every job gets 1/n of every worker type", evaluate=_min_normalized,
        agnostic=False)
def isolated(p: Problem):
    """No optimization: the static equal split that sharing incentive is measured against."""
    return finish(p, None, p.fallback_x(), "none", "optimal", time.perf_counter())
