"""The planning lead (`SimConfig.plan_lead`): a cluster plans each round before it starts, so a job that
arrives or finishes in that lead reaches the policy a round later; the simulator models it when asked."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from gavel_ng.cluster import Cluster
from gavel_ng.elastic import pollux_workload
from gavel_ng.errors import InputError
from gavel_ng.mechanism import plan_lead
from gavel_ng.simulator import SimConfig, simulate

CLUSTER = Cluster.parse("v100=4:4,t4=4:4")
L = 10.0


def _two_jobs(arrival1: float, work0: float):
    """Job 0 at 0 with `work0` M0-equivalent examples, job 1 at `arrival1` with more than the runs last."""
    et = pollux_workload(num_jobs=2, hours=1.0, seed=3)
    return replace(et, trace=replace(et.trace, arrivals=np.array([0.0, arrival1])), work=np.array([work0, 1e12]))


def _run(et, lead: float):
    """The run's plans (the jobs of each round) for 6 rounds."""
    plans = []
    res = simulate(CLUSTER, None, et, SimConfig(policy="goodput", round_seconds=L, realloc_delay=0.0, plan_lead=lead,
                                                max_sim_seconds=6 * L),
                   observe=lambda p: plans.append(set(p.member_job.tolist())))
    return res, plans


def test_an_arrival_in_the_lead_is_planned_a_round_later():
    et = _two_jobs(L - 1.0, 1e12)          # job 0 runs all along; job 1 arrives 1 s before round 1
    _, plans = _run(et, 0.0)
    assert 1 not in plans[0] and 1 in plans[1]
    _, plans = _run(et, 3.0)
    assert 1 not in plans[0] and 1 not in plans[1] and 1 in plans[2]


def test_a_job_that_finishes_in_the_lead_keeps_its_entry_one_round_with_its_finish_time():
    et = _two_jobs(0.0, 1000.0)             # job 0 is done within round 0, job 1 runs all along
    res0, plans0 = _run(et, 0.0)
    finish = float(res0.jobs.finish[0])
    assert 0 < finish < L and 0 not in plans0[1]
    res, plans = _run(et, L - finish / 2)   # it finishes in the lead
    assert 0 in plans[1] and float(res.jobs.finish[0]) == finish
    assert res.jobs.gpu_seconds[0] == pytest.approx(res0.jobs.gpu_seconds[0])   # its late entry holds nothing


def test_the_lead_is_the_runtimes_and_refused_where_not_modelled(tiny_table, make_trace):
    assert plan_lead(15.0) == pytest.approx(4.5) and plan_lead(360.0) == 30.0
    with pytest.raises(InputError, match="plan-lead"):
        SimConfig(policy="goodput", round_seconds=10.0, plan_lead=10.0)
    with pytest.raises(InputError, match="plan-lead"):
        simulate(Cluster.parse("v100=4"), tiny_table, make_trace([("A", 1, 3600, 0)]),
                 SimConfig(policy="las", plan_lead=1.0))
