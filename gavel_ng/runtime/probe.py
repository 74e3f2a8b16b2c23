"""A policy tried once before a scheduler starts, so that its own errors stop the start, not a cluster.

On a cluster the jobs must keep running whatever the policy does: an allocation policy that fails
at a solve is reported (an ERROR line, `gavel-ng status`, the `gavel_policy_errors` metric) and
the round runs on equal shares until it solves again (allocator.PolicyAllocator). What can be
found before any job is at stake is found here: the policy stated and solved (an allocation
policy) or asked for one round (a round policy) on two small jobs on the configured worker types.
An error of its own (errors.PolicyError: its code raises, it returns no objective or no decision,
its objective is not DCP, its constraints admit nothing, it needs prices the config lacks) makes
the scheduler refuse to start with that one line. Anything else the probe meets is left to the
rounds: two made-up jobs are not the cluster's.
"""

from __future__ import annotations

import logging

import numpy as np

from ..cluster import Cluster
from ..errors import PolicyError
from ..policies.input.scheduling_problem import SchedulingProblem
from ..policies.lp.pipeline import solve
from ..policies.registry import ADAPTIVE, PolicySpec
from ..policies.rounds import RoundJobs
from ..round_planner import RoundPlanner
from ..topology import Topology

log = logging.getLogger(__name__)
PROBE_GPUS = 4   # per worker type, on one server: room for both jobs on each type


def probe_policy(spec: PolicySpec, worker_types: list[str], prices: dict[str, float] | None = None,
                 options: dict | None = None) -> None:
    """PolicyError if the policy fails on two one-GPU jobs, equally fast on every type (module docstring)."""
    try:
        if spec.is_round:
            if spec.jobs != ADAPTIVE:   # a policy of adaptive jobs only needs their goodput models: not probed
                _probe_round(spec, worker_types, options)
        else:
            _probe_allocation(spec, worker_types, prices, options)
    except PolicyError:
        raise
    except Exception as exc:   # noqa: BLE001 - not the policy's own error: the rounds will tell
        log.debug("policy %s: probe inconclusive (%s: %s)", spec.name, type(exc).__name__, exc)


def _probe_allocation(spec: PolicySpec, worker_types: list[str], prices: dict[str, float] | None,
                      options: dict | None) -> None:
    J = len(worker_types)
    price = None if not prices or any(w not in prices for w in worker_types) else [prices[w] for w in worker_types]
    inp = SchedulingProblem.build(["probe-0", "probe-1"], list(worker_types), np.full(J, float(PROBE_GPUS)),
                                  np.ones((2, J)), steps_remaining=np.array([1000.0, 2000.0]),
                                  steps_total=np.array([1000.0, 2000.0]), time_since_arrival=np.array([60.0, 0.0]),
                                  prices=price)
    solve(inp, spec.name, options=options)


class _Jobs:
    """Two fixed one-GPU jobs, as a RoundSource."""

    def __init__(self, types: int):
        self.types = types

    def round_jobs(self, jobs: list[int]) -> RoundJobs:
        n = len(jobs)
        return RoundJobs(np.zeros(n, bool), np.ones(n, np.int64), np.ones((n, self.types)), np.zeros(n),
                         np.zeros(n, np.int64))

    def goodput(self, jobs, worker_type, gpus, servers) -> np.ndarray:
        return np.zeros((len(jobs), len(gpus)))


def _probe_round(spec: PolicySpec, worker_types: list[str], options: dict | None) -> None:
    topology = Topology.from_cluster(Cluster({w: PROBE_GPUS for w in worker_types}, {w: PROBE_GPUS
                                                                                      for w in worker_types}))
    counts = spec.gpu_counts if spec.gpu_counts is not None else (1, 2, 4)
    planner = RoundPlanner(spec.name, spec.decider(options), _Jobs(len(worker_types)), topology, lambda: 0.0,
                           gpu_counts=counts)
    planner.arrive([0, 1])
    planner.plan(0.0)
