"""Reduced-cost fixing plus a dynamic program (`policies.fixing`) against HiGHS's MIP on the configuration
program's fractional relaxations: as good within MIP_GAP, feasible, deterministic."""

import numpy as np
import pytest

from gavel_ng.policies.lp.highs import LinearProgram
from gavel_ng.policies.rounds.configurations import MIP_GAP, config_values, program
from gavel_ng.policies.rounds.fixing import exact_by_fixing, knapsack_dp


def fractional_instance(seed: int):
    """A random configuration program whose LP relaxation is fractional (None when it is 0/1)."""
    rng = np.random.default_rng(seed)
    M, C, T = int(rng.integers(5, 40)), int(rng.integers(3, 16)), int(rng.integers(1, 4))
    pool = np.sort(rng.integers(0, T, C))
    S = rng.random((M, C)) * (rng.random((M, C)) < 0.5)
    need = rng.integers(1, 9, (M, C)).astype(float)
    cap = rng.integers(M // 2 + 1, 3 * M, T).astype(float)
    # the goodput policy's values (p = -1: near ties between jobs) or plain ones (knapsack-like)
    V = config_values(S, -1.0) if seed % 2 else S
    vr, vc, v, g, A, ub = program(V, need, S > 0, pool, cap)
    c = v / v.max()
    lp = LinearProgram(c, A, -np.inf, ub, 0.0, 1.0).run()
    x = lp.x
    if np.all((x < 1e-7) | (x > 1 - 1e-7)):
        return None
    return lp, c, A, ub, vr, g, pool[vc], cap


@pytest.mark.parametrize("seed", range(40))
def test_fixing_matches_highs_mip_within_the_gap(seed):
    inst = fractional_instance(seed)
    if inst is None:
        pytest.skip("integral relaxation")
    lp, c, A, ub, vr, g, pool, cap = inst
    on = exact_by_fixing(lp.x, lp.row_duals, c, A, ub, vr, g, pool, cap)
    assert on is not None   # these sizes stay within the dynamic program's limit
    assert (A @ on <= ub).all()
    mip = LinearProgram(c, A, -np.inf, ub, 0.0, 1.0, integrality=True, mip_gap=MIP_GAP).run()
    theirs = float(c[mip.x > 0.5].sum())
    assert float(c[on].sum()) >= theirs * (1 - MIP_GAP)
    again = exact_by_fixing(lp.x, lp.row_duals, c, A, ub, vr, g, pool, cap)
    assert (again == on).all()


def test_some_instances_are_fractional():
    """The comparison above is not vacuous."""
    assert sum(fractional_instance(s) is not None for s in range(40)) >= 20


def test_fractional_gpu_counts_hand_over_to_the_mip():
    inst = fractional_instance(next(s for s in range(40) if fractional_instance(s) is not None))
    lp, c, A, ub, vr, g, pool, cap = inst
    assert exact_by_fixing(lp.x, lp.row_duals, c, A, ub, vr, g + 0.5, pool, cap) is None


def test_a_tiny_limit_hands_over_to_the_mip():
    inst = fractional_instance(next(s for s in range(40) if fractional_instance(s) is not None))
    lp, c, A, ub, vr, g, pool, cap = inst
    assert exact_by_fixing(lp.x, lp.row_duals, c, A, ub, vr, g, pool, cap, limit=1.0) is None


def test_knapsack_dp_takes_whole_items():
    """Three jobs on one type of 6 GPUs: job 0 takes 4 GPUs (value 10) or 2 (6), jobs 1 and 2 take 3
    (7 and 5). Best: job 0 on 2 and job 1 (13), above job 0 on 4 (10) and jobs 1 and 2 (12)."""
    vr = np.array([0, 0, 1, 2])
    g = np.array([4.0, 2.0, 3.0, 3.0])
    c = np.array([10.0, 6.0, 7.0, 5.0])
    pool = np.zeros(4, np.int64)
    free = np.ones(4, bool)
    picks = knapsack_dp(np.array([0, 1, 2]), np.zeros(3, bool), free, c, vr, g, pool, (7,))
    assert sorted(picks.tolist()) == [1, 2]
    # job 2 must run: jobs 1 and 2 (12) beat job 0 on 2 and job 2 (11)
    must = knapsack_dp(np.array([0, 1, 2]), np.array([False, False, True]), free, c, vr, g, pool, (7,))
    assert sorted(must.tolist()) == [2, 3]
