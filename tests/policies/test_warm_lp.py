"""The warm max-min LP (policies/lp/warm/warm_lp.py) writes its HiGHS models only before it runs them: after
any run of arrivals, departures, slot reuse and rewritten rows, the models must hold exactly what
the slots say, and every solve must reach the level a fresh model reaches on the same rows."""

import numpy as np
import pytest

from gavel_ng.policies.lp.warm.warm_lp import INF, WarmMaxMin


def dense_lp(h):
    """A HiGHS model's matrix (dense) and bounds."""
    lp = h.getLp()
    A = np.zeros((lp.num_row_, lp.num_col_))
    m = lp.a_matrix_
    for j in range(lp.num_col_):
        for k in range(m.start_[j], m.start_[j + 1]):
            A[m.index_[k], j] = m.value_[k]
    return (A, np.array(lp.col_lower_), np.array(lp.col_upper_), np.array(lp.row_lower_),
            np.array(lp.row_upper_), np.array(lp.col_cost_))


def expected_lp(warm, t_cost):
    """What the slots say the model holds (WarmMaxMin's module doc)."""
    J, S = warm.J, warm.num_slots
    A = np.zeros((J + 2 * S, 1 + J * S))
    lo, up, cost = np.zeros(1 + J * S), np.zeros(1 + J * S), np.zeros(1 + J * S)
    lo[0], up[0], cost[0] = -INF, INF, t_cost
    row_lo, row_up = np.full(J + 2 * S, -INF), np.r_[warm.cap, np.tile([1.0, INF], S)]
    for s in range(S):
        cols = 1 + s * J + np.arange(J)
        A[np.arange(J), cols] = warm.sf[s]
        A[J + 2 * s, cols] = 1.0
        A[J + 2 * s + 1, cols] = warm.coef[s]
        A[J + 2 * s + 1, 0] = -1.0
        up[cols] = warm.hi[s] if warm.open[s] else 0.0
        cost[cols] = warm.cost[s] if t_cost == 0.0 else 0.0
        row_lo[J + 2 * s + 1] = 0.0 if warm.open[s] else -INF
    return A, lo, up, row_lo, row_up, cost


def check_models(warm):
    warm._flush()
    for h, t_cost in [(warm.h, 1.0)] + ([(warm.h2, 0.0)] if warm.h2 is not None else []):
        got, want = dense_lp(h), expected_lp(warm, t_cost)
        for name, a, b in zip(("A", "col_lower", "col_upper", "row_lower", "row_upper", "cost"), got, want):
            if name == "col_lower" and h is warm.h2:   # t's lower bound holds phase 1's level
                a, b = a[1:], b[1:]
            np.testing.assert_array_equal(a, b, err_msg=name)


def level(c, X):
    return float((c * X).sum(axis=1).min())


@pytest.mark.parametrize("then", [False, True])
def test_models_hold_what_the_slots_say(then):
    """Random churn: jobs arrive, leave (their slots reused by others), and live jobs get new
    coefficients, bounds and GPU counts; the models are compared with the slots at random points
    between runs, and each solve's level with a fresh model's."""
    rng = np.random.default_rng(4)
    J = 3
    cap = np.array([6.0, 4.0, 8.0])
    warm = WarmMaxMin(cap)
    rows = {}

    def new_row():
        hi = (rng.random(J) < 0.8).astype(float)
        hi[rng.integers(J)] = 1.0
        return rng.uniform(0.2, 3.0, J) * hi, hi, float(rng.choice([1.0, 2.0, 4.0])), rng.uniform(0, 1, J) * hi

    nxt = 0
    for _ in range(6):
        rows[nxt] = new_row()
        nxt += 1
    runs_seen = set()
    for step in range(150):
        u = rng.random()
        if u < 0.35 and len(rows) > 2:
            del rows[list(rows)[rng.integers(len(rows))]]
        elif u < 0.75:
            rows[nxt] = new_row()
            nxt += 1
        elif u < 0.95:   # a live job's row changes
            rows[list(rows)[rng.integers(len(rows))]] = new_row()
        jobs = list(rows)
        c, hi, sf, cost = (np.array([rows[m][k] for m in jobs]) for k in range(4))
        X = warm.solve(jobs, c, hi, sf, cap, cost if then else None)
        runs_seen.add(warm.runs)
        fresh = WarmMaxMin(cap).solve(jobs, c, hi, sf, cap, cost if then else None)
        assert X is not None and fresh is not None
        assert level(c, X) == pytest.approx(level(c, fresh), rel=1e-7, abs=1e-9), step
        assert (X >= -1e-9).all() and (X <= hi + 1e-9).all() and (sf @ X <= cap + 1e-7).all()
        if rng.random() < 0.2:
            check_models(warm)
    check_models(warm)
    assert len(runs_seen) > 10 and (then or warm.carried > 20), (warm.runs, warm.carried)
