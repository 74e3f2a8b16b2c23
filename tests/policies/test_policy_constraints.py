"""A policy's own constraints hold in the returned allocation on every solver path (issue 12).

Paths: HiGHS with and without the leftover fill, the second phase, cvxpy (asked for, or
forced by a nonlinear constraint or a cvxpy objective), max and ratio objectives, the
agnostic variant, symmetric policies (job classes), space sharing and PolicySession.
"""

import cvxpy as cp
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_properties import problems
from test_space_sharing import cluster_for, random_jobs

import gavel_ng as g
from gavel_ng.errors import InputError, PolicyError
from gavel_ng.policies import SchedulingProblem, policy
from gavel_ng.policies.lp.pipeline import agnostic_problem
from gavel_ng.policies.lp.problem import Problem
from gavel_ng.policies.lp.warm.session import PolicySession

TEST_POLICIES: dict = {}   # registered only while this module's tests run (others list every policy)


def register(name, **kw):
    def keep(fn):
        TEST_POLICIES[name] = (fn, kw)
        return fn
    return keep


@pytest.fixture(scope="module", autouse=True)
def _test_policies():
    from gavel_ng.policies import REGISTRY

    with REGISTRY.kept():
        for name, (fn, kw) in TEST_POLICIES.items():
            policy(name, **kw)(fn)
        yield


SETTINGS = settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
PAPER = SchedulingProblem.build(["j0", "j1", "j2"], ["v100", "k80"], [1, 1], [[40, 10], [12, 4], [100, 50]])
PAPER_T = np.array([[40, 10], [12, 4], [100, 50]], dtype=float)

# ---- the example -------------------------------------------------------------------


@register("capped_linear", agnostic=False)
def capped_linear(p):
    p.add_constraint(p.thr[2] <= 20)
    return p.maximize_min(p.normalized_thr)


@register("capped_cvxpy", agnostic=False)
def capped_cvxpy(p):
    p.add_constraint(p.thr.cvx[2] <= 20)
    return p.maximize_min(p.normalized_thr)


@register("capped_nonlinear", agnostic=False)
def capped_nonlinear(p):
    p.add_constraint(cp.square(p.thr.cvx[2]) <= 400)   # convex, not affine: cvxpy must solve it
    return p.maximize_min(p.normalized_thr)


@register("capped_pareto", agnostic=False)
def capped_pareto(p):
    p.add_constraint(p.thr[2] <= 20)
    return p.maximize_min(p.normalized_thr, then=p.normalized_thr)


@register("capped_nofill", agnostic=False)
def capped_nofill(p):
    p.add_constraint(p.thr.cvx[2] <= 20)
    return p.maximize_min(p.normalized_thr, fill=False)


CAPPED = ["capped_linear", "capped_cvxpy", "capped_nonlinear", "capped_pareto", "capped_nofill"]


@pytest.mark.parametrize("name", CAPPED)
@pytest.mark.parametrize("solver", [None, "highs", "CLARABEL"])
def test_paper_example_keeps_j2_at_or_below_20(name, solver):
    sol = g.solve(PAPER, name, solver=solver)
    sol.allocation.check()
    thr = (PAPER_T * sol.allocation.values).sum(axis=1)
    assert thr[2] <= 20 * (1 + 1e-6), (name, solver, thr)
    assert not sol.warnings
    assert thr.min() > 0   # and the others still get time (the fill did not freeze the rest)


@pytest.mark.parametrize("name", CAPPED)
def test_paper_example_through_a_policy_session(name):
    sol = PolicySession(name, [1, 1]).solve(PAPER)
    assert (PAPER_T * sol.allocation.values).sum(axis=1)[2] <= 20 * (1 + 1e-6)


def test_linear_cvxpy_constraint_stays_on_highs_and_still_gets_the_fill():
    lin, cvx = g.solve(PAPER, "capped_linear"), g.solve(PAPER, "capped_cvxpy")
    assert cvx.solver.startswith("highs")
    np.testing.assert_allclose(cvx.allocation.values, lin.allocation.values, atol=1e-7)
    # the fill handed j0 and j1 the idle time j2 may not use
    assert (PAPER_T * lin.allocation.values).sum(axis=1)[0] > 20


