"""When the warm max-min LP need not run again: an optimality certificate checked in numpy.

In a simulation most re-solves follow one arrival or one departure, and in nearly all of them
the optimal level t* does not move (measured at 3 jobs/h on 36/36/36: 99 % of arrivals and of
departures), because the bottleneck job is elsewhere and the change only touches capacity that
nobody is short of. Running HiGHS then costs about 0.25 ms to confirm what a handful of vector
operations can prove. The LP (warm_lp.WarmMaxMin) is, over the live jobs m and types j,

    max t  s.t.  c_m . x_m >= t,  sum_j x_mj <= 1,  sum_m sf_m x_mj <= cap_j,  0 <= x_mj <= hi_mj.

For any multipliers u_j, v_m, w_m >= 0 with sum_m w_m = 1, and z_mj = max(0, w_m c_mj - sf_m u_j
- v_m), every feasible t is at most

    D = sum_j cap_j u_j + sum_m v_m + sum_mj hi_mj z_mj

(weak duality: t = sum_m w_m t <= sum_mj w_m c_mj x_mj <= sum_mj (sf_m u_j + v_m + z_mj) x_mj <= D).
So a feasible x whose level min_m c_m . x_m reaches D is optimal, whatever produced it. The
multipliers are the last HiGHS run's duals: a departing job's x is dropped (the rest stays
feasible, and the bound holds with the leaver's multipliers left out, rescaled so the w still sum
to 1), an arriving job takes multipliers 0 (which leaves D unchanged) and just enough of the free
capacity, best type first, to reach the old level. When the check fails HiGHS runs as before.
"""

from __future__ import annotations

import numpy as np

GAP_RTOL = 1e-9   # level and bound may differ by this much, relative (HiGHS's own pair agrees to ~1e-15)


def upper_bound(c: np.ndarray, hi: np.ndarray, sf: np.ndarray, cap: np.ndarray, u: np.ndarray, v: np.ndarray,
                w: np.ndarray) -> float:
    """D above for the jobs of rows c (M, J); u, v, w are taken as magnitudes (HiGHS signs duals
    by its own convention, and any nonnegative multipliers give a valid bound). inf when the w
    sum to nothing (no bottleneck left to certify against)."""
    return bound(float(cap @ np.abs(u)), job_terms(c, hi, sf, u, v, w), w)


def job_terms(c: np.ndarray, hi: np.ndarray, sf: np.ndarray, u: np.ndarray, v: np.ndarray,
              w: np.ndarray) -> np.ndarray:
    """Each job's share of D before the w are rescaled to sum to 1: v_m + sum_j hi_mj z_mj with
    the raw multipliers (rescaling divides every term by the same sum, see `bound`). A job's
    term changes only with its own data or new multipliers, so the warm LP keeps it per job."""
    v = np.abs(v)
    z = np.maximum(np.abs(w)[:, None] * c - sf[:, None] * np.abs(u)[None, :] - v[:, None], 0.0)
    return v + (hi * z).sum(axis=1)


def bound(cap_u: float, terms: np.ndarray, w: np.ndarray) -> float:
    """D from cap . |u| and the jobs' `job_terms` and w: rescaling the multipliers so that the w
    sum to 1 divides every part of D by their sum."""
    total = float(np.abs(w).sum())
    if total <= 0:
        return np.inf
    return (cap_u + float(terms.sum())) / total


def level(c: np.ndarray, x: np.ndarray) -> float:
    """min_m c_m . x_m (inf without jobs)."""
    return float((c * x).sum(axis=1).min(initial=np.inf))


def feasible(x: np.ndarray, hi: np.ndarray, sf: np.ndarray, cap: np.ndarray, tol: float = 1e-9) -> bool:
    """x within its bounds, each job's time and each type's capacity."""
    return bool((x >= -tol).all() and (x <= hi + tol).all() and (x.sum(axis=1) <= 1.0 + tol).all()
                and (sf @ x <= cap + tol).all())


def reach(c: np.ndarray, hi: np.ndarray, sf: float, free: np.ndarray, target: float) -> np.ndarray | None:
    """An arriving job's x (J,): just enough time to bring c . x to `target`, taken from `free`
    GPUs, fastest type (largest c) first; None when its time or the free GPUs fall short."""
    x = [0.0] * len(c)
    need = target
    time_left = 1.0
    cs, his, frees = c.tolist(), hi.tolist(), free.tolist()   # (Python floats: a few types, one at a time)
    for j in sorted(range(len(cs)), key=lambda j: -cs[j]):    # stable, as argsort(-c, kind="stable")
        if need <= 0.0:
            break
        if his[j] <= 0.0 or cs[j] <= 0.0 or frees[j] <= 0.0:
            continue
        take = min(time_left, his[j], frees[j] / sf, need / cs[j])
        x[j] = take
        time_left -= take
        need -= take * cs[j]
    if need > GAP_RTOL * max(abs(target), 1.0):
        return None
    return np.array(x)


def certified(lvl: float, bound: float) -> bool:
    """The level reaches the bound (within GAP_RTOL): the allocation is optimal."""
    return lvl >= bound - GAP_RTOL * max(abs(bound), 1.0)
