"""Policies that decide each round's placement themselves (Tiresias, Pollux).

Gavel's policies compute an allocation (time fractions) that the round mechanism turns
into rounds. Tiresias and Pollux are schedulers of another kind: every scheduling
interval they decide which job runs on which GPUs, from state that changes every round
(attained service; progress and re-allocation history). A `RoundPolicy` is the
`SchedulerLoop`'s allocator and planner in one: ``allocate``/``reset`` only keep the
set of active jobs, ``plan`` decides the round (`decide`, per subclass), ``record``
sees what ran. The executor (`ElasticExecutor`) is the same as for the goodput
policies, so all of them are charged alike (re-allocation delay, preemption overhead).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from gavel_ng.mechanism import AllocationRows, JobView, RoundPlan, make_plan
from gavel_ng.topology import Topology

if TYPE_CHECKING:
    from .execution import ElasticExecutor, ElasticState


@dataclass(frozen=True)
class Entry:
    """One job's GPUs this round (global GPU ids, all of worker type `type`)."""

    job: int
    type: int
    gpus: tuple[int, ...]


class RoundPolicy:
    """Base class: the SchedulerLoop's Allocator and Planner for a per-round policy (module docstring)."""

    def __init__(self, state: ElasticState, topology: Topology, executor: ElasticExecutor, seed: int = 0):
        self.state = state
        self.topo = topology
        self.executor = executor
        self.clock = executor.now
        self.rng = np.random.default_rng(seed)
        self.active: dict[int, None] = {}             # arrival order
        self.last: dict[int, tuple[int, ...]] = {}    # job -> GPUs it held in the previous round
        self.solve_seconds: list[float] = []          # time each decision took

    # ----- Allocator -------------------------------------------------------------------------
    def allocate(self, jobs: list[int], now: float) -> AllocationRows:
        """No allocation to compute: the rows only tell `reset` which jobs are active."""
        return AllocationRows([(m,) for m in jobs], np.zeros((len(jobs), 0)), np.ones(len(jobs)))

    # ----- Planner ---------------------------------------------------------------------------
    def reset(self, alloc: AllocationRows) -> None:
        self.active = dict.fromkeys(r[0] for r in alloc.rows)

    def retire(self, job: int) -> None:
        self.active.pop(job, None)
        self.last.pop(job, None)

    def plan(self, new_jobs: JobView | None = None) -> RoundPlan:
        start = time.perf_counter()
        entries = self.decide(self.clock()) if self.active else []
        self.solve_seconds.append(time.perf_counter() - start)
        gpus = [e.gpus for e in entries]
        renewed = [self.last.get(e.job) == e.gpus for e in entries]
        servers = self.topo.gpu_server
        consolidated = [len(set(servers[list(g)].tolist())) == 1 for g in gpus]
        self.last = {e.job: e.gpus for e in entries}
        return make_plan([(e.job,) for e in entries], [-1] * len(entries), [e.type for e in entries],
                         [len(g) for g in gpus], gpus, renewed, consolidated)

    def record(self, plan: RoundPlan, occupied: np.ndarray) -> None:
        """What ran this round (seconds each entry held its GPUs); subclasses keep what they need."""

    def decide(self, now: float) -> list[Entry]:
        """This round's entries, each on GPUs that are free and of one type."""
        raise NotImplementedError