def test_nonlinear_constraint_goes_to_cvxpy():
    assert not g.solve(PAPER, "capped_nonlinear").solver.startswith("highs")


@register("ratio_with_nonlinear", agnostic=False)
def ratio_with_nonlinear(p):
    p.add_constraint(cp.square(p.thr.cvx[0]) <= 1.0)
    return p.maximize_ratio(p.thr / p.thr_fastest, p.cost_per_hour(np.ones(len(p.input.worker_types))))


def test_a_constraint_no_backend_takes_is_an_error_naming_it():
    with pytest.raises(InputError, match="constraint.*ratio objective"):
        g.solve(PAPER, "ratio_with_nonlinear")


@register("impossible", agnostic=False)
def impossible(p):
    p.add_constraint(p.thr[0] >= 1e6)
    return p.maximize_min(p.normalized_thr)


def test_infeasible_constraints_are_the_policys_error_naming_it():
    """Not a solver failure: no fallback under the policy's name, an error naming it and its code (issue 37)."""
    with pytest.raises(PolicyError) as info:
        g.solve(PAPER, "impossible")
    text = str(info.value)
    assert text.startswith("policy='impossible': failed at ") and "test_policy_constraints.py:" in text
    assert "admit no allocation" in text and "\n" not in text

# ---- random problems, random bounds ---------------------------------------------------------


BOUNDS: dict = {}   # set by each example: fractions the policies below turn into bounds


def _limits(p: Problem):
    """Per-job (lower, upper) steps/s from the example's fractions; feasible by construction:
    scaling each job's row of X_isolated by a factor in [lower, upper] / thr_isolated is valid."""
    M = p.num_jobs
    lo_f, up_f, has_lo, has_up = (np.resize(BOUNDS[k], M) for k in ("lo", "up", "has_lo", "has_up"))
    lower = np.where(has_lo & (lo_f > 1e-3), lo_f * p.thr_isolated, 0.0)
    upper = np.where(has_up, np.maximum(up_f * p.thr_fastest, lower), np.inf)
    return lower, upper


def _constrain(p: Problem) -> None:
    lower, upper = _limits(p)
    form = BOUNDS["form"]
    up, lo = np.flatnonzero(np.isfinite(upper)), np.flatnonzero(lower > 0)
    if form == "linear":
        if len(up):
            p.add_constraint(p.thr[up] <= upper[up])
        if len(lo):
            p.add_constraint(p.thr[lo] >= lower[lo])
    elif form == "cvxpy":
        if len(up):
            p.add_constraint(p.thr.cvx[up] <= upper[up])
        if len(lo):
            p.add_constraint(lower[lo] <= p.thr.cvx[lo])
    else:  # nonlinear but equivalent (thr >= 0), scaled as a careful user would
        if len(up):
            s = np.maximum(upper[up], 1e-3)
            p.add_constraint(cp.square(p.thr.cvx[up] / s) <= (upper[up] / s) ** 2)
        if len(lo):
            p.add_constraint(cp.sqrt(p.thr.cvx[lo] / lower[lo]) >= 1)
    total = lower.sum() + BOUNDS["sum_f"] * p.thr_fastest.sum()   # and one bound over all jobs
    p.add_constraint(p.thr.sum() <= total)


@register("bounded_maxmin")
def bounded_maxmin(p):
    _constrain(p)
    return p.maximize_min(p.normalized_thr / p.input.weights, fill=BOUNDS["fill"])


@register("bounded_pareto")
def bounded_pareto(p):
    _constrain(p)
    return p.maximize_min(p.normalized_thr, then=p.normalized_thr)


@register("bounded_symmetric", symmetric=True)
def bounded_symmetric(p):
    _constrain(p)
    return p.maximize_min(p.normalized_thr)


