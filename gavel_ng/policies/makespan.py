"""Makespan: finish the whole batch as early as possible."""

from __future__ import annotations

import math

from .common import require_remaining
from .problem import Problem
from .registry import policy


@policy("makespan", "minimize max_m R_m / thr_m (solved as one LP: maximize min_m thr_m / R_m)",
        aliases=("min_total_duration_perf",), agnostic_aliases=("min_total_duration",))
def makespan(p: Problem):
    """min max duration == max min (thr / steps): one LP instead of a bisection."""
    R = require_remaining(p, "makespan")
    active = R > 0
    if not active.any():
        return p.maximize(p.thr * 0.0)
    return p.maximize_min((p.thr / R.clip(min=1e-300))[active],
                          report=lambda t: 1.0 / t if t > 0 else math.inf)
