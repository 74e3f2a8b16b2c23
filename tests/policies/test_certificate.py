"""The warm max-min LP's certificate (policies/lp/warm/certificate.py): solves it answers without HiGHS
must reach the cold optimum, and its bound must never lie."""

import numpy as np
import pytest

from gavel_ng.cluster import Cluster
from gavel_ng.policies import SchedulingProblem, solve
from gavel_ng.policies.lp.warm.certificate import certified, level, reach, upper_bound
from gavel_ng.policies.lp.warm.session import SOLVER, PolicySession


def min_level(T, sf, w, cap, x):
    thr_eq = T @ (cap / cap.sum())
    return (sf * (T * x).sum(axis=1) / (w * thr_eq)).min()


@pytest.mark.parametrize("gpus,seed", [(12, 0), (12, 1), (4, 2), (2, 3)])
def test_carried_solves_reach_the_cold_optimum(reference_table, gpus, seed):
    """Random arrivals and departures of single- and multi-GPU jobs on a roomy and on a tight
    cluster: every warm solve, carried over by the certificate or run, has the cold solve's
    max-min level and is a valid allocation; on the roomy clusters most are carried."""
    cluster = Cluster.parse(f"v100={gpus},p100={gpus},k80={gpus}")
    cap = cluster.capacity()
    keys = reference_table.job_keys
    T_all = reference_table.matrix(keys, cluster.worker_types)
    rng = np.random.default_rng(seed)
    fits = [k for k, key in enumerate(keys) if key[1] <= gpus]
    pick = rng.choice(fits, 400)
    weight = np.where(rng.random(400) < 0.3, 2.0, 1.0)
    session = PolicySession("las", cap)
    active, nxt = list(range(10)), 10
    for step in range(60):
        if rng.random() < 0.45 and len(active) > 2:
            active.pop(int(rng.integers(len(active))))
        else:
            active.append(nxt)
            nxt += 1
        ids = np.array(active)
        T = T_all[pick[ids]]
        sf = np.array([keys[k][1] for k in pick[ids]], float)
        inp = SchedulingProblem.build([str(i) for i in active], cluster.worker_types, cap, T, scale_factors=sf,
                                      weights=weight[ids])
        warm = session.solve(inp)
        assert warm.solver == SOLVER
        warm.allocation.check()
        cold = solve(inp, "las").allocation.values
        x = warm.allocation.values
        assert min_level(T, sf, weight[ids], cap, x) == pytest.approx(min_level(T, sf, weight[ids], cap, cold),
                                                                     rel=1e-7, abs=1e-12)
    carried = session.carried
    assert carried > (20 if gpus == 12 else -1), carried


def test_bound_never_below_the_optimum(reference_table):
    """Any nonnegative multipliers bound the optimum from above (weak duality), HiGHS's own meet it."""
    cluster = Cluster.parse("v100=3,p100=3,k80=3")
    cap = cluster.capacity()
    T = reference_table.matrix(reference_table.job_keys[:8], cluster.worker_types)
    sf = np.array([k[1] for k in reference_table.job_keys[:8]], float)
    inp = SchedulingProblem.build([str(i) for i in range(8)], cluster.worker_types, cap, T, scale_factors=sf)
    x = solve(inp, "las").allocation.values
    c = sf[:, None] * T / (T @ (cap / cap.sum()))[:, None]
    hi = ((T > 0) & (sf[:, None] <= cap[None, :])).astype(float)
    best = level(c, x)
    rng = np.random.default_rng(0)
    for _ in range(200):
        u, v, w = rng.exponential(size=3), rng.exponential(size=8) * (rng.random(8) < 0.5), rng.exponential(size=8)
        assert upper_bound(c, hi, sf, cap, u, v, w) >= best * (1 - 1e-12)
    assert upper_bound(c, hi, sf, cap, np.zeros(3), np.zeros(8), np.zeros(8)) == np.inf


def test_reach_takes_the_fastest_free_type_first():
    c = np.array([1.0, 3.0, 2.0])
    x = reach(c, np.ones(3), 1.0, np.array([5.0, 0.25, 5.0]), 1.5)
    np.testing.assert_allclose(x, [0.0, 0.25, 0.375])     # 0.25 * 3 + 0.375 * 2 = 1.5
    assert reach(c, np.ones(3), 1.0, np.zeros(3), 1.5) is None        # no free GPU
    assert reach(c, np.array([1.0, 0.0, 0.0]), 1.0, np.full(3, 5.0), 1.5) is None   # 1 unit of time at 1.0
    np.testing.assert_allclose(reach(c, np.ones(3), 2.0, np.array([0.0, 1.0, 0.0]), 1.0), [0, 1 / 3, 0])
    assert certified(1.0, 1.0 + 1e-12) and not certified(1.0, 1.001)
