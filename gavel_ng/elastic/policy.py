"""The `goodput` policy: configurations as allocation columns, maximize the sum of speedups.

The allocation's columns are the worker types (fixed jobs: their scale factor is the
row's) followed by *configurations* (worker type, GPU count K): an adaptive job's entry
there is its best goodput at K GPUs of that type, packed (`best_goodput_many`), and a
variable of that column takes K GPUs of its type. Everything a policy states is its
objective, linear in X:

    maximize   sum_m speedup_m(X),   speedup_m(X) = sum_c S[m, c] X[m, c]
    subject to sum_c X[m, c] <= 1                           (each job, as in Gavel)
               sum_{m, c of type t} gpus[m, c] X[m, c] <= n_t  (capacity per type)
               speedup_m(X) >= floor * F_m                  (the fairness knob)

`S[m, c]` is the job's progress rate on configuration c over its rate on one GPU of the
fastest type (for a fixed job on its `sf` GPUs of type t: ``sf x T[m, t] / max_t T[m,
t]``, linear scaling from one GPU being the only thing the table does not say). `F_m`,
the job's fair share, is the speedup it gets with ``min(1, N/M)`` of one GPU spread over
the types in proportion to their sizes (N GPUs, M jobs; its smallest configuration per
type, scaled to one GPU). That allocation is valid for every job at once, so the floor
constraint is feasible for any `floor` in [0, 1]: 0 is pure throughput (sum of
speedups), 1 forbids giving any job less than an equal share. Configurations that do
not raise a job's speedup over a smaller GPU count of the same type are dropped (they
only waste GPUs), so the LP has few variables per job.

The agnostic twin (`goodput_agnostic`) is blind to the worker type, not to the GPU
count: it sees each job's speedup at K GPUs averaged over the types it runs on, solves
with one pool of N GPUs, and spreads each (job, K) share over the types in proportion
to their sizes (as the registry's agnostic variants do).

Solved as one sparse LP with HiGHS (scipy).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp
from scipy.optimize import Bounds, LinearConstraint, linprog, milp

from gavel_ng.errors import InputError

log = logging.getLogger(__name__)

DEFAULT_FLOOR = 0.5


@dataclass(frozen=True)
class ElasticColumns:
    """Allocation columns: `pool[c]` the worker type index, `gpus[c]` > 0 the configuration's GPU
    count (0: a plain type column, where a fixed job takes its scale factor)."""

    worker_types: tuple[str, ...]
    pool: np.ndarray
    gpus: np.ndarray

    @classmethod
    def build(cls, worker_types: list[str], capacity: np.ndarray, gpu_counts: tuple[int, ...]) -> ElasticColumns:
        J = len(worker_types)
        pool = list(range(J))
        gpus = [0] * J
        for t in range(J):
            for k in sorted(set(gpu_counts)):
                if k <= capacity[t]:
                    pool.append(t)
                    gpus.append(int(k))
        return cls(tuple(worker_types), np.array(pool, np.int64), np.array(gpus, np.int64))

    @property
    def num(self) -> int:
        return len(self.pool)

    def labels(self) -> list[str]:
        return [self.worker_types[p] if g == 0 else f"{self.worker_types[p]}x{g}" for p, g in zip(self.pool, self.gpus)]


def solve_goodput(S: np.ndarray, need: np.ndarray, columns: ElasticColumns, capacity: np.ndarray,
                  floor: float = DEFAULT_FLOOR, agnostic: bool = False) -> np.ndarray:
    """The allocation X (M, C) of the `goodput` policy (module docstring).

    `S[m, c]`: speedup of job m on column c (0: cannot run there); `need[m, c]`: GPUs it takes.
    """
    if not 0.0 <= floor <= 1.0:
        raise InputError("floor", floor, "must be in [0, 1]")
    M, C = S.shape
    X = np.zeros((M, C))
    if M == 0:
        return X
    cap = np.asarray(capacity, float)
    pool = columns.pool
    ok = (S > 0) & (need >= 1) & (need <= cap[pool][None, :])
    S = np.where(ok, S, 0.0)
    if agnostic:
        return _solve_agnostic(S, need, columns, cap, floor)
    keep = _undominated(S, need, pool)
    F = _fair_share(S, need, pool, cap)
    x = _lp(S, need, keep, pool, cap, floor * F)
    X[keep] = x
    return X


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


def _fair_share(S: np.ndarray, need: np.ndarray, pool: np.ndarray, cap: np.ndarray) -> np.ndarray:
    """F_m: speedup of min(1, N/M) of one GPU spread over the types by size (smallest configuration)."""
    M = len(S)
    N = cap.sum()
    F = np.zeros(M)
    for t in range(len(cap)):
        cols = np.flatnonzero(pool == t)
        if not len(cols):
            continue
        g = np.where(S[:, cols] > 0, need[:, cols], np.inf)
        first = np.argmin(g, axis=1)
        rows = np.arange(M)
        unit = np.where(np.isfinite(g[rows, first]), S[:, cols][rows, first] / np.where(
            np.isfinite(g[rows, first]), g[rows, first], 1.0), 0.0)
        F += cap[t] / N * unit
    return min(1.0, N / M) * F


def _lp(S: np.ndarray, need: np.ndarray, keep: np.ndarray, pool: np.ndarray, cap: np.ndarray,
        floor: np.ndarray) -> np.ndarray:
    M = len(S)
    vr, vc = np.nonzero(keep)
    n = len(vr)
    if n == 0:
        return np.zeros(0)
    s = S[vr, vc]
    g = need[vr, vc].astype(float)
    P = len(cap)
    idx = np.arange(n)
    job_rows = sp.csr_matrix((np.ones(n), (vr, idx)), shape=(M, n))
    cap_rows = sp.csr_matrix((g, (pool[vc], idx)), shape=(P, n))
    floor_rows = sp.csr_matrix((-s, (vr, idx)), shape=(M, n))
    has_floor = floor > 0
    A = sp.vstack([job_rows, cap_rows, floor_rows[has_floor]], format="csr")
    b = np.concatenate([np.ones(M), cap, -floor[has_floor]])
    res = linprog(-s, A_ub=A, b_ub=b, bounds=(0.0, 1.0), method="highs")
    if res.status != 0:   # numerically infeasible floors: drop them (the sum of speedups alone is always feasible)
        res = linprog(-s, A_ub=sp.vstack([job_rows, cap_rows], format="csr"), b_ub=np.concatenate([np.ones(M), cap]),
                      bounds=(0.0, 1.0), method="highs")
    return np.clip(res.x, 0.0, 1.0)


def _solve_agnostic(S: np.ndarray, need: np.ndarray, columns: ElasticColumns, cap: np.ndarray,
                    floor: float) -> np.ndarray:
    """Type-blind: average each (job, GPU count) over the types it runs on, one pool, then spread."""
    M, C = S.shape
    pool = columns.pool
    keys = columns.gpus
    groups, Sg, Ng = _by_gpu_count(S, need, columns)
    one = np.zeros(len(groups), np.int64)
    keep = _undominated(Sg, Ng, one)
    N = np.array([cap.sum()])
    F = _fair_share(Sg, Ng, one, N)
    xg = np.zeros((M, len(groups)))
    xg[keep] = _lp(Sg, Ng, keep, one, N, floor * F)
    X = np.zeros((M, C))
    for i, k in enumerate(groups):
        cols = np.flatnonzero(keys == k)
        w = np.where(S[:, cols] > 0, cap[pool[cols]][None, :], 0.0)
        tot = w.sum(axis=1, keepdims=True)
        X[:, cols] = xg[:, i:i + 1] * np.where(tot > 0, w / np.where(tot > 0, tot, 1.0), 0.0)
    return X


# ----- whole configurations, one per job (the per-round `goodput` planner, Sia-like) ------------
STARVED = 1e-3   # speedup of a job without GPUs under p < 0 (else every power mean would be 0)
DEFAULT_P = -1.0


def config_values(S: np.ndarray, p: float) -> np.ndarray:
    """What giving job m column c adds to the objective: the p-mean's sum term over "no GPUs".

    With one configuration per job the power mean ``(mean_m s_m^p)^(1/p)`` is maximized by
    maximizing ``sum_m s_m^p`` (p > 0) or minimizing it (p < 0), a sum over the chosen
    (job, column) pairs: linear in a 0/1 assignment, so the p-mean is exact, not a surrogate.
    A job left out counts as speedup `STARVED` under p < 0 (0 under p > 0)."""
    if not (np.isfinite(p) and p != 0):
        raise InputError("p", p, "must be a finite non-zero number (-1: harmonic mean, as Pollux)")
    with np.errstate(divide="ignore"):
        v = STARVED ** p - np.maximum(S, STARVED) ** p if p < 0 else S ** p
    return np.where(S > 0, v, 0.0)


def solve_configurations(S: np.ndarray, need: np.ndarray, columns: ElasticColumns, capacity: np.ndarray,
                         p: float = DEFAULT_P, agnostic: bool = False, prev_type: np.ndarray | None = None,
                         time_limit: float = 5.0) -> np.ndarray:
    """At most one whole column per job maximizing the p-mean of speedups: its index, -1 for none.

    One 0/1 program (HiGHS): ``sum_c x[m, c] <= 1``, GPUs per type within capacity. Its LP
    relaxation has at most one fractional job per capacity row, so it solves in about the
    time of the LP. The agnostic twin solves over (job, GPU count) with one pool of GPUs and
    then puts each job on a type by a blind rule (`prev_type[m]`, the type it ran on, when it
    has room, else the type with most free GPUs)."""
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
        return _assign(config_values(S, p), need, keep, pool, cap, time_limit)
    groups, Sg, Ng = _by_gpu_count(S, need, columns)
    one = np.zeros(len(groups), np.int64)
    pick = _assign(config_values(Sg, p), Ng, _undominated(Sg, Ng, one), one, np.array([cap.sum()]), time_limit)
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


def _by_gpu_count(S: np.ndarray, need: np.ndarray, columns: ElasticColumns):
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


def _assign(V: np.ndarray, need: np.ndarray, keep: np.ndarray, pool: np.ndarray, cap: np.ndarray,
            time_limit: float) -> np.ndarray:
    """The 0/1 program of `solve_configurations` on the kept variables; greedy if HiGHS finds nothing."""
    M = len(V)
    keep = keep & (V > 0)
    vr, vc = np.nonzero(keep)
    choice = np.full(M, -1, np.int64)
    n = len(vr)
    if n == 0:
        return choice
    v = V[vr, vc]
    g = need[vr, vc].astype(float)
    idx = np.arange(n)
    A = sp.vstack([sp.csr_matrix((np.ones(n), (vr, idx)), shape=(M, n)),
                   sp.csr_matrix((g, (pool[vc], idx)), shape=(len(cap), n))], format="csr")
    ub = np.concatenate([np.ones(M), cap])
    res = milp(-v / v.max(), integrality=np.ones(n), bounds=Bounds(0, 1), constraints=LinearConstraint(A, -np.inf, ub),
               options={"time_limit": time_limit, "mip_rel_gap": 1e-6})
    if res.x is not None:
        on = res.x > 0.5
        choice[vr[on]] = vc[on]
        return choice
    log.warning("configuration assignment: HiGHS found no solution (%s); greedy", res.message)
    free = cap.copy()
    for i in np.argsort(-v, kind="stable"):
        if choice[vr[i]] < 0 and g[i] <= free[pool[vc[i]]]:
            choice[vr[i]] = vc[i]
            free[pool[vc[i]]] -= g[i]
    return choice
