"""The simulator plans each round as far ahead as the runtime does (mechanism.plan_lead): what arrives or finishes
in a round's last 0.3 of a round (at most 30 s) is known to the plan after next, as on a cluster."""

import numpy as np
import pytest

from gavel_ng.cluster import Cluster
from gavel_ng.mechanism import plan_lead
from gavel_ng.simulator import SimConfig, simulate

ROUND = 100.0      # plans are made 30 s before a round ends


def run(tiny_table, make_trace, rows, cluster="v100=1", **config):
    plans = []
    cfg = SimConfig(round_seconds=ROUND, **{"policy": "las", **config})
    res = simulate(Cluster.parse(cluster), tiny_table, make_trace(rows), cfg, observe=plans.append)
    return res, plans


def test_the_lead_is_the_runtimes():
    assert plan_lead(20.0) == pytest.approx(6.0) and plan_lead(100.0) == pytest.approx(30.0)
    assert plan_lead(360.0) == 30.0 and plan_lead(3600.0) == 30.0


def test_an_arrival_after_the_plan_waits_a_round_more_on_a_busy_cluster(tiny_table, make_trace):
    """Job 1 arrives 80 s into round 1 while job 0 holds the only V100. Planned at the boundary, LAS gives it
    round 2 (done at 136 s); planned at 70 s, round 2's plan does not know it, so it runs in round 3."""
    rows = [("C", 1, 1000, 0), ("A", 1, 72, 80)]
    ahead, plans = run(tiny_table, make_trace, rows)
    boundary, bplans = run(tiny_table, make_trace, rows, plan_ahead=False)
    assert boundary.jobs.finish[1] == pytest.approx(ROUND + 36)
    assert ahead.jobs.finish[1] == pytest.approx(2 * ROUND + 36)
    assert plans[1].member_job.tolist() == [0] and 1 in bplans[1].member_job.tolist()


def test_an_arrival_after_the_plan_starts_on_an_idle_gpu_at_the_round_start(tiny_table, make_trace):
    """With a V100 idle, the same arrival (too late in round 1 to start then) starts as round 2 begins, in no
    allocation yet: what the runtime does with a job submitted after the plan was published."""
    rows = [("C", 1, 1000, 0), ("A", 1, 72, 80)]
    ahead, plans = run(tiny_table, make_trace, rows, cluster="v100=2")
    assert ahead.jobs.finish[1] == pytest.approx(ROUND + 36)
    e = plans[1].member_job.tolist().index(1)
    assert plans[1].rows[plans[1].member_entry[e]] == -1
    assert ahead.summary["jobs_unfinished"] == 0


def test_a_job_done_after_the_plan_is_planned_once_more_and_done_once(tiny_table, make_trace):
    """FIFO, one V100: job 0 is done 90 s into round 1, after round 2 was planned (70 s), so round 2's plan still
    gives it the GPU. The round runs without that entry and job 0 is done once, at 90 s. No waiting entry has an
    allocation on that GPU (FIFO gave job 1 none), so it idles for round 2, as the runtime's backfill leaves it;
    job 1 runs in round 3. Planned at the boundary, job 1 runs in round 2."""
    rows = [("A", 1, 180, 0), ("C", 1, 50, 10)]
    ahead, plans = run(tiny_table, make_trace, rows, policy="fifo")
    boundary, bplans = run(tiny_table, make_trace, rows, policy="fifo", plan_ahead=False)
    np.testing.assert_allclose(ahead.jobs.finish, [90, 2 * ROUND + 50])
    np.testing.assert_allclose(boundary.jobs.finish, [90, ROUND + 50])
    assert [p.member_job.tolist() for p in plans] == [[0], [1]]      # round 2 ran nothing (no plan observed)
    assert [p.member_job.tolist() for p in bplans] == [[0], [1]]
    assert ahead.summary["jobs_measured"] == 2 and ahead.summary["jobs_unfinished"] == 0
    np.testing.assert_allclose(ahead.jobs.gpu_seconds, boundary.jobs.gpu_seconds)   # nothing held twice
