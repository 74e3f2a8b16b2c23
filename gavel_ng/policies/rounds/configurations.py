"""Whole configurations, one per job: the 0/1 program behind round policies that pick columns.

`assign` gives each job at most one column (a worker type, or a (type, GPU count)
configuration: gavel_ng.columns) maximizing a sum of per-(job, column) values within every
type's GPUs; its LP relaxation has at most one fractional job per capacity row and is often
integral already, so the LP is solved first; when it is not, its duals fix most variables and a
small dynamic program finds the 0/1 optimum (policies.fixing), HiGHS's MIP being the fallback.
`config_values` turns speedups into the values whose sum is the power mean of the chosen
speedups, and `solve_configurations` is the `goodput` policy's whole decision (with its
type-blind twin).
"""

from __future__ import annotations

import logging

import numpy as np
import scipy.sparse as sp

from ...columns import Columns
from ...errors import InputError
from ..lp.highs import LinearProgram
from .fixing import INTEGRAL_TOL, exact_by_fixing

log = logging.getLogger(__name__)

MIP_GAP = 1e-6   # relative, of the MIP fallback (policies.fixing is exact: p = -1 values differ by less)
STARVED = 1e-3   # speedup of a job without GPUs under p < 0 (else every power mean would be 0)
DEFAULT_P = -1.0


def config_values(S: np.ndarray, p: float, waiting: float | np.ndarray = STARVED) -> np.ndarray:
    """What giving job m column c adds to the objective: the p-mean's sum term over "no GPUs".

    With one configuration per job the power mean ``(mean_m s_m^p)^(1/p)`` is maximized by
    maximizing ``sum_m s_m^p`` (p > 0) or minimizing it (p < 0), a sum over the chosen
    (job, column) pairs: linear in a 0/1 assignment, so the p-mean is exact, not a surrogate.
    A job left out counts as speedup `waiting` under p < 0 (0 under p > 0): one number, or one per job;
    a column below it adds nothing."""
    if not (np.isfinite(p) and p != 0):
        raise InputError("p", p, "must be a finite non-zero number (-1: harmonic mean, as Pollux)")
    w = np.asarray(waiting, float)
    if not (np.isfinite(w).all() and (w > 0).all()):
        raise InputError("waiting", waiting, "must be a finite number > 0 (the speedup a waiting job counts as)")
    waiting = w.reshape(-1, 1) if w.ndim else float(w)
    with np.errstate(divide="ignore"):
        v = waiting ** p - np.maximum(S, waiting) ** p if p < 0 else S ** p
    return np.where(S > 0, v, 0.0)


def solve_configurations(S: np.ndarray, need: np.ndarray, columns: Columns, capacity: np.ndarray,
                         p: float = DEFAULT_P, agnostic: bool = False, prev_type: np.ndarray | None = None,
                         time_limit: float = 5.0, waiting: float | np.ndarray = STARVED,
                         weights: np.ndarray | None = None) -> np.ndarray:
    """At most one whole column per job maximizing the p-mean of speedups: its index, -1 for none.

    One 0/1 program (`assign`): ``sum_c x[m, c] <= 1``, GPUs per type within capacity. The
    agnostic twin solves over (job, GPU count) with one pool of GPUs and then puts each job on a
    type by a blind rule (`prev_type[m]`, the type it ran on, when it has room, else the type with
    most free GPUs). `waiting`: `config_values`'s speedup of a job left out (one number, or one per
    job); `weights` (> 0, one per job): each job's values times its weight, i.e. a weighted power mean."""
    M = len(S)
    choice = np.full(M, -1, np.int64)
    if M == 0:
        return choice
    cap = np.asarray(capacity, float)
    pool = columns.pool
    ok = (S > 0) & (need >= 1) & (need <= cap[pool][None, :])
    S = np.where(ok, S, 0.0)
    if not agnostic:
        keep = _undominated(S, need, pool)
        return assign(_weighted(config_values(S, p, waiting), weights), need, keep, pool, cap, time_limit)
    groups, Sg, Ng = _by_gpu_count(S, need, columns)
    one = np.zeros(len(groups), np.int64)
    pick = assign(_weighted(config_values(Sg, p, waiting), weights), Ng, _undominated(Sg, Ng, one), one,
                  np.array([cap.sum()]), time_limit)
    free = cap.copy()
    prev = np.full(M, -1) if prev_type is None else np.asarray(prev_type)
    for m in np.argsort(-np.where(pick >= 0, Ng[np.arange(M), np.maximum(pick, 0)], 0), kind="stable"):
        if pick[m] < 0:
            continue
        cols = np.flatnonzero((columns.gpus == groups[pick[m]]) & (S[m] > 0) & (need[m] <= free[pool]))
        if not len(cols):
            continue   # the pooled GPUs do not split over the types this way: the job waits a round
        mine = cols[pool[cols] == prev[m]]
        c = mine[0] if len(mine) else cols[np.argmax(free[pool[cols]])]
        choice[m] = c
        free[pool[c]] -= need[m, c]
    return choice


