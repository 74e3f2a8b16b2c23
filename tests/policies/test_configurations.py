"""The configuration 0/1 program on the project's LP layer: `assign` is optimal, LinearProgram solves MIPs."""

import itertools

import numpy as np
import pytest
import scipy.sparse as sp

from gavel_ng.policies.lp.highs import LinearProgram
from gavel_ng.policies.rounds.configurations import assign


def brute_force(V, need, keep, pool, cap) -> float:
    """The best sum of values over every assignment of at most one kept column per job."""
    M, C = V.shape
    options = [[-1] + [c for c in range(C) if keep[m, c] and V[m, c] > 0] for m in range(M)]
    best = 0.0
    for pick in itertools.product(*options):
        used = np.zeros(len(cap))
        for m, c in enumerate(pick):
            if c >= 0:
                used[pool[c]] += need[m, c]
        if (used <= cap + 1e-9).all():
            best = max(best, sum(V[m, c] for m, c in enumerate(pick) if c >= 0))
    return best


def value_of(choice, V, need, keep, pool, cap) -> float:
    used = np.zeros(len(cap))
    for m, c in enumerate(choice):
        if c >= 0:
            assert keep[m, c] and V[m, c] > 0
            used[pool[c]] += need[m, c]
    assert (used <= cap + 1e-9).all()
    return float(sum(V[m, c] for m, c in enumerate(choice) if c >= 0))


@pytest.mark.parametrize("seed", range(25))
def test_assign_is_the_brute_force_optimum(seed):
    rng = np.random.default_rng(seed)
    M, C, T = int(rng.integers(2, 6)), int(rng.integers(2, 5)), int(rng.integers(1, 3))
    pool = rng.integers(0, T, C)
    V = rng.random((M, C)) * (rng.random((M, C)) < 0.7)
    need = rng.integers(1, 5, (M, C)).astype(float)
    keep = rng.random((M, C)) < 0.9
    cap = rng.integers(1, 7, T).astype(float)
    choice = assign(V, need, keep, pool, cap)
    assert value_of(choice, V, need, keep, pool, cap) == pytest.approx(brute_force(V, need, keep, pool, cap),
                                                                        rel=1e-6, abs=1e-12)


def test_assign_with_nothing_to_choose():
    V = np.zeros((3, 2))
    assert assign(V, np.ones((3, 2)), np.ones((3, 2), bool), np.array([0, 0]), np.array([4.0])).tolist() == [-1] * 3


def test_linear_program_solves_a_knapsack_as_integers():
    """The relaxation of this knapsack takes half an item; the 0/1 program takes whole ones."""
    value, weight = np.array([10.0, 7.0, 6.0]), np.array([4.0, 3.0, 3.0])
    A = sp.csr_matrix(weight[None, :])
    relaxed = LinearProgram(value, A, -np.inf, 6.0, 0.0, 1.0).run()
    assert relaxed.ok and relaxed.objective == pytest.approx(10 + 7 * 2 / 3)
    mip = LinearProgram(value, A, -np.inf, 6.0, 0.0, 1.0, integrality=True, mip_gap=1e-9).run()
    assert mip.ok and mip.feasible and mip.objective == pytest.approx(13.0)
    assert mip.x.round().tolist() == [0.0, 1.0, 1.0]
    assert not mip.row_duals.any()   # a MIP has none


def test_mixed_integrality_per_column():
    """Only the flagged column is integral: max x0 + x1, x0 + x1 <= 1.5, x0 integral, x0 >= x1 preferred."""
    A = sp.csr_matrix(np.ones((1, 2)))
    res = LinearProgram(np.array([1.0, 0.9]), A, -np.inf, 1.5, 0.0, 1.0, integrality=[True, False]).run()
    assert res.ok and res.x == pytest.approx([1.0, 0.5])
