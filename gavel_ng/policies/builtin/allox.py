"""AlloX baseline (Le et al., EuroSys'20): jobs matched to (worker type, queue position) slots.

Positions count from the back of a GPU's queue: the job k-th from last delays itself
and the k-1 jobs after it, so that slot costs k times its running time there, and the
minimum-cost matching minimizes the sum of completion times. GPUs of one type are
interchangeable, so the matching is a transportation LP over (type, position) with
n_j slots each, whose simplex vertices are integral. The job at the front of each
queue (its highest occupied position) runs now.
"""

from __future__ import annotations

import math
import time

import numpy as np
import scipy.sparse as sp

from ..lp.highs import LinearProgram
from ..lp.problem import Problem
from ..lp.solving import finish
from ..registry import policy
from .common import require_remaining


def _front_of_queues(assigned, m_idx, j_idx, dur, sf, cap, shape) -> np.ndarray:
    """Per type, n_j queues hold c_k jobs at position k; c_k - c_(k+1) of them are at a front."""
    X = np.zeros(shape)
    P = assigned.shape[0]
    for j in range(shape[1]):
        free = float(cap[j])
        at = [np.flatnonzero(assigned[k] & (j_idx == j)) for k in range(P)]
        for k in range(P - 1, -1, -1):
            fronts = len(at[k]) - (len(at[k + 1]) if k + 1 < P else 0)
            for e in at[k][np.argsort(dur[at[k]])][:max(fronts, 0)]:
                if free >= sf[m_idx[e]]:
                    X[m_idx[e], j] = 1.0
                    free -= sf[m_idx[e]]
    return X


def _transport_matrix(m_idx, j_idx, sf, M: int, J: int, P: int) -> sp.csc_matrix:
    """Rows: one per job (it takes one slot or waits), then one per (position k, type j) (the
    GPUs of a position); columns: (k, entry e) k-major, then each job's waiting slack. Built
    as CSC directly: stacking two sparse blocks cost more than HiGHS's solve."""
    E = len(m_idx)
    k = np.repeat(np.arange(P), E)
    e = np.tile(np.arange(E), P)
    index = np.empty(2 * E * P + M, dtype=np.int32)
    index[0:2 * E * P:2] = m_idx[e]                 # the job's row comes first (job rows < slot rows)
    index[1:2 * E * P:2] = M + k * J + j_idx[e]
    index[2 * E * P:] = np.arange(M)
    value = np.ones(2 * E * P + M)
    value[1:2 * E * P:2] = sf[m_idx[e]]
    indptr = np.r_[np.arange(0, 2 * E * P + 1, 2), 2 * E * P + 1 + np.arange(M)].astype(np.int32)
    return sp.csc_matrix((value, index, indptr), shape=(M + P * J, E * P + M))


def _mean_duration(p: Problem, x: np.ndarray) -> float:
    """Mean remaining duration (s) of the jobs that run now; queued jobs wait for a slot."""
    thr = p.thr.value(x)
    run = (thr > 0) & (p.input.steps_remaining > 0)
    return float((p.input.steps_remaining[run] / thr[run]).mean()) if run.any() else 0.0


@policy("allox", "min-cost matching of jobs to (GPU, queue position) slots, cost = position x R_m / T_mj",
        evaluate=_mean_duration, spread=False)
def allox(p: Problem):
    start = time.perf_counter()
    inp = p.input
    R = require_remaining(p, "allox")
    T, cap, sf = inp.throughputs, inp.capacity, inp.scale_factors
    M, J = T.shape
    runnable = (T > 0) & (sf[:, None] <= cap[None, :])
    slots_per_pos = np.floor(cap / 1.0)
    if M == 0 or slots_per_pos.sum() == 0:
        return finish(p, None, np.zeros(p.num_vars), "none", "optimal", start)
    P = math.ceil(sf.sum() / slots_per_pos.sum()) + 1
    m_idx, j_idx = np.nonzero(runnable)
    dur = np.maximum(R[m_idx], 1e-9) / T[m_idx, j_idx]
    # variables y[(m, j), k] for k = 0..P-1 laid out k-major, then one "still waiting" slack per
    # job that costs more than any slot, so the LP stays feasible when slots run short
    E = len(m_idx)
    cost = np.concatenate([(k + 1) * dur for k in range(P)] + [np.full(M, (P + 1) * dur.max() * 2)])
    A = _transport_matrix(m_idx, j_idx, sf, M, J, P)
    lp = LinearProgram(cost, A,
                       np.r_[np.ones(M), np.full(P * J, -np.inf)], np.r_[np.ones(M), np.tile(cap, P)],
                       np.zeros(E * P + M), np.ones(E * P + M), maximize=False)
    res = lp.run()
    if not res.ok:
        return finish(p, None, None, "highs-simplex (transportation)", res.status, start)
    X = _front_of_queues(res.x[:E * P].reshape(P, E) > 0.5, m_idx, j_idx, dur, sf, cap, T.shape)
    single = p.single_var
    x = np.zeros(p.num_vars)
    x[single] = X[p.members[p.var_row[single], 0], p.var_col[single]]
    return finish(p, None, x, "highs-simplex (transportation)", "optimal", start)
