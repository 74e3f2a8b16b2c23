"""The simulated executor's plain round (one job per entry, free restarts, no fluid shares; issue 31):
progress, finish times, GPU-seconds, cost, the clock and admission, checked by hand."""

import numpy as np

from gavel_ng.mechanism import make_plan
from gavel_ng.simulator.executor import JobArrays, SimExecutor

ROUND = 360.0


def executor(tiny_table, make_trace, rows):
    """`rows` (type, scale factor, steps, arrival) on v100 ($3/GPU-hour) and k80 ($1)."""
    trace = make_trace(rows)
    jobs = JobArrays.empty(tiny_table, ["v100", "k80"])
    return SimExecutor(jobs, lambda n: trace, ROUND, 2, prices=[3.0, 1.0])


def plan_of(entries, gpus=None, consolidated=None):
    """entries: (job, type) one GPU each."""
    E = len(entries)
    return make_plan([(m,) for m, _ in entries], list(range(E)), [t for _, t in entries], [1] * E,
                     gpus or [(i,) for i in range(E)], [False] * E, consolidated or [True] * E)


def test_a_plain_round_runs_finishes_and_charges(tiny_table, make_trace):
    """A (2 steps/s on a V100) is done 50 s into the round, C (1 step/s on a K80) runs all of it;
    a round later nothing finishes, and job 2 (arriving at 500 s) waits for the clock to pass."""
    ex = executor(tiny_table, make_trace, [("A", 1, 100, 0), ("C", 1, 1000, 0), ("C", 1, 50, 500)])
    assert ex.admit() == [0, 1]
    result = ex.execute(plan_of([(0, 0), (1, 1)]))
    np.testing.assert_array_equal(result.occupied, [50.0, ROUND])
    assert result.finished == [0] and result.plan is None
    np.testing.assert_array_equal(ex.jobs.remaining[:2], [0.0, 1000 - ROUND])
    assert ex.jobs.finish[0] == 50.0 and np.isnan(ex.jobs.finish[1])
    np.testing.assert_array_equal(ex.busy, [50.0, ROUND])
    np.testing.assert_array_equal(ex.jobs.gpu_seconds[:2], [50.0, ROUND])
    np.testing.assert_allclose(ex.jobs.cost[:2], [50 * 3 / 3600, ROUND * 1 / 3600])
    assert ex.run_seconds == 50 + ROUND and ex.clock == ROUND
    assert ex.integral == 2 * ROUND - (ROUND - 50)     # two jobs until A is done, then one
    assert ex.admit() == []                            # job 2 arrives at 500 s
    result = ex.execute(plan_of([(1, 1)]))
    assert result.finished == [] and ex.clock == 2 * ROUND and ex.run_seconds == 50 + 2 * ROUND
    np.testing.assert_array_equal(result.occupied, [ROUND])
    assert ex.jobs.remaining[1] == 1000 - 2 * ROUND and ex.integral == 2 * ROUND - (ROUND - 50) + ROUND
    assert ex.admit() == [2]


def test_a_split_entry_runs_at_its_unconsolidated_rate(tiny_table, make_trace):
    """The plain round reads the unconsolidated rate where an entry is split (W: 4 steps/s whole,
    2.5 split on V100s)."""
    ex = executor(tiny_table, make_trace, [("W", 4, 10_000, 0), ("W", 4, 10_000, 0)])
    ex.admit()
    plan = make_plan([(0,), (1,)], [0, 1], [0, 0], [4, 4], [(0, 1, 2, 3), (4, 5, 6, 7)], [True, True],
                     [True, False])
    ex.execute(plan)
    np.testing.assert_array_equal(ex.jobs.remaining, [10_000 - 4 * ROUND, 10_000 - 2.5 * ROUND])
    np.testing.assert_array_equal(ex.jobs.gpu_seconds, [4 * ROUND, 4 * ROUND])
