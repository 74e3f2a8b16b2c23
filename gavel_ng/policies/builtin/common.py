"""Small helpers shared by several policies."""

from __future__ import annotations

import numpy as np

from ...errors import InputError
from ..lp.problem import Problem


def require_remaining(p: Problem, policy: str) -> np.ndarray:
    """Steps remaining, which duration-based policies cannot do without."""
    R = p.input.steps_remaining
    bad = ~np.isfinite(R)
    if bad.any():
        job = p.input.job_ids[int(np.argmax(bad))]
        raise InputError(f"jobs[{job}].steps_remaining", "missing", f"policy {policy} needs every job's steps")
    return R


def require_prices(p: Problem, policy: str) -> np.ndarray:
    if p.input.prices is None:
        raise InputError("prices", None, f"policy {policy} needs a $/GPU-hour price for every worker type")
    return p.input.prices


def ranks(order_by: np.ndarray) -> np.ndarray:
    """0 for the smallest value; ties keep job order."""
    order = np.lexsort((np.arange(len(order_by)), order_by))
    r = np.empty(len(order_by), dtype=float)
    r[order] = np.arange(len(order_by))
    return r
