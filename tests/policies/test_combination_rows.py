"""Rows may be job combinations: the builder handles pairs today (space sharing builds on it)."""

import numpy as np
import pytest

import gavel_ng as g
from gavel_ng.policies import Combinations, SchedulingProblem
from gavel_ng.policies.lp.problem import Problem


def test_pair_rows_share_a_gpu_and_never_hurt_the_objective():
    T = np.array([[10.0], [10.0]])
    base = SchedulingProblem.build(["a", "b"], ["v100"], [1], T)
    rows = Combinations(members=[(0,), (1,), (0, 1)],
                        throughputs=np.array([[[10.0, 0.0]], [[10.0, 0.0]], [[7.0, 6.0]]]))
    packed = SchedulingProblem.build(["a", "b"], ["v100"], [1], T, combinations=rows)
    plain, shared = g.solve(base, "las"), g.solve(packed, "las")
    shared.allocation.check()
    assert shared.objective >= plain.objective - 1e-9
    assert shared.allocation.rows[2] == ("a", "b")
    # optimum: the pair 10/11 of the time, b alone 1/11: both reach 70/11 steps/s (vs 5 time slicing)
    assert np.allclose(shared.allocation.values[:, 0], [0.0, 1 / 11, 10 / 11], atol=1e-6)
    thr = Problem(packed).thr.value(shared.x)
    assert np.allclose(thr, [70 / 11, 70 / 11], atol=1e-6)
    assert plain.objective == pytest.approx(0.5) and shared.objective == pytest.approx(7 / 11)
