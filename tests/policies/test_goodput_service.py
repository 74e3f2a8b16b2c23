"""`goodput`'s attained-service weights: a job that has had much service yields to a fresh one."""

from __future__ import annotations

import numpy as np
import pytest

from gavel_ng.cluster import Cluster
from gavel_ng.errors import InputError
from gavel_ng.policies.builtin.goodput import Goodput
from gavel_ng.policies.registry import get_policy
from gavel_ng.policies.rounds import RoundJobs
from gavel_ng.round_planner import RoundPlanner
from gavel_ng.topology import Topology

HOUR = 3600.0


class LinearSource:
    """Adaptive jobs whose goodput is their GPU count (linear scaling), all arrived at t = 0."""

    def round_jobs(self, jobs):
        n = len(jobs)
        return RoundJobs(np.ones(n, bool), np.ones(n, np.int64), np.zeros((n, 1)), np.zeros(n), np.zeros(n, np.int64))

    def goodput(self, jobs, worker_type, gpus, servers):
        return np.repeat(np.asarray(gpus, float)[None, :], len(jobs), axis=0)


def context(policy: Goodput, attained: dict[int, float], jobs=(0, 1)):
    """A real planner's context on one 2-GPU server at 4 h: job 0 held both GPUs last round."""
    topo = Topology.from_cluster(Cluster(gpus={"a100": 2}, gpus_per_server={"a100": 2}))
    planner = RoundPlanner("goodput", policy.decide, LinearSource(), topo, lambda: 4 * HOUR, realloc_delay=30.0)
    planner.arrive(list(jobs))
    planner.last = {0: (0, 1)}
    planner.attained = dict(attained)
    return planner.context(4 * HOUR)


def gpus_given(policy: Goodput, attained: dict[int, float]) -> list[int]:
    """GPUs each of the two jobs gets (0: it waits)."""
    ctx = context(policy, attained)
    choice = policy.decide(ctx)
    return [int(ctx.need[i, c]) if c >= 0 else 0 for i, c in enumerate(choice.tolist())]


def test_a_job_with_much_service_yields_to_a_fresh_one():
    """Without the weights the running job keeps both GPUs (0.6 against 0.1 + 0.1 for splitting them);
    with job 0's 3 GPU-hours past a 1-hour threshold (weight 0.25) the newcomer is worth more on them."""
    served = {0: 3 * 2 * HOUR}
    assert gpus_given(Goodput(), served) == [2, 0]
    assert gpus_given(Goodput(service_hours=1.0, service_weight=0.25), served) == [0, 2]
    # below the threshold, or with weight 1, nothing changes
    assert gpus_given(Goodput(service_hours=10.0, service_weight=0.25), served) == [2, 0]
    assert gpus_given(Goodput(service_hours=1.0, service_weight=1.0), served) == [2, 0]


def test_weights_follow_attained_gpu_hours():
    policy = Goodput(service_hours=2.0, service_weight=0.5)
    ctx = context(policy, {0: 50 * HOUR, 1: 1.9 * HOUR, 2: 2.0 * HOUR}, jobs=(0, 1, 2, 3))
    assert np.array_equal(policy.service_weights(ctx), [0.5, 1.0, 0.5, 1.0])
    assert Goodput().service_weights(ctx) is None


@pytest.mark.parametrize("options, field, value", [
    ({"service_hours": 0.0}, "goodput.service_hours", 0.0),
    ({"service_hours": -2}, "goodput.service_hours", -2),
    ({"service_hours": "long"}, "goodput.service_hours", "long"),
    ({"service_hours": True}, "goodput.service_hours", True),
    ({"service_hours": 1.0, "service_weight": 0.0}, "goodput.service_weight", 0.0),
    ({"service_hours": 1.0, "service_weight": 1.5}, "goodput.service_weight", 1.5),
])
def test_bad_options_name_the_option_and_value(options, field, value):
    with pytest.raises(InputError) as info:
        get_policy("goodput").decider(options)
    assert (info.value.field, info.value.value) == (field, value)
