"""Policy-specific behaviour beyond validity: SLOs, cost, FTF optimality, fallbacks."""

import cvxpy as cp
import numpy as np
import pytest

import gavel_ng as g
from gavel_ng.errors import InputError
from gavel_ng.policies import SchedulingProblem
from gavel_ng.policies.builtin.cost import work_per_dollar
from gavel_ng.policies.builtin.ftf import rho
from gavel_ng.policies.lp.problem import Problem
from gavel_ng.policies.lp.solving import FormulationError


def small(seed=0, M=6, **kw):
    rng = np.random.default_rng(seed)
    T = rng.uniform(1, 10, (M, 3)) * [[3, 2, 1]]
    steps = rng.uniform(1e4, 1e5, M)
    return SchedulingProblem.build([f"j{i}" for i in range(M)], ["v100", "p100", "k80"], [2, 2, 2], T,
                                   steps_remaining=steps, time_since_arrival=rng.uniform(0, 3600, M),
                                   prices=[2.48, 1.46, 0.45], **kw)


@pytest.mark.parametrize("seed", range(3))
def test_ftf_bisection_matches_convex_solve(seed):
    inp = small(seed, steps_total=None)
    sol = g.solve(inp, "ftf")
    p = Problem(inp)
    R, t = inp.steps_remaining, inp.time_since_arrival
    D = inp.steps_total / p.thr_isolated
    x = p.cvx_variable
    thr = p.thr.A @ x
    r = cp.Variable()
    cons = [x >= 0, x <= 1, p.job_rows @ x <= 1, p.capacity_rows @ x <= inp.capacity,
            t + cp.multiply(R, cp.inv_pos(thr)) <= r * D]
    cp.Problem(cp.Minimize(r), cons).solve(solver="CLARABEL")
    assert sol.objective == pytest.approx(r.value, rel=2e-3)
    assert sol.objective == pytest.approx(rho(p, sol.x).max(), rel=1e-9)


def test_min_cost_is_cheaper_per_work_than_max_throughput():
    inp = small(1)
    p = Problem(inp)
    cheap, fast = g.solve(inp, "min_cost"), g.solve(inp, "max_throughput")
    ratio = p.maximize_ratio(p.thr / p.thr_fastest, p.cost_per_hour(inp.prices))
    assert ratio.value(cheap.x) >= ratio.value(fast.x) - 1e-9
    assert cheap.objective == pytest.approx(work_per_dollar(p, inp.prices).value(cheap.x).sum())


def test_min_cost_slo_meets_feasible_slos_and_names_impossible_ones():
    inp = small(2, slo_s=[np.inf] * 6)
    p = Problem(inp)
    # job 0: generous deadline; job 1: faster than it can run even alone on a V100
    slo = np.full(6, np.inf)
    slo[0] = inp.time_since_arrival[0] + 2 * inp.steps_remaining[0] / p.thr_fastest[0]
    slo[1] = inp.time_since_arrival[1] + 0.5 * inp.steps_remaining[1] / p.thr_fastest[1]
    inp2 = SchedulingProblem.build(inp.job_ids, inp.worker_types, inp.capacity, inp.throughputs,
                                   steps_remaining=inp.steps_remaining, time_since_arrival=inp.time_since_arrival,
                                   prices=inp.prices, slo_s=slo)
    sol = g.solve(inp2, "min_cost_slo")
    sol.allocation.check()
    thr = Problem(inp2).thr.value(sol.x)
    need0 = inp2.steps_remaining[0] / (slo[0] - inp2.time_since_arrival[0])
    assert thr[0] >= need0 * (1 - 1e-6)
    assert len(sol.warnings) == 1 and "j1" in sol.warnings[0] and "j0" not in sol.warnings[0]


def test_infeasible_custom_constraint_is_the_formulations_error_not_a_fallback():
    """Validity alone admits X = 0, so constraints that admit nothing are the policy's own error (issue 37):
    no silent isolated allocation under the policy's name."""
    inp = small(3)
    p = Problem(inp)
    p.add_constraint(p.thr >= 1e9)  # impossible
    with pytest.raises(FormulationError, match="admit no allocation"):
        p.solve(p.maximize(p.thr))


def test_duration_policies_need_steps():
    inp = SchedulingProblem.build(["a"], ["v100"], [1], [[1.0]])
    with pytest.raises(InputError, match="steps_remaining"):
        g.solve(inp, "makespan")


