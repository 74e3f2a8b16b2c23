"""Throughput and cost policies (Gavel §4.2).

The cost objective. The paper writes "minimize cost" as one ratio over the whole cluster,
`max sum_m thr_m / sum_m sum_j cost_j X_mj`. That ratio does not change when every
allocation is scaled by the same factor, so it does not reward work: its optimum is any
allocation to the jobs and types with the best throughput per dollar, and a simplex
vertex gives every other job nothing. In a simulation those jobs starve (issue 17:
`min_cost` finished 124 of 300 jobs before the time cap, `min_cost_slo` 292). Gavel's
prototype, which produced the paper's numbers, solves something else
(`scheduler/policies/max_sum_throughput.py`): one linear program,
`max sum_m sum_j T_mj / cost_j * X_mj`, throughput per dollar summed per (job, type). A
job's cost to finish is its steps times `cost_j / T_mj` on type j, so each term rewards
the type where the job's work is cheapest, and every job gets a share while GPUs are
free. gavel_ng does the same over *normalized* throughput (`T_mj / thr_fastest_m`, as in
`max_throughput`: raw steps/s of different models do not add up). Without contention
both choose the same type for every job; under contention ours weighs jobs equally
instead of by their step rate. A pair of jobs on one GPU pays for that GPU once: both
members' throughputs count against one price.

SLOs (`min_cost_slo`). A job with an SLO must reach `thr_m >= R_m / (SLO_m - t_m)`. The
round-based mechanism delivers an allocation only up to a round or two (and a re-solve
that moves a job to a cheaper type leaves it running there for a while: the mechanism
remembers the fast time it already had), so the constraint asks for the rate that
finishes with `SLO_SLACK` of the time left, and at least `SLO_MARGIN_S`, to spare, and never
more than the job's best (alone, all the time, on its fastest type): an SLO that can still
be met is then met at full speed at worst. An SLO that cannot be met any more (the
deadline passed, or even that best rate is too slow) is dropped; so are, when the
remaining SLOs together do not fit in the cluster, the most demanding ones until the rest
fit. A job whose SLO was dropped is scheduled like a job without one (its cheapest
progress); it is not starved. The policy names those jobs in its solution (`Solution.slo_dropped`:
the simulator's per-job `slo_dropped` column of jobs.csv and the summary's `slo_dropped` count)
and in one warning kind (`SLO_DROPPED`), for people.
"""

from __future__ import annotations

import logging

import numpy as np
import scipy.sparse as sp

from ...allocation import AllocationError
from ..lp.affine import Affine
from ..lp.problem import Problem
from ..registry import policy
from .common import require_prices, require_remaining

log = logging.getLogger(__name__)

SLO_SLACK = 0.1        # aim to finish with this share of the time left to the deadline to spare,
SLO_MARGIN_S = 720.0   # and at least this much (two of Gavel's 6-minute rounds)
SLO_DROPPED = "SLOs cannot be met for %d job(s): %s; they run without their SLO constraint"


@policy("max_throughput", "maximize sum_m thr_m / thr_fastest_m", aliases=("max_sum_throughput_perf",))
def max_throughput(p: Problem):
    """Total normalized throughput: raw steps/s of different models do not add up."""
    return p.maximize(p.thr / p.thr_fastest)


def raw_throughput(p: Problem, x: np.ndarray) -> float:
    """gavel_sia's objective at x: the sum of raw steps/s."""
    return p.maximize(p.thr).value(x)


@policy("gavel_sia", "maximize sum_m thr_m over raw steps/s (Sia's Gavel+TunedJobs baseline)", mechanism="sia_gavel",
        evaluate=raw_throughput)
def gavel_sia(p: Problem):
    """Gavel as Sia's artifact runs it (its Gavel+TunedJobs, SOSP'23 Table 3): max-sum-throughput over raw
    steps/s, neither normalized per job nor weighted by GPU count (its simulator_config.py and
    policies/max_sum_throughput.py, ../shared/profiles/sia-artifact/README.md). Raw steps/s of different
    models do not add up to anything meaningful (`max_throughput` normalizes them); this objective favours
    jobs whose steps are short, which is what Sia compared against.

    The artifact solves this LP with ECOS, an interior-point solver, and rounds its answer to 5 decimals.
    Identical jobs (a workload file holds dozens of one task at one GPU count) make the optimum a face,
    not a vertex: an interior-point solver returns a point inside it, every such job with an equal share,
    where the simplex gives some of them all and the others nothing. Under Gavel's priorities equal shares
    become time slicing, so the solver is part of the baseline: HiGHS's interior-point method without
    crossover gives that point here (rounded to 5 decimals; down where rounding would break a constraint).
    Its round mechanism (`mechanism="sia_gavel"`) is the artifact's too."""
    sol = p.solve(p.maximize(p.thr), "highs-ipm-interior")
    if sol.ok:
        sol.x = _five_decimals(p, np.asarray(sol.x, float))
        sol.allocation = p.allocation(sol.x)
        sol.objective = raw_throughput(p, sol.x)
    return sol


def _five_decimals(p: Problem, x: np.ndarray) -> np.ndarray:
    """x rounded to 5 decimals as the artifact does; where that breaks a constraint (a pool's GPUs summed
    over rounded-up shares), rounded down instead, which cannot (every constraint is <= with coefficients
    >= 0)."""
    near = np.clip(np.round(x, 5), 0.0, 1.0)
    try:
        p.allocation(near).check()
        return near
    except AllocationError:
        return np.clip(np.floor(x * 1e5) / 1e5, 0.0, 1.0)


