"""Finish-time fairness (Themis), solved by bisection over warm-started LPs.

rho_m = (t_m + R_m / thr_m) / (S_m / thr_iso_m): the time the job takes under X over
the time it would take with 1/n of the cluster from its start (S_m total steps).
For a fixed r, rho_m <= r is the linear constraint thr_m >= R_m / (r D_m - t_m), so
min max rho is a bisection on r whose LPs differ only in row bounds; HiGHS re-solves
each from the previous basis.
"""

from __future__ import annotations

import time

import numpy as np
import scipy.sparse as sp

from ..lp.highs import LinearProgram
from ..lp.problem import Problem
from ..lp.solving import finish
from ..registry import policy
from .common import require_remaining

REL_TOL = 1e-4


def _terms(p: Problem):
    R = require_remaining(p, "ftf")
    active = (R > 0) & (p.thr_isolated > 0)
    D = p.input.steps_total / np.where(p.thr_isolated > 0, p.thr_isolated, 1.0)
    return R, D, p.input.time_since_arrival, active


def rho(p: Problem, x: np.ndarray) -> np.ndarray:
    """Finish-time fairness of every job under allocation x (inf if it gets nothing)."""
    R, D, t, active = _terms(p)
    thr = p.thr.value(x)
    with np.errstate(divide="ignore"):
        r = (t + np.where(R > 0, R / thr, 0.0)) / D
    return np.where(active, r, 0.0)


def _max_rho(p: Problem, x: np.ndarray) -> float:
    r = rho(p, x)
    return float(r.max()) if len(r) else 0.0


@policy("ftf", "minimize max_m (t_m + R_m / thr_m) / (S_m / thr_isolated_m)",
        aliases=("finish_time_fairness_perf",), agnostic_aliases=("finish_time_fairness",), evaluate=_max_rho)
def ftf(p: Problem):
    """Bisection on rho with one LP re-solved from its last basis."""
    start = time.perf_counter()
    R, D, t, active = _terms(p)
    idx = np.flatnonzero(active)
    if len(idx) == 0:
        return finish(p, None, p.fallback_x(), "none", "optimal", start)
    A, lo, hi = p.validity_rows()
    n = p.num_vars
    thr_rows = p.thr.A[idx]
    lp = LinearProgram(np.asarray((p.thr / p.thr_fastest).A.sum(axis=0)).ravel(),
                       sp.vstack([A, thr_rows], format="csc"),
                       np.concatenate([lo, np.zeros(len(idx))]), np.concatenate([hi, np.full(len(idx), np.inf)]),
                       np.zeros(n), np.ones(n), maximize=True)
    rows = np.arange(A.shape[0], A.shape[0] + len(idx))
    Ra, Da, ta = R[idx], D[idx], t[idx]

    def need(r: float) -> np.ndarray:
        slack = r * Da - ta
        return np.where(slack > 0, Ra / np.where(slack > 0, slack, 1.0), np.inf)

    def feasible(r: float):
        req = need(r)
        if not np.isfinite(req).all():
            return None
        lp.set_row_bounds(rows, req, np.inf)
        res = lp.run()
        return res.x if res.ok else None

    x_iso = p.fallback_x()
    hi_r = float(rho(p, x_iso)[idx].max())
    lo_r = float(((ta + Ra / p.thr_fastest[idx]) / Da).max())
    best = feasible(hi_r)
    if best is None:  # the isolated allocation is feasible; keep it if HiGHS disagrees at the boundary
        best = x_iso
    while hi_r - lo_r > REL_TOL * max(hi_r, 1e-12):
        mid = 0.5 * (lo_r + hi_r)
        x = feasible(mid)
        if x is None:
            lo_r = mid
        else:
            hi_r, best = mid, x
    return finish(p, None, best, "highs-simplex (bisection)", "optimal", start)