def test_min_cost_needs_prices():
    inp = SchedulingProblem.build(["a"], ["v100"], [1], [[1.0]])
    with pytest.raises(InputError, match="prices"):
        g.solve(inp, "min_cost")


def test_allox_runs_shortest_jobs_on_their_best_gpus():
    T = np.array([[10.0, 1.0], [10.0, 5.0], [10.0, 5.0]])
    inp = SchedulingProblem.build(["a", "b", "c"], ["v100", "k80"], [1, 1], T, steps_remaining=[100, 100, 1e6])
    x = g.solve(inp, "allox").allocation.to_dict()
    assert x["a"]["v100"] == 1.0 and x["b"]["k80"] == 1.0
    assert sum(x["c"].values()) == 0.0


def test_fifo_prefers_earlier_jobs():
    inp = SchedulingProblem.build(["old", "new"], ["v100"], [1], [[5.0], [5.0]], time_since_arrival=[100, 1])
    x = g.solve(inp, "fifo").allocation.to_dict()
    assert x["old"]["v100"] == 1.0 and x["new"]["v100"] == 0.0


def test_water_filling_recovers_when_a_warm_resolve_stalls():
    """Hypothesis found this one: HiGHS's warm primal re-solve ends in status Unknown in a later
    round; the round is redone cold instead of falling back to the isolated allocation."""
    inp = SchedulingProblem.build(
        [f"j{i}" for i in range(10)], ["w0", "w1"], [2, 8], [[0, 1]] * 5 + [[2, 1]] * 3 + [[1, 1]] * 2,
        weights=[5, 5, 5, 2, 5, 1, 2, 5, 1, 1],
        steps_remaining=[26032.92533171, 20971.88895248, 6711.33964553, 26858.64139803, 10503.22211159,
                         32866.40472357, 29171.65221377, 21992.27347857, 54050.82434507, 2754.69722608],
        steps_total=[51230.98030756, 95051.32326296, 14501.54531069, 94870.07976901, 31251.96205585,
                     42390.31225236, 82787.48912266, 40978.99372328, 55004.40939854, 2853.15541298],
        time_since_arrival=[7247.89940774, 5412.26855547, 2768.91204045, 1606.52008775, 9699.25413216,
                            5160.68585548, 1158.65612471, 6234.89755538, 7766.83114342, 6130.03301053],
        prices=[0.42834733, 2.59463553])
    sol = g.solve(inp, "hierarchical")
    sol.allocation.check()
    assert sol.ok and not sol.warnings


@pytest.mark.parametrize("seed", range(12))
def test_makespan_leaves_no_job_on_a_slower_type_beside_an_idle_faster_one(seed):
    """The makespan LP pins only the job that sets the makespan; its second phase (the makespan
    held) gives the others the idle faster GPUs. Without it, the vertex left some job's time on a
    slower type while a faster one idled, in 11 of these 12 instances."""
    inp = small(seed, M=4)
    sol = g.solve(inp, "makespan")
    X = sol.allocation.values
    idle = inp.capacity - (X * inp.scale_factors[:, None]).sum(axis=0)
    for m in range(inp.num_jobs):
        for slow in range(3):
            for fast in range(3):
                if X[m, slow] > 1e-6 and inp.throughputs[m, fast] > inp.throughputs[m, slow] and idle[fast] > 1e-6:
                    pytest.fail(f"job {m}: {X[m, slow]:.3f} on type {slow} while type {fast} (faster) idles "
                                f"{idle[fast]:.3f}")
    # and the makespan is the one the first phase alone finds
    p = Problem(inp)
    R = inp.steps_remaining
    scale = float(R.max())
    one = p.solve(p.maximize_min(p.thr * (scale / R), report=lambda t: scale / t))
    assert sol.objective == pytest.approx(one.objective, rel=1e-6)


@pytest.mark.parametrize("bad", [np.nan, -1.0, np.inf])
def test_trusted_problems_still_check_what_sources_report(bad):
    """The allocator's problems skip the checks its own construction makes, not the throughputs a
    source reports: a bad one is named by job and type."""
    with pytest.raises(InputError, match=r"jobs\[b\]\.throughputs\.k80"):
        SchedulingProblem.build(["a", "b"], ["v100", "k80"], [1, 1], [[1.0, 1.0], [1.0, bad]], trusted=True)
