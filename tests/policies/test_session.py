import numpy as np
import pytest

from gavel_ng.cluster import Cluster
from gavel_ng.policies import REGISTRY, SchedulingProblem, agnostic_throughputs, policy, solve
from gavel_ng.policies.lp.warm.session import SOLVER, PolicySession, warm_objective

WARM = SOLVER


@pytest.fixture
def scratch_policies():
    """Policies registered by a test are removed afterwards (the registry is global)."""
    with REGISTRY.kept():
        yield


def churn(table, cluster, steps=30, seed=1):
    """Problems through arrivals and departures: (active job ids, T, scale factors, weights, remaining)."""
    keys = table.job_keys
    T_all = table.matrix(keys, cluster.worker_types)
    rng = np.random.default_rng(seed)
    active, nxt = list(range(12)), 12
    key = rng.integers(0, len(keys), 500)
    weight = np.where(rng.random(500) < 0.3, 5.0, 1.0)
    remaining = rng.uniform(1e3, 1e6, 500)
    for step in range(steps):
        if step and rng.random() < 0.5 and len(active) > 3:
            active.pop(int(rng.integers(len(active))))
        elif step:
            active.append(nxt)
            nxt += 1
        ids = np.array(active)
        sf = np.array([keys[k][1] for k in key[ids]], float)
        yield list(active), T_all[key[ids]], sf, weight[ids], remaining[ids] * (1 - step / 40)


def build(cluster, active, T, sf, w, remaining=None):
    return SchedulingProblem.build([str(i) for i in active], cluster.worker_types, cluster.capacity(), T,
                                   scale_factors=sf, weights=w, steps_remaining=remaining)


@pytest.mark.parametrize("blind", [False, True])
def test_warm_lp_matches_cold_solve(reference_table, blind):
    """Through arrivals and departures the warm LP reaches the cold optimum of `las_pareto`
    (both phases; `las` is its first).

    With blind=True both see agnostic throughputs: the LP that las_agnostic solves
    (its spreading over types afterwards depends on which optimal vertex was found).
    """
    cluster = Cluster.parse("v100=8,p100=8,k80=8", gpus_per_server=4)
    cap = cluster.capacity()
    warm, warm_agnostic = PolicySession("las_pareto", cap), PolicySession("las_pareto_agnostic", cap)
    for active, T_real, sf, w, _ in churn(reference_table, cluster):
        T = agnostic_throughputs(T_real) if blind else T_real
        sol = warm.solve(build(cluster, active, T, sf, w))
        assert sol.solver == WARM
        x = sol.allocation.values
        cold = solve(build(cluster, active, T, sf, w), "las_pareto").allocation.values
        thr_eq = T @ (cap / cap.sum())
        objective = [(sf * (T * a).sum(axis=1) / (w * thr_eq)).min() for a in (x, cold)]
        assert objective[0] == pytest.approx(objective[1], rel=1e-6, abs=1e-9)
        total = [(sf * (T * a).sum(axis=1) / thr_eq).sum() for a in (x, cold)]   # the second phase's
        assert total[0] == pytest.approx(total[1], rel=1e-6)
        assert (x.sum(axis=1) <= 1 + 1e-9).all() and (sf @ x <= cap + 1e-9).all()
        assert (sf @ x).sum() == pytest.approx((sf @ cold).sum(), rel=1e-6)
        ag = warm_agnostic.solve(build(cluster, active, T_real, sf, w))
        xa = ag.allocation.values
        assert ag.solver == WARM
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
            assert warm.solver == WARM, name   # all four are max-min objectives over one row per job
            assert warm.objective == pytest.approx(cold.objective, rel=1e-6), name


def test_changed_coefficients_are_rewritten(reference_table):
    """makespan's rows scale with each job's remaining steps, which shrink between solves; the
    live slots take the new coefficients (a stale model would answer the first solve's LP)."""
    cluster = Cluster.parse("v100=8,p100=8,k80=8")
    session = PolicySession("makespan", cluster.capacity())
    for active, T, sf, w, remaining in churn(reference_table, cluster, steps=20, seed=4):
        inp = build(cluster, active, T, sf, w, remaining)
        warm, cold = session.solve(inp), solve(inp, "makespan")
        assert warm.solver == WARM
        assert warm.objective == pytest.approx(cold.objective, rel=1e-6)


