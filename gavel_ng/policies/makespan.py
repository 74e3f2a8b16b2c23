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
    # thr / R is tiny (1e-5 for a day-long job): scaled to O(thr) so HiGHS's absolute
    # tolerances do not cost the optimum a relative 1e-5
    scale = float(R[active].max())
    return p.maximize_min((p.thr * (scale / R.clip(min=1e-300)))[active],
                          report=lambda t: scale / t if t > 0 else math.inf)
