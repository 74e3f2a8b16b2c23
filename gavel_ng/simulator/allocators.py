"""The simulator's allocator: the active jobs' arrays handed to a PolicySession.

The policy input is built from the arrays the executor keeps, without Job objects on
the hot path; the session reuses work between successive solves.
"""

from __future__ import annotations

import logging
import math

import numpy as np

from ..cluster import Cluster
from ..mechanism import AllocationRows
from ..policies import SchedulingProblem
from ..policies.session import PolicySession

log = logging.getLogger(__name__)


class PolicyAllocator:
    """Builds the policy input from the executor's job arrays and solves it."""

    def __init__(self, policy: str, cluster: Cluster, jobs, warm: bool = True):
        self.cluster = cluster
        self.jobs = jobs                      # simulator.executor.JobArrays
        self.capacity = cluster.capacity()
        self.prices = cluster.prices()
        self.warnings = 0
        self.session = PolicySession(policy, self.capacity, warm=warm)
        self.spec = self.session.spec

    @property
    def is_agnostic(self) -> bool:
        return self.spec.agnostic

    def allocate(self, jobs: list[int], now: float) -> AllocationRows:
        ja = self.jobs
        idx = np.asarray(jobs, dtype=np.int64)
        T = ja.T[ja.key[idx]]
        sf = ja.sf[idx].astype(float)
        inp = SchedulingProblem.build(
            [str(j) for j in jobs], self.cluster.worker_types, self.capacity, T, scale_factors=sf,
            weights=ja.weight[idx], steps_remaining=ja.remaining[idx], steps_total=ja.steps[idx],
            time_since_arrival=np.maximum(0.0, now - ja.arrival[idx]), slo_s=ja.slo[idx], prices=self.prices)
        sol = self.session.solve(inp)
        if sol.warnings:
            self.warnings += 1
            log.debug("solve at t=%.0f: %s", now, "; ".join(sol.warnings))
        a = sol.allocation
        singles = len(a.rows) == len(jobs) and all(len(r) == 1 for r in a.rows)
        rows = [(j,) for j in jobs] if singles else [tuple(int(m) for m in r) for r in a.rows]
        return AllocationRows(rows, a.values, np.asarray(a.scale_factors, dtype=float))


def default_prices(worker_types: list[str]) -> dict[str, float]:
    """$/GPU-hour of the GPU types gavel_ng.profiles knows (its list prices); others unknown."""
    from ..profiles import GPUS

    return {w: GPUS[w.lower()].dollars_per_hour for w in worker_types if w.lower() in GPUS}


def finite_or_none(v: float) -> float | None:
    return None if v is None or not math.isfinite(v) else float(v)