def test_capacity_may_change_between_solves(reference_table):
    cluster = Cluster.parse("v100=8,p100=8,k80=8")
    session = PolicySession("las", cluster.capacity())
    for step, (active, T, sf, w, _) in enumerate(churn(reference_table, cluster, steps=12, seed=2)):
        cap = cluster.capacity() - np.array([0, 1, 2]) * (step % 3)   # workers leave and come back
        inp = SchedulingProblem.build([str(i) for i in active], cluster.worker_types, cap, T, scale_factors=sf,
                                      weights=w)
        warm = session.solve(inp)
        assert warm.solver == WARM
        assert (sf @ warm.allocation.values <= cap + 1e-9).all()
        assert warm.objective == pytest.approx(solve(inp, "las").objective, rel=1e-6)


def test_warm_by_shape_not_by_name(reference_table, scratch_policies):
    """A policy of one's own is warm when its objective has the warm shape (here las with every
    job's weight doubled, which changes no allocation); a constraint of its own, a cross-job row
    or another kind of objective sends it through `solve`."""

    @policy("las_twice", agnostic=False)
    def las_twice(p):
        return p.maximize_min(p.normalized_thr / (2 * p.input.weights))

    @policy("las_capped", agnostic=False)
    def las_capped(p):
        p.add_constraint(p.thr <= 1e9)
        return p.maximize_min(p.normalized_thr)

    @policy("las_pairs_of_rows", agnostic=False)
    def las_pairs_of_rows(p):
        n = p.normalized_thr
        return p.maximize_min(n[:-1] + n[1:])

    cluster = Cluster.parse("v100=8,p100=8,k80=8")
    cap = cluster.capacity()
    sessions = {name: PolicySession(name, cap) for name in ("las", "las_twice", "las_capped", "las_pairs_of_rows",
                                                            "max_throughput")}
    for active, T, sf, w, _ in churn(reference_table, cluster, steps=6):
        inp = build(cluster, active, T, sf, w)
        sols = {name: s.solve(inp) for name, s in sessions.items()}
        assert sols["las_twice"].solver == WARM
        assert sols["las_twice"].objective == pytest.approx(sols["las"].objective / 2, rel=1e-9)
        for name in ("las_capped", "las_pairs_of_rows", "max_throughput"):
            assert sols[name].solver != WARM, name
            assert sols[name].objective == pytest.approx(solve(inp, name).objective, rel=1e-9), name


def test_shape_check(reference_table):
    from gavel_ng.policies.lp.problem import Problem

    cluster = Cluster.parse("v100=2,k80=2")
    T = np.array([[3.0, 1.0], [2.0, 2.0], [1.0, 0.5]])
    p = Problem(SchedulingProblem.build(["a", "b", "c"], cluster.worker_types, cluster.capacity(), T))
    assert warm_objective(p, p.maximize_min(p.normalized_thr)) is not None
    assert warm_objective(p, p.maximize_min(p.normalized_thr, then=p.thr)) is not None
    assert warm_objective(p, p.maximize_min(p.normalized_thr + 1.0)) is None     # a constant term
    assert warm_objective(p, p.maximize_min(p.normalized_thr[:2])) is None       # not one row per job
    assert warm_objective(p, p.maximize(p.thr)) is None
    p.add_constraint(p.thr >= 0.1)
    assert warm_objective(p, p.maximize_min(p.normalized_thr)) is None


def test_a_policy_that_solves_itself_is_never_warm(reference_table):
    cluster = Cluster.parse("v100=4,k80=4")
    session = PolicySession("isolated", cluster.capacity())
    T = np.array([[3.0, 1.0], [2.0, 2.0]])
    inp = SchedulingProblem.build(["a", "b"], cluster.worker_types, cluster.capacity(), T)
    for _ in range(2):
        sol = session.solve(inp)
        np.testing.assert_allclose(sol.allocation.values, solve(inp, "isolated").allocation.values)
    assert not session.is_warm
