"""Order-based policies: FIFO and shortest job first, as rank-weighted LPs (Gavel §4.2)."""

from __future__ import annotations

from ..lp.problem import Problem
from ..registry import policy
from .common import ranks, require_remaining


def _rank_weighted(p: Problem, order_by) -> object:
    """Jobs ranked by `order_by` (smallest first), each weighted by M - its rank."""
    M = p.num_jobs
    weight = (M - ranks(order_by)) / p.thr_fastest
    return p.maximize(p.thr * weight)


@policy("fifo", "maximize sum_m (M - rank_m) thr_m / thr_fastest_m, ranked by arrival",
        aliases=("fifo_perf",), agnostic_aliases=())
def fifo(p: Problem):
    """Earlier jobs first, each on its fastest type when it can get it."""
    return _rank_weighted(p, -p.input.time_since_arrival)


@policy("sjf", "maximize sum_m (M - rank_m) thr_m / thr_fastest_m, ranked by remaining time on the fastest type")
def sjf(p: Problem):
    """Shortest remaining job first, measured on each job's fastest type."""
    R = require_remaining(p, "sjf")
    return _rank_weighted(p, R / p.thr_fastest)
