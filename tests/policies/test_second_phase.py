"""The lexicographic second phase of max-min objectives (Objective.then, used by las).

A max-min LP pins only its bottleneck: any vertex that keeps every other job at or
above the minimum is optimal, and the one a simplex returns may park those jobs on
slow types or in pairs while GPUs stay idle. The second phase holds the minimum and
maximizes the total normalized throughput.
"""

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gavel_ng.cluster import Cluster
from gavel_ng.jobs import Job
from gavel_ng.pairs import PairTable
from gavel_ng.policies import SchedulingProblem, solve
from gavel_ng.policies.lp.problem import Problem


def table_problem(table, n: int, seed: int, space_sharing: bool) -> SchedulingProblem:
    """n jobs of the reference table's types (a quarter 2-GPU), weights 1 or 2, on n/4 GPUs a type."""
    rng = np.random.default_rng(seed)
    jobs = []
    for i in range(n):
        sf = int(rng.choice([1, 1, 1, 2]))
        keys = [k for k in table.job_keys if k[1] == sf]
        jobs.append(Job(f"j{i}", keys[rng.integers(len(keys))][0], sf, weight=float(rng.choice([1, 1, 2]))))
    m = max(2, n // 4)
    return SchedulingProblem.from_jobs(Cluster({"v100": m, "p100": m, "k80": m}), jobs, table,
                                       space_sharing=space_sharing)


def hand_made(pairs: bool) -> SchedulingProblem:
    """2 V100 + 1 K80. z runs equally fast on both (the bottleneck, normalized 1.0 at best);
    a1 and a2 run 2x faster on a V100 (1.2 alone there) and may share one V100 at 0.9 each."""
    T = np.array([[1.0, 1.0], [2.0, 1.0], [2.0, 1.0]])
    frac = np.zeros((2, 2, 2))
    frac[1, 1, 0] = 0.9
    table = PairTable(np.array([0, 1, 1]), frac) if pairs else None
    return SchedulingProblem.build(["z", "a1", "a2"], ["v100", "k80"], [2, 1], T, pairs=table)


def test_hand_made_instance_pairs_and_slow_types_only_where_they_cost_nothing():
    inp = hand_made(pairs=True)
    p = Problem(inp)
    # what the single LP cannot tell apart: z on a V100 and a1+a2 sharing the other one full time
    # keeps the minimum at 1.0 (a1, a2 at 0.9 * 1.2 = 1.08), one V100 and the K80 idle
    bad = np.zeros(p.num_vars)
    z_v100 = (p.members[p.var_row, 0] == 0) & (p.var_col == 0) & p.single_var
    bad[z_v100] = 1.0
    bad[~p.single_var] = 1.0
    assert p.normalized_thr.value(bad) == pytest.approx([1.0, 1.08, 1.08])

    single = p.solve(p.maximize_min(p.normalized_thr))   # HiGHS returns a1, a2 at 1.05 here
    sol = solve(inp, "las_pareto")
    sol.allocation.check()
    level = p.normalized_thr.value(sol.x)
    assert sol.objective == pytest.approx(single.objective, rel=1e-6) == pytest.approx(1.0, rel=1e-6)
    assert level == pytest.approx([1.0, 1.2, 1.2], rel=1e-6)         # each a on a V100 of its own
    assert all(len(r) == 1 for r in sol.allocation.rows)             # nobody pairs: it would cost them
    assert level.sum() >= p.normalized_thr.value(single.x).sum() - 1e-9


def test_hand_made_instance_without_pairs_puts_the_bottleneck_on_the_slow_type():
    inp = hand_made(pairs=False)
    sol = solve(inp, "las_pareto")
    values = dict(zip([r[0] for r in sol.allocation.rows], sol.allocation.values))
    assert values["z"] == pytest.approx([0.0, 1.0])                  # z loses nothing on the K80
    assert values["a1"] == pytest.approx([1.0, 0.0]) and values["a2"] == pytest.approx([1.0, 0.0])


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(seed=st.integers(0, 10_000), n=st.integers(2, 30), packed=st.booleans())
def test_second_phase_keeps_the_minimum_and_never_lowers_the_total(reference_table, seed, n, packed):
    inp = table_problem(reference_table, n, seed, packed)
    p = Problem(inp)
    fair = p.normalized_thr / inp.weights
    single = p.solve(p.maximize_min(fair))
    lexi = p.solve(p.maximize_min(fair, then=p.normalized_thr))
    lexi.allocation.check()
    assert lexi.objective == pytest.approx(single.objective, rel=1e-6)
    total = p.normalized_thr.value(lexi.x).sum()
    assert total >= p.normalized_thr.value(single.x).sum() - 1e-6 * max(1.0, total)
    # class rows (las_pareto is symmetric) reach the same total as job rows
    assert p.normalized_thr.value(solve(inp, "las_pareto").x).sum() == pytest.approx(total, rel=1e-5)


def test_cvxpy_path_runs_the_second_phase_too(reference_table):
    inp = table_problem(reference_table, 12, 3, space_sharing=False)
    p = Problem(inp)
    obj = p.maximize_min(p.normalized_thr / inp.weights, then=p.normalized_thr)
    highs, clarabel = p.solve(obj), p.solve(obj, "clarabel")
    assert clarabel.ok and clarabel.objective == pytest.approx(highs.objective, rel=1e-4)
    assert p.normalized_thr.value(clarabel.x).sum() == pytest.approx(p.normalized_thr.value(highs.x).sum(), rel=1e-4)