def _weighted(V: np.ndarray, weights: np.ndarray | None) -> np.ndarray:
    return V if weights is None else V * np.asarray(weights, float)[:, None]


def _by_gpu_count(S: np.ndarray, need: np.ndarray, columns: Columns):
    """Each (job, GPU count) averaged over the types it runs on (plain columns: key 0)."""
    keys = columns.gpus
    groups = np.unique(keys)
    Sg = np.zeros((len(S), len(groups)))
    Ng = np.zeros((len(S), len(groups)))
    for i, k in enumerate(groups):
        cols = np.flatnonzero(keys == k)
        cnt = (S[:, cols] > 0).sum(axis=1)
        Sg[:, i] = np.where(cnt > 0, S[:, cols].sum(axis=1) / np.maximum(cnt, 1), 0.0)
        Ng[:, i] = need[:, cols].max(axis=1)
    return groups, Sg, Ng


def assign(V: np.ndarray, need: np.ndarray, keep: np.ndarray, pool: np.ndarray, cap: np.ndarray,
           time_limit: float = 5.0) -> np.ndarray:
    """The 0/1 program of `solve_configurations` on the kept variables: its LP relaxation, then
    `fixing.exact_by_fixing` if that is fractional, then HiGHS's MIP if the fixing declines; greedy by
    value if HiGHS finds nothing within `time_limit`."""
    choice = np.full(len(V), -1, np.int64)
    prog = program(V, need, keep, pool, cap)
    if prog is None:
        return choice
    vr, vc, v, g, A, ub = prog
    # values scaled to at most 1: the gap and HiGHS's tolerances then mean the same on every instance
    scaled = v / v.max()
    res = LinearProgram(scaled, A, -np.inf, ub, 0.0, 1.0, maximize=True, time_limit=time_limit).run()
    on = None
    if res.ok and _integral(res.x):   # the relaxation's optimum is most often 0/1 already
        on = res.x > 0.5
    elif res.ok:   # else its duals fix most variables and a small dynamic program does the rest
        on = exact_by_fixing(res.x, res.row_duals, scaled, A, ub, vr, g, pool[vc], cap)
    if on is None:   # the LP failed, or the rest was too large for the dynamic program: HiGHS's MIP
        res = LinearProgram(scaled, A, -np.inf, ub, 0.0, 1.0, maximize=True, time_limit=time_limit,
                            integrality=True, mip_gap=MIP_GAP).run()
        on = res.x > 0.5 if res.feasible else None
    if on is not None:
        choice[vr[on]] = vc[on]
        return choice
    log.warning("configuration assignment: HiGHS found no solution (%s); greedy", res.status)
    free = cap.copy()
    for i in np.argsort(-v, kind="stable"):
        if choice[vr[i]] < 0 and g[i] <= free[pool[vc[i]]]:
            choice[vr[i]] = vc[i]
            free[pool[vc[i]]] -= g[i]
    return choice


def _integral(x: np.ndarray, tol: float = INTEGRAL_TOL) -> bool:
    """Whether an LP solution is already 0/1: then it is the 0/1 program's optimum too, found in the
    LP's time (a few ms)."""
    return bool(np.all((x < tol) | (x > 1 - tol)))


def program(V: np.ndarray, need: np.ndarray, keep: np.ndarray, pool: np.ndarray, cap: np.ndarray):
    """`assign`'s program: one variable per kept (job, column) of positive value, its row and column
    (vr, vc), value v and GPUs g; rows ``sum_c x[m, c] <= 1`` then GPUs per type <= capacity (A, ub).
    None when no variable is left. (Separate so that solver_bench times the same program.)"""
    M = len(V)
    keep = keep & (V > 0)
    vr, vc = np.nonzero(keep)
    n = len(vr)
    if n == 0:
        return None
    v = V[vr, vc]
    g = need[vr, vc].astype(float)
    idx = np.arange(n)
    A = sp.vstack([sp.csr_matrix((np.ones(n), (vr, idx)), shape=(M, n)),
                   sp.csr_matrix((g, (pool[vc], idx)), shape=(len(cap), n))], format="csr")
    return vr, vc, v, g, A, np.concatenate([np.ones(M), np.asarray(cap, float)])



def _undominated(S: np.ndarray, need: np.ndarray, pool: np.ndarray) -> np.ndarray:
    """Variables worth having: positive speedup, above every smaller GPU count of the same type."""
    keep = S > 0
    for t in np.unique(pool):
        cols = np.flatnonzero(pool == t)
        best = np.zeros(len(S))
        for c in cols:
            # a type's configuration columns come in increasing GPU count; a fixed job's plain column is
            # the only column of its row with S > 0 on that type (and an adaptive job's is 0)
            better = S[:, c] > best * (1 + 1e-9)
            keep[:, c] &= better
            best = np.maximum(best, S[:, c])
    return keep