@register("bounded_sum")
def bounded_sum(p):
    _constrain(p)
    return p.maximize(p.thr / p.thr_fastest)


@register("bounded_cost")
def bounded_cost(p):
    _constrain(p)
    return p.maximize_ratio(p.thr / p.thr_fastest, p.cost_per_hour(p.input.prices))


@register("bounded_log")
def bounded_log(p):
    _constrain(p)
    return cp.Maximize(cp.sum(cp.log(p.normalized_thr.cvx + 1e-3)))


def bounds():
    frac = st.floats(0.0, 1.0)
    return st.fixed_dictionaries({
        "lo": st.lists(frac, min_size=1, max_size=10), "up": st.lists(st.floats(0.02, 1.0), min_size=1, max_size=10),
        "has_lo": st.lists(st.booleans(), min_size=1, max_size=10),
        "has_up": st.lists(st.booleans(), min_size=1, max_size=10),
        "sum_f": st.floats(0.05, 2.0), "fill": st.booleans(), "form": st.sampled_from(["linear", "cvxpy", "nonlinear"]),
    })


def assert_bounds_hold(inp: SchedulingProblem, name: str, sol) -> None:
    sol.allocation.check()
    seen = Problem(agnostic_problem(inp) if name.endswith("_agnostic") else inp)
    lower, upper = _limits(seen)
    thr = seen.thr.value(sol.x)
    rel = 1e-6 if sol.solver.startswith("highs") else 1e-5   # interior points: about 1e-5
    tol = rel * np.maximum(1.0, np.abs(thr))
    assert (thr <= upper + tol).all(), (name, BOUNDS["form"], thr, upper)
    assert (thr >= lower - tol).all(), (name, BOUNDS["form"], thr, lower)
    total = lower.sum() + BOUNDS["sum_f"] * seen.thr_fastest.sum()
    assert thr.sum() <= total * (1 + rel) + 1e-9
    assert sol.ok and not sol.warnings, sol.warnings


POLICIES = ["bounded_maxmin", "bounded_pareto", "bounded_symmetric", "bounded_sum", "bounded_log",
            "bounded_maxmin_agnostic"]


@SETTINGS
@given(problems(max_jobs=8), bounds())
def test_random_bounds_hold_on_every_path(inp, b):
    BOUNDS.clear()
    BOUNDS.update({k: np.asarray(v) if isinstance(v, list) else v for k, v in b.items()})
    for name in POLICIES + (["bounded_cost"] if b["form"] != "nonlinear" else []):
        assert_bounds_hold(inp, name, g.solve(inp, name))
    assert_bounds_hold(inp, "bounded_maxmin", g.solve(inp, "bounded_maxmin", solver="CLARABEL"))
    assert_bounds_hold(inp, "bounded_maxmin", PolicySession("bounded_maxmin", inp.capacity).solve(inp))


@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                 HealthCheck.function_scoped_fixture])
@given(st.integers(0, 2**16), st.integers(3, 14), bounds())
def test_random_bounds_hold_with_space_sharing(reference_table, seed, n, b):
    BOUNDS.clear()
    BOUNDS.update({k: np.asarray(v) if isinstance(v, list) else v for k, v in b.items()})
    jobs = random_jobs(reference_table, n, seed)
    cluster = cluster_for(n)
    inp = SchedulingProblem.from_jobs(cluster, jobs, reference_table, now=200.0, space_sharing=True)
    for name in ["bounded_maxmin_packed", "bounded_pareto_packed", "bounded_sum_packed"]:
        sol = g.solve(inp, name)
        assert_bounds_hold(inp, name, sol)


def test_session_on_the_warm_policy_is_unchanged():
    """las has no constraints of its own: the warm path still answers it, as before."""
    sol = PolicySession("las", [1, 1]).solve(PAPER)
    assert "warm" in sol.solver
    np.testing.assert_allclose(sol.allocation.values, g.solve(PAPER, "las").allocation.values, atol=1e-6)
