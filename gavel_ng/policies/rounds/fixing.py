"""The configuration 0/1 program's exact optimum from its fractional relaxation, without a MIP solver.

`configurations.assign` solves the LP relaxation of "at most one column per job, GPUs of each type
within capacity" and most often gets a 0/1 point. When it does not, the relaxation's bound sits
about 1e-6 to 1e-5 (relative) above the 0/1 optimum. Branching on LP bounds closes such a gap only
after hundreds of nodes (the jobs are near ties, so each branch moves the fractional part onto
another job); HiGHS's MIP closes it at the root with cuts, but spends 20-90 ms a program setting
up its search, which was half of an adaptive simulation's time on Sia's cluster.

What is done instead. Take any duals y >= 0 of the relaxation (HiGHS's optimal ones are the
tightest) and the reduced costs d = c - A'y. Then every 0/1 point x of the program has

    c @ x = L - loss(x),   L = y @ b + sum(max(d, 0)),
    loss(x) = sum_{d>0} d (1 - x) + sum_{d<0} |d| x + sum_jobs y_job (1 - row) + sum_types y_type idle GPUs,

a sum of non-negative terms. A point whose loss is below some budget has every term below it:
variables whose reduced cost alone exceeds the budget are fixed, jobs whose row dual does are
assigned, and what is left is a small multiple-choice knapsack that a dynamic program over the
GPUs left per type solves exactly (GPU counts are whole). If the best point it finds has a loss
below the budget, no point outside the restricted set can beat it: it is optimal. So the search
starts from a small budget and widens it (at most to the loss of the incumbent: the relaxation
rounded down, then filled greedily), which keeps the free set, and the dynamic program, small.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

DP_LIMIT = 4e6   # state updates one dynamic program may take (a few ms of numpy) before the caller's MIP
FIRST_BUDGET = 1 / 64   # the first budget, as a fraction of the greedy incumbent's loss
WIDEN = 8.0
INTEGRAL_TOL = 1e-7   # an LP value this close to 0 or 1 counts as integral


def exact_by_fixing(x_lp: np.ndarray, duals: np.ndarray, c: np.ndarray, A: sp.csr_matrix, ub: np.ndarray,
                    vr: np.ndarray, g: np.ndarray, pool: np.ndarray, cap: np.ndarray,
                    limit: float = DP_LIMIT) -> np.ndarray | None:
    """The chosen variables (bool per column of A) of max c @ x over the 0/1 points of
    ``A x <= ub`` (rows: one per job, then GPUs per type), given the relaxation's optimum `x_lp`
    and its row `duals`; optimal up to rounding error (module docstring). None when the GPU counts
    are not whole or a dynamic program would exceed `limit` state updates: the caller then runs a MIP."""
    if not (np.all(g == np.round(g)) and np.all(np.asarray(cap) == np.round(cap))):
        return None
    y = np.maximum(np.asarray(duals, float), 0.0)
    d = c - A.T @ y
    bound = float(y @ ub + np.maximum(d, 0.0).sum())
    eps = 1e-12 * max(abs(bound), 1.0)   # rounding in the sums: fix a little less than exactly
    best = greedy_fill(x_lp > 1 - INTEGRAL_TOL, c, vr, g, pool, cap)
    best_val = float(c[best].sum())
    budget = (bound - best_val) * FIRST_BUDGET
    while True:
        budget = min(budget, bound - best_val)
        found = _restricted_optimum(budget + eps, y, d, c, vr, g, pool, cap, limit)
        if found is False:
            return None
        if found is not None and float(c[found].sum()) > best_val:
            best, best_val = found, float(c[found].sum())
        if bound - best_val <= budget:   # every point better than `best` was in the restricted set
            return best
        budget *= WIDEN


def _restricted_optimum(budget: float, y, d, c, vr, g, pool, cap, limit):
    """The best 0/1 point among those whose every loss term is below `budget`: its variables, None
    when there is none, False when the dynamic program would exceed `limit`."""
    K = len(cap)
    M = len(y) - K
    one = d >= budget                    # leaving such a variable at 0 alone loses the budget
    allowed = one | (d > -budget)        # ... and so does setting such a variable to 1
    if np.bincount(vr[one], minlength=M).max(initial=0) > 1:
        return None
    fixed_job = np.zeros(M, bool)
    fixed_job[vr[one]] = True
    free = allowed & ~fixed_job[vr]
    rest = np.asarray(cap, float) - np.bincount(pool[one], weights=g[one], minlength=K)
    if (rest < 0).any():
        return None
    jobs = np.unique(vr[free])
    widest = np.zeros((M, K))   # each job's most GPUs per type among its free variables
    np.maximum.at(widest, (vr[free], pool[free]), g[free])
    shape = tuple(int(v) + 1 for v in np.minimum(rest, widest.sum(axis=0)))
    if float(np.prod(shape)) * (free.sum() + len(jobs)) > limit:
        return False
    picks = knapsack_dp(jobs, y[jobs] >= budget, free, c, vr, g, pool, shape)
    if picks is None:
        return None
    out = one.copy()
    out[picks] = True
    return out


def knapsack_dp(jobs, must, free, c, vr, g, pool, shape) -> np.ndarray | None:
    """At most one `free` variable per job of `jobs` (exactly one where `must`) of most value within
    ``shape`` (GPUs left per type, plus one): the chosen variables' indices, None when nothing fits.
    F[s] is the best value of the jobs so far using exactly s GPUs per type; ties keep the earlier
    choice (not taking the job, then the lower index), so the result is deterministic."""
    F = np.full(shape, -np.inf)
    F[(0,) * len(shape)] = 0.0
    picks = []
    for m, need_one in zip(jobs, must):
        new = np.full(shape, -np.inf) if need_one else F.copy()
        pick = np.full(shape, -1, np.int32)
        for i in np.flatnonzero(free & (vr == m)):
            t, k = int(pool[i]), int(g[i])
            if k >= shape[t]:
                continue
            dst = tuple(slice(k, None) if a == t else slice(None) for a in range(len(shape)))
            src = tuple(slice(None, shape[a] - k) if a == t else slice(None) for a in range(len(shape)))
            cand = F[src] + c[i]
            better = cand > new[dst]
            new[dst][better] = cand[better]
            pick[dst][better] = i
        F = new
        picks.append(pick)
    if not np.isfinite(F).any():
        return None
    state = list(np.unravel_index(int(np.argmax(F)), shape))
    out = []
    for pick in reversed(picks):
        i = int(pick[tuple(state)])
        if i >= 0:
            out.append(i)
            state[int(pool[i])] -= int(g[i])
    return np.array(out, np.int64)


def greedy_fill(on: np.ndarray, c: np.ndarray, vr: np.ndarray, g: np.ndarray, pool: np.ndarray,
                cap: np.ndarray) -> np.ndarray:
    """`on` (feasible) plus, by decreasing value, every variable of a job without one that still fits."""
    on = on.copy()
    free = np.asarray(cap, float) - np.bincount(pool[on], weights=g[on], minlength=len(cap))
    taken = np.zeros(vr.max() + 1, bool)
    taken[vr[on]] = True
    open_ = np.flatnonzero(~taken[vr] & (g <= free[pool]))   # free only shrinks: the rest never fit
    for i in open_[np.argsort(-c[open_], kind="stable")]:
        if not taken[vr[i]] and g[i] <= free[pool[i]]:
            on[i] = True
            taken[vr[i]] = True
            free[pool[i]] -= g[i]
    return on
