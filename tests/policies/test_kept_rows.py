"""A `per_job` policy's rows kept per kind of job (session.JobRows): the declaration must hold,
and the kept rows must give what stating the whole problem gives, through arrivals, departures
and jobs whose weight, throughputs or scale factor change."""

import numpy as np
import pytest

from gavel_ng.cluster import Cluster
from gavel_ng.policies import SchedulingProblem, list_policies, solve
from gavel_ng.policies.lp.pipeline import agnostic_problem
from gavel_ng.policies.lp.problem import Problem
from gavel_ng.policies.lp.warm.session import SOLVER, PolicySession
from gavel_ng.policies.lp.warm.warm_lp import dense_rows, warm_objective
from gavel_ng.policies.registry import get_policy

PER_JOB = [name for name in list_policies() if get_policy(name).per_job]


def problem(table, cluster, n, seed, **kw):
    keys = table.job_keys
    rng = np.random.default_rng(seed)
    cap = cluster.capacity()
    pick = rng.choice([k for k, key in enumerate(keys) if key[1] <= cap.max()], n)
    T = table.matrix([keys[k] for k in pick], cluster.worker_types)
    sf = np.array([keys[k][1] for k in pick], float)
    w = np.where(rng.random(n) < 0.3, 3.0, 1.0)
    return SchedulingProblem.build([f"j{i}" for i in range(n)], cluster.worker_types, cap, T, scale_factors=sf,
                                   weights=w, steps_remaining=rng.uniform(1e3, 1e6, n), **kw)


def stated_rows(name, inp):
    spec = get_policy(name)
    seen = Problem(agnostic_problem(inp) if spec.agnostic else inp)
    objective = warm_objective(seen, spec.fn(seen))
    assert objective is not None, name
    return dense_rows(seen, objective)


@pytest.mark.parametrize("soft", [False, True])
def test_per_job_declaration_holds(reference_table, soft):
    """Every policy declared per_job states each job's row (and second-phase costs) on that job
    alone as it does among all of them (with stated preferences too, which add a second phase)."""
    assert {"las", "las_pareto", "las_agnostic"} <= set(PER_JOB)
    cluster = Cluster.parse("v100=8,p100=4,k80=12")
    inp = problem(reference_table, cluster, 25, seed=3, soft_preferences=soft)
    for name in PER_JOB:
        whole = stated_rows(name, inp)
        for i in range(inp.num_jobs):
            alone = stated_rows(name, inp.subset([i]))
            for a, b in zip(alone, whole):
                assert (a is None) == (b is None), name
                if a is not None:
                    np.testing.assert_allclose(a[0], b[i], rtol=1e-12, err_msg=name)


def churn(table, cluster, steps, seed):
    """Problems through arrivals, departures and changes of live jobs' weight, throughputs (a
    throughput estimate moving) and scale factor."""
    keys = table.job_keys
    T_all = table.matrix(keys, cluster.worker_types)
    rng = np.random.default_rng(seed)
    fits = [k for k, key in enumerate(keys) if key[1] <= cluster.capacity().max()]
    pick = rng.choice(fits, 300)
    sf_all = np.array([keys[k][1] for k in pick], float)
    T_job = T_all[pick].copy()
    weight = np.ones(300)
    active, nxt = list(range(10)), 10
    for step in range(steps):
        u = rng.random()
        if u < 0.35 and len(active) > 2:
            active.pop(int(rng.integers(len(active))))
        elif u < 0.7:
            active.append(nxt)
            nxt += 1
        elif u < 0.8:
            weight[rng.choice(active)] = rng.choice([0.5, 2.0, 4.0])
        elif u < 0.9:
            T_job[rng.choice(active)] *= rng.uniform(0.8, 1.2)
        else:
            m = rng.choice(active)
            sf_all[m] = 1.0 if sf_all[m] > 1 else 2.0
        ids = np.array(active)
        yield SchedulingProblem.build([str(i) for i in active], cluster.worker_types, cluster.capacity(),
                                      T_job[ids], scale_factors=sf_all[ids], weights=weight[ids])


@pytest.mark.parametrize("name", ["las", "las_pareto", "las_agnostic"])
def test_kept_rows_match_cold_solves(reference_table, name):
    """Each warm solve on kept rows reaches the cold solve's objective and is a valid allocation;
    each kind of job (throughputs, scale factor, weight) is stated once."""
    cluster = Cluster.parse("v100=6,p100=6,k80=6")
    session = PolicySession(name, cluster.capacity())
    kinds = set()
    for inp in churn(reference_table, cluster, steps=60, seed=5):
        warm = session.solve(inp)
        assert warm.solver == SOLVER
        warm.allocation.check()
        cold = solve(inp, name)
        assert warm.objective == pytest.approx(cold.objective, rel=1e-6, abs=1e-9)
        kinds |= {(t.tobytes(), s, w) for t, s, w in zip(inp.throughputs, inp.scale_factors, inp.weights)}
    assert session.rows_stated == len(kinds)


def test_kept_rows_are_deterministic(reference_table):
    """The same problems in the same order give the same allocations, to the bit."""
    cluster = Cluster.parse("v100=4,p100=4,k80=4")
    runs = []
    for _ in range(2):
        session = PolicySession("las", cluster.capacity())
        runs.append([session.solve(inp).allocation.values for inp in churn(reference_table, cluster, 40, seed=7)])
    for a, b in zip(*runs):
        np.testing.assert_array_equal(a, b)


def test_a_restated_job_is_not_carried_on_stale_rows(reference_table):
    """A live job whose weight changes gets its new row: the level moves as a cold solve's does."""
    cluster = Cluster.parse("v100=2,p100=2,k80=2")
    inp = problem(reference_table, cluster, 6, seed=1)
    session = PolicySession("las", cluster.capacity())
    session.solve(inp)
    heavier = SchedulingProblem.build(inp.job_ids, inp.worker_types, inp.capacity, inp.throughputs,
                                      scale_factors=inp.scale_factors, weights=inp.weights * np.r_[10.0, np.ones(5)])
    warm, cold = session.solve(heavier), solve(heavier, "las")
    assert warm.objective == pytest.approx(cold.objective, rel=1e-6)
    np.testing.assert_allclose(warm.allocation.values.sum(axis=1)[0], cold.allocation.values.sum(axis=1)[0],
                               rtol=1e-6)



def test_a_live_job_whose_throughputs_change_gets_its_new_kind(reference_table):
    """A live job (its slot and its kind's tag kept) whose throughputs change, by a factor or only
    in the last bits, is looked up again: each solve matches the cold one and states its new kind."""
    cluster = Cluster.parse("v100=2,p100=2,k80=2")
    inp = problem(reference_table, cluster, 6, seed=2)
    session = PolicySession("las", cluster.capacity())
    session.solve(inp)
    for j, (col, factor) in enumerate([(0, 3.0), (2, 0.5), (1, 1.0 + 1e-15)]):
        T = inp.throughputs.copy()
        T[j, col] *= factor
        assert T[j, col] != inp.throughputs[j, col]
        inp = SchedulingProblem.build(inp.job_ids, inp.worker_types, inp.capacity, T,
                                      scale_factors=inp.scale_factors, weights=inp.weights)
        before = session.rows_stated
        warm, cold = session.solve(inp), solve(inp, "las")
        assert warm.objective == pytest.approx(cold.objective, rel=1e-6)
        assert session.rows_stated == before + 1