def work_per_dollar(p: Problem, prices: np.ndarray) -> Affine:
    """Per job: sum over its variables of (normalized throughput there) / ($/hour of that variable).

    A variable's $/hour is its GPUs' price (`Problem.cost_per_hour` at x = 1): a pair row pays
    for its GPUs once, so its members' throughputs share one price."""
    cost = np.asarray(p.cost_per_hour(prices).A.todense()).ravel()
    positive = cost[cost > 0]
    floor = 1e-9 * (positive.max() if len(positive) else 1.0)    # a free GPU: very cheap, not a division by 0
    scaled = sp.csr_matrix(p.thr.A.multiply(1.0 / np.maximum(cost, floor)[None, :]))
    fastest = np.where(p.thr_fastest > 0, p.thr_fastest, 1.0)
    return Affine(p, scaled) / fastest


def _work_per_dollar_total(p: Problem, x: np.ndarray) -> float:
    return float(work_per_dollar(p, require_prices(p, "min_cost")).value(x).sum())


@policy("min_cost", "maximize sum_m sum_j (thr_mj / thr_fastest_m) / price_j (normalized work per $, one LP)",
        aliases=("max_sum_throughput_normalized_by_cost_perf",), evaluate=_work_per_dollar_total, idle_aware=True)
def min_cost(p: Problem):
    """Every job's work where it is cheapest; see the module docstring for why not the paper's ratio."""
    return p.maximize(work_per_dollar(p, require_prices(p, "min_cost")))


def slo_rates(p: Problem) -> tuple[np.ndarray, np.ndarray]:
    """Per job: the steps/s its SLO constraint asks for (0 without one) and whether the SLO is lost.

    Asked for: the rate that finishes with SLO_SLACK of the time left (at least SLO_MARGIN_S) to
    spare, at most the job's best rate. Lost: the deadline passed, or even the best rate cannot
    finish in time."""
    inp = p.input
    has = np.isfinite(inp.slo_s)
    if not has.any():
        return np.zeros(p.num_jobs), np.zeros(p.num_jobs, bool)
    R = require_remaining(p, "min_cost_slo")
    best = p.thr_fastest
    left = np.where(has, inp.slo_s - inp.time_since_arrival, np.inf)
    active = has & (R > 0)
    with np.errstate(divide="ignore", invalid="ignore"):
        exact = np.where(left > 0, R / left, np.inf)
        lost = active & ((left <= 0) | (exact > best * (1 + 1e-9)))
        aim = left - np.maximum(SLO_SLACK * left, SLO_MARGIN_S)
        rate = np.where(active & ~lost, np.where(aim > 0, np.minimum(R / aim, best), best), 0.0)
    return rate, lost


def _fits(p: Problem, rate: np.ndarray, keep: np.ndarray) -> bool:
    """Can every kept job have its rate at once?"""
    idx = np.flatnonzero(keep & (rate > 0))
    if len(idx) == 0:
        return True
    q = Problem(p.input)
    sol = q.solve(q.maximize_min((q.thr / rate.clip(min=1e-300))[idx], fill=False))
    return sol.ok and sol.objective >= 1 - 1e-7


def slo_constraints(p: Problem) -> tuple[np.ndarray, np.ndarray]:
    """The rates to require and the jobs whose SLO is dropped (lost, or not fitting beside the others).

    When the SLOs that can still be met do not fit together, the most demanding ones (in
    fastest-GPU time) go first: bisection on how many."""
    rate, dropped = slo_rates(p)
    keep = (rate > 0) & ~dropped
    if not _fits(p, rate, keep):
        demand = np.where(keep, rate / np.where(p.thr_fastest > 0, p.thr_fastest, 1.0), -1.0)
        order = np.argsort(-demand, kind="stable")
        lo, hi = 0, int(keep.sum())
        while lo < hi:
            mid = (lo + hi) // 2
            trial = keep.copy()
            trial[order[:mid]] = False
            lo, hi = (lo, mid) if _fits(p, rate, trial) else (mid + 1, hi)
        dropped[order[:lo]] = True
        keep[order[:lo]] = False
    return np.where(keep, rate, 0.0), dropped


@policy("min_cost_slo", "min_cost subject to thr_m >= R_m / ((1 - slack) (SLO_m - t_m)) for SLOs that can be met",
        aliases=("max_sum_throughput_normalized_by_cost_perf_SLOs",), evaluate=_work_per_dollar_total,
        idle_aware=True)
def min_cost_slo(p: Problem):
    """Cheapest work that still meets deadlines; names the jobs whose SLO it drops."""
    prices = require_prices(p, "min_cost_slo")
    rate, dropped = slo_constraints(p)
    keep = rate > 0
    if keep.any():
        p.add_constraint(p.thr[keep] >= rate[keep], name="SLO rates")
    sol = p.solve(p.maximize(work_per_dollar(p, prices)))
    if dropped.any():
        names = [p.input.job_ids[i] for i in np.flatnonzero(dropped)]
        sol.slo_dropped = names   # as data (the simulator's slo_dropped), the warning for people
        said = ", ".join(map(str, names))
        sol.warnings.append(SLO_DROPPED % (len(names), said))
        log.warning(SLO_DROPPED, len(names), said, extra={"jobs": names})   # one kind, see gavel_ng.logs
    return sol
