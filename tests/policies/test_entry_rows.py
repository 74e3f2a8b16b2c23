"""A policy's constraints as rows over its allocation's entries (Solution.entry_rows, issue 37), and the LP's
view of entries that alone break a packing row (constraints.UserRows.alone_over)."""

import numpy as np
import pytest
from test_policy_constraints import _test_policies, register  # noqa: F401 (the fixture registers ours too)
from test_space_sharing import cluster_for, random_jobs

from gavel_ng.policies import SchedulingProblem, solve
from gavel_ng.policies.lp.problem import Problem

PRICES = np.array([3.0, 1.0])


@register("rows_budget")
def rows_budget(p):
    p.add_constraint(p.cost_per_hour(p.input.prices) <= 0.4 * float(p.input.prices @ p.input.capacity), name="budget")
    return p.maximize_min(p.normalized_thr)


@register("rows_floor_and_budget", agnostic=False)
def rows_floor_and_budget(p):
    p.add_constraint(p.thr[0] >= 0.1 * p.thr_fastest[0], name="floor")
    p.add_constraint(p.cost_per_hour(p.input.prices) <= 20.0, name="budget")
    return p.maximize_min(p.normalized_thr)


@register("rows_slow_job", agnostic=False)
def rows_slow_job(p):
    p.add_constraint(p.thr[0] <= 0.25 * p.thr_fastest[0], name="slow")
    return p.maximize_min(p.normalized_thr)


def problem(T, sf=None, capacity=(8, 8)):
    M = len(T)
    return SchedulingProblem.build([f"j{i}" for i in range(M)], ["v100", "k80"], list(capacity), T,
                                   scale_factors=sf, prices=PRICES)


def rows_hold_as_on_x(sol, inp: SchedulingProblem) -> np.ndarray:
    """The budget over the allocation's entries equals the LP's row at x; returns its value."""
    er = sol.entry_rows
    seen = Problem(inp)
    want = seen.cost_per_hour(inp.prices).value(sol.x)
    got = er.C @ sol.allocation.values.ravel()
    np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-9)
    assert er.names == ["budget"] and er.hi[0] == pytest.approx(0.4 * float(inp.prices @ inp.capacity))
    return got


@pytest.mark.parametrize("policy", ["rows_budget", "rows_budget_agnostic"])
def test_entry_rows_are_the_policys_rows_over_the_allocation(policy):
    rng = np.random.default_rng(0)
    inp = problem(rng.uniform(1, 10, (6, 2)), sf=[1, 1, 2, 4, 1, 2])
    sol = solve(inp, policy)
    assert rows_hold_as_on_x(sol, inp)[0] <= sol.entry_rows.hi[0] * (1 + 1e-6)


def test_entry_rows_of_concrete_pairs_sum_their_members_partner_variables(reference_table):
    """Space sharing by partner classes: a pair entry's time counts in both members' partner variables."""
    jobs = random_jobs(reference_table, 16, seed=3, sfs=(1,))
    cluster = cluster_for(16)
    inp = SchedulingProblem.from_jobs(cluster, jobs, reference_table, space_sharing=True)
    sol = solve(inp, "rows_budget")
    assert any(len(r) == 2 for r in sol.allocation.rows)    # (pairs in the allocation)
    rows_hold_as_on_x(sol, inp)


def test_nothing_to_export_without_constraints():
    assert solve(problem(np.ones((2, 2))), "las").entry_rows is None


def test_a_job_that_cannot_afford_a_type_runs_where_it_can():
    """8 V100s cost 24 $/h against a 12.8 $/h budget: no round that keeps the budget can run the job there,
    so the LP gives it the K80s (8 $/h) instead of a share of V100 time it could never use."""
    inp = problem(np.array([[10.0, 2.0], [5.0, 1.0]]), sf=[8, 1])
    sol = solve(inp, "rows_budget")
    X = sol.allocation.values
    assert X[0, 0] == 0.0 and X[0, 1] > 0.5
    assert Problem(inp).cost_per_hour(PRICES).value(sol.x)[0] <= 12.8 * (1 + 1e-6)


def test_no_entry_is_left_out_where_no_time_at_all_breaks_a_constraint():
    """A floor (thr_0 >= ...) fails at x = 0: leaving entries out could leave the LP with no solution, so
    nothing is left out, even the 8 V100s that break the budget by themselves."""
    inp = problem(np.array([[10.0, 2.0], [5.0, 1.0]]), sf=[8, 1])
    p = Problem(inp)
    rows_floor_and_budget(p)
    assert p.user_rows.alone_over is None
    p = Problem(inp)
    rows_budget(p)
    assert p.user_rows.alone_over is not None


def test_a_job_over_a_row_on_every_type_keeps_its_share():
    """A cap below what job 0 does anywhere: it has no column that keeps the row, so none is left out and
    the allocation holds the cap on average (the mechanism runs it on credit)."""
    inp = problem(np.array([[10.0, 4.0], [5.0, 1.0]]), capacity=(1, 1))
    sol = solve(inp, "rows_slow_job")
    thr0 = (inp.throughputs[0] * sol.allocation.values[0]).sum()
    assert 0 < thr0 <= 2.5 * (1 + 1e-6)
    assert sol.entry_rows.names == ["slow"]
