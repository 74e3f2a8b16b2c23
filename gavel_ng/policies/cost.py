"""Throughput and cost policies (Gavel §4.2)."""

from __future__ import annotations

import logging

import numpy as np

from .common import require_prices, require_remaining
from .problem import Problem
from .registry import policy

log = logging.getLogger(__name__)


@policy("max_throughput", "maximize sum_m thr_m / thr_fastest_m", aliases=("max_sum_throughput_perf",))
def max_throughput(p: Problem):
    """Total normalized throughput: raw steps/s of different models do not add up."""
    return p.maximize(p.thr / p.thr_fastest)


@policy("min_cost", "maximize sum_m thr_m / thr_fastest_m per $ spent (linear-fractional, one LP)",
        aliases=("max_sum_throughput_normalized_by_cost_perf",))
def min_cost(p: Problem):
    """Most normalized work per dollar; a pair on one GPU pays for that GPU once."""
    prices = require_prices(p, "min_cost")
    return p.maximize_ratio(p.thr / p.thr_fastest, p.cost_per_hour(prices))


def required_rates(p: Problem) -> np.ndarray:
    """Steps/s each job needs to meet its SLO (0 without one, inf once the deadline passed)."""
    inp = p.input
    has = np.isfinite(inp.slo_s)
    if not has.any():
        return np.zeros(p.num_jobs)
    R = require_remaining(p, "min_cost_slo")
    left = inp.slo_s - inp.time_since_arrival
    with np.errstate(divide="ignore", invalid="ignore"):
        need = np.where(left > 0, R / left, np.where(R > 0, np.inf, 0.0))
    return np.where(has, need, 0.0)


def _slos_feasible(p: Problem, need: np.ndarray, keep: np.ndarray) -> bool:
    idx = np.flatnonzero(keep & (need > 0))
    if len(idx) == 0:
        return True
    q = Problem(p.input)
    sol = q.solve(q.maximize_min((q.thr / need.clip(min=1e-300))[idx], fill=False))
    return sol.ok and sol.objective >= 1 - 1e-7


def _cost_ratio(p: Problem, x: np.ndarray) -> float:
    return p.maximize_ratio(p.thr / p.thr_fastest, p.cost_per_hour(require_prices(p, "min_cost_slo"))).value(x)


@policy("min_cost_slo", "min_cost subject to thr_m >= R_m / (SLO_m - t_m) for jobs with an SLO",
        aliases=("max_sum_throughput_normalized_by_cost_perf_SLOs",), evaluate=_cost_ratio)
def min_cost_slo(p: Problem):
    """Cheapest work per dollar that still meets deadlines; names the SLOs it cannot meet."""
    prices = require_prices(p, "min_cost_slo")
    need = required_rates(p)
    dropped = need > p.thr_fastest * (1 + 1e-9)   # cannot be met even alone on the fastest type
    if not _slos_feasible(p, need, ~dropped):
        # drop the most demanding SLOs (in fastest-GPU time) until the rest fit: bisect on how many
        demand = np.where(~dropped & (need > 0), need / p.thr_fastest, -1.0)
        order = np.argsort(-demand)
        lo, hi = 0, int((demand > 0).sum())
        while lo < hi:
            mid = (lo + hi) // 2
            keep = ~dropped
            keep[order[:mid]] = False
            lo, hi = (lo, mid) if _slos_feasible(p, need, keep) else (mid + 1, hi)
        dropped[order[:lo]] = True
    keep = ~dropped & (need > 0)
    if keep.any():
        p.add_constraint(p.thr[keep] >= need[keep])
    sol = p.solve(p.maximize_ratio(p.thr / p.thr_fastest, p.cost_per_hour(prices)))
    if dropped.any():
        names = [p.input.job_ids[i] for i in np.flatnonzero(dropped)]
        template = "SLOs cannot be met for %d job(s): %s; they run without their SLO constraint"
        sol.warnings.append(template % (len(names), ", ".join(names)))
        log.warning(template, len(names), ", ".join(names), extra={"jobs": names})   # one kind, see gavel_ng.logs
    return sol
