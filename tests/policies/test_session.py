import numpy as np
import pytest

from gavel_ng.cluster import Cluster
from gavel_ng.policies import SchedulingProblem, agnostic_throughputs, solve
from gavel_ng.policies.session import PolicySession, WarmMaxMin


@pytest.mark.parametrize("blind", [False, True])
def test_warm_lp_matches_cold_solve(reference_table, blind):
    """Through arrivals and departures the warm LP reaches the cold optimum of `las_pareto`
    (both phases; `las` is its first).

    With blind=True both see agnostic throughputs: the LP that las_agnostic solves
    (its spreading over types afterwards depends on which optimal vertex was found).
    """
    cluster = Cluster.parse("v100=8,p100=8,k80=8", gpus_per_server=4)
    cap = cluster.capacity()
    keys = reference_table.job_keys
    T_all = reference_table.matrix(keys, cluster.worker_types)
    rng = np.random.default_rng(1)
    warm, warm_agnostic = WarmMaxMin(cap, False), WarmMaxMin(cap, True)
    active, nxt = list(range(12)), 12
    key = rng.integers(0, len(keys), 500)
    weight = np.where(rng.random(500) < 0.3, 5.0, 1.0)
    for step in range(30):
        if step and rng.random() < 0.5 and len(active) > 3:
            active.pop(int(rng.integers(len(active))))
        elif step:
            active.append(nxt)
            nxt += 1
        ids = np.array(active)
        T, sf, w = T_all[key[ids]], np.array([keys[k][1] for k in key[ids]], float), weight[ids]
        if blind:
            T = agnostic_throughputs(T)
        x = warm.solve(active, T, sf, w)
        cold = solve(SchedulingProblem.build([str(i) for i in active], cluster.worker_types, cap, T,
                                             scale_factors=sf, weights=w), "las_pareto").allocation.values
        thr_eq = T @ (cap / cap.sum())
        objective = [(sf * (T * a).sum(axis=1) / (w * thr_eq)).min() for a in (x, cold)]
        assert objective[0] == pytest.approx(objective[1], rel=1e-6, abs=1e-9)
        total = [(sf * (T * a).sum(axis=1) / thr_eq).sum() for a in (x, cold)]   # the second phase's
        assert total[0] == pytest.approx(total[1], rel=1e-6)
        assert (x.sum(axis=1) <= 1 + 1e-9).all() and (sf @ x <= cap + 1e-9).all()
        assert (sf @ x).sum() == pytest.approx((sf @ cold).sum(), rel=1e-6)
        xa = warm_agnostic.solve(active, T_all[key[ids]], sf, w)
        assert (xa.sum(axis=1) <= 1 + 1e-9).all() and (sf @ xa <= cap + 1e-9).all() and xa.min() >= 0


def test_session_solutions_match_cold_solves(reference_table):
    cluster = Cluster.parse("v100=4,p100=4,k80=4")
    keys = reference_table.job_keys[:40]
    T = reference_table.matrix(keys, cluster.worker_types)
    sf = np.array([k[1] for k in keys], float)
    for name in ("las", "las_agnostic", "las_pareto", "makespan"):
        session = PolicySession(name, cluster.capacity())
        for n in (5, 12, 9, 20):
            inp = SchedulingProblem.build([f"j{i}" for i in range(n)], cluster.worker_types, cluster.capacity(),
                                          T[:n], scale_factors=sf[:n], steps_remaining=np.full(n, 1e4))
            warm, cold = session.solve(inp), solve(inp, name)
            warm.allocation.check()
            assert warm.objective == pytest.approx(cold.objective, rel=1e-6), name
