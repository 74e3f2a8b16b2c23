"""AlloX baseline (Le et al., EuroSys'20): jobs matched to (worker type, queue position) slots.

A job in position k of a GPU's queue delays itself and the k-1 jobs behind it, so the
cost of that slot is k times its running time there; the minimum-cost matching
minimizes the sum of completion times. GPUs of one type are interchangeable, so the
matching is a transportation LP over (type, position) with n_j slots each, whose
simplex vertices are integral. Jobs matched to a first position run now.
"""

from __future__ import annotations

import math
import time

import numpy as np
import scipy.sparse as sp

from .common import require_remaining
from .lp import LinearProgram
from .problem import Problem
from .registry import policy
from .solve import finish


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
    P = math.ceil(M / slots_per_pos.sum()) + 1
    m_idx, j_idx = np.nonzero(runnable)
    dur = np.maximum(R[m_idx], 1e-9) / T[m_idx, j_idx]
    # variables y[(m, j), k] for k = 0..P-1, laid out k-major
    E = len(m_idx)
    cost = np.concatenate([(k + 1) * dur for k in range(P)])
    cols = np.arange(E * P)
    job_rows = sp.csr_matrix((np.ones(E * P), (np.tile(m_idx, P), cols)), shape=(M, E * P))
    slot_rows = sp.csr_matrix((np.tile(sf[m_idx], P), (np.repeat(np.arange(P), E) * J + np.tile(j_idx, P), cols)),
                              shape=(P * J, E * P))
    lp = LinearProgram(cost, sp.vstack([job_rows, slot_rows], format="csc"),
                       np.r_[np.ones(M), np.full(P * J, -np.inf)], np.r_[np.ones(M), np.tile(cap, P)],
                       np.zeros(E * P), np.ones(E * P), maximize=False)
    res = lp.run()
    if not res.ok:
        return finish(p, None, None, "highs-simplex (transportation)", res.status, start)
    first = res.x[:E] > 0.5
    X = np.zeros_like(T)
    free = cap.astype(float).copy()
    for e in np.flatnonzero(first)[np.argsort(dur[first])]:   # round any fractional leftovers safely
        m, j = m_idx[e], j_idx[e]
        if free[j] >= sf[m]:
            X[m, j], free[j] = 1.0, free[j] - sf[m]
    single = (p.members[p.var_row, 1:] < 0).all(axis=1)
    x = np.zeros(p.num_vars)
    x[single] = X[p.members[p.var_row[single], 0], p.var_col[single]]
    return finish(p, None, x, "highs-simplex (transportation)", "optimal", start)
