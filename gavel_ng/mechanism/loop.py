"""The scheduler loop shared by the simulator and a real-cluster runtime (as in Blox).

    admit -> arrive -> plan -> execute -> record -> retire

Each round the executor admits the jobs that arrived (admission control may refuse
some), the planner is told of them, plans the round, the executor runs it, and the
planner records what ran and forgets the jobs that finished. The loop knows no kind of
policy: an allocation policy's planner (allocator + Gavel's mechanism,
gavel_ng.allocation_planner) and a round policy's (gavel_ng.round_planner) meet the same
`Planner` protocol, and gavel_ng.assembly picks one by the policy's declared kind. Only the
executor differs between the worlds: the simulator advances a simulated clock, the
runtime launches, renews and preempts micro-tasks on workers. This module imports no solver.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Set
from dataclasses import dataclass, field
from typing import Protocol

import numpy as np

from ..topology import Topology
from .core import AllocationRows, RoundPlan

log = logging.getLogger(__name__)
PLAN_LEAD_FRACTION, PLAN_LEAD_MAX_S = 0.3, 30.0


def plan_lead(round_seconds: float) -> float:
    """How long before a round ends the next one is planned. A cluster plans ahead (runtime.executor) so that
    the solve is off the critical path and renewals are answered before leases end, as Gavel's runtime does
    (halfway through a round); the plan then knows the arrivals and completions up to that moment only. The
    simulator models the same look-ahead (simulator.executor), so both decide on the same information."""
    return min(PLAN_LEAD_FRACTION * float(round_seconds), PLAN_LEAD_MAX_S)


@dataclass
class RoundResult:
    occupied: np.ndarray                         # (E,) seconds each entry held its GPUs
    finished: list[int] = field(default_factory=list)
    plan: RoundPlan | None = None                # the plan as it ran when the executor added entries
                                                 # (mid-round backfill); `occupied` is then over its entries


class Allocator(Protocol):
    def allocate(self, jobs: list[int], now: float) -> AllocationRows:
        """The policy's allocation for these active jobs (rows of job indices)."""


class Executor(Protocol):
    def now(self) -> float: ...

    def admit(self) -> list[int]:
        """Jobs that arrived by now() and were not admitted before, in arrival order."""

    def refuse(self, job: int, reason: str) -> None:
        """Admission refused an admitted job: it never runs (the executor settles it its own way)."""

    def execute(self, plan: RoundPlan) -> RoundResult:
        """Run one round of `plan` (or idle until work arrives) and report what happened."""


class Planner(Protocol):
    """What the loop asks of a policy, whatever its kind. `solves` and `solve_seconds`: the decisions it
    computed (an allocation policy's solves, a round policy's decisions) and their CPU seconds."""

    solves: int
    solve_seconds: float
    slo_dropped: Set[int]    # jobs whose SLO the policy dropped (a cost policy's): the simulator's metric

    def arrive(self, jobs: list[int]) -> None:
        """These jobs were admitted (in arrival order)."""

    def retire(self, job: int) -> None:
        """The job finished (or ended otherwise): forget it."""

    def set_topology(self, topology: Topology, gpu_remap) -> None:
        """The GPUs changed (a live cluster's workers came or went): `gpu_remap[g]` is old GPU g's new number."""

    def plan(self, now: float) -> RoundPlan:
        """The round to run from `now`."""

    def record(self, plan: RoundPlan, occupied: np.ndarray) -> None:
        """What ran: the round as it ran and the seconds each entry held its GPUs."""

    def summary(self) -> dict:
        """What a run's summary says of the planning (the simulator's; not the loop's)."""


class Refusal(Protocol):
    reason: str


class Admission(Protocol):
    """gavel_ng.rules.admission.AdmissionControl."""

    def admit(self, job: int, user: str | None, gpus: int) -> Refusal | None: ...

    def release(self, job: int) -> None: ...


@dataclass
class LoopStats:
    rounds: int = 0
    solves: int = 0
    solve_seconds: float = 0.0
    renewals: int = 0
    launches: int = 0


class SchedulerLoop:
    """One round per step() (module docstring).

    `admission` is asked for each arrival with `owner(job) -> (user, GPUs)`; a refused job goes to
    `executor.refuse(job, reason)` and never reaches the planner. `active`: the admitted jobs that
    have not finished, in arrival order."""

    def __init__(self, planner: Planner, executor: Executor, admission: Admission | None = None,
                 owner: Callable[[int], tuple[str | None, int]] | None = None):
        if admission is not None and owner is None:
            raise ValueError("SchedulerLoop: admission needs owner(job) -> (user, GPUs)")
        self.planner = planner
        self.executor = executor
        self.admission = admission
        self.owner = owner
        self.active: dict[int, None] = {}      # insertion order = arrival order
        self.stats = LoopStats()

    def step(self) -> RoundResult:
        ex, planner = self.executor, self.planner
        now = ex.now()
        arrived = self._admit(ex.admit())
        if arrived:
            planner.arrive(arrived)
        plan = planner.plan(now)
        result = ex.execute(plan)
        if result.plan is not None:
            plan = result.plan
        planner.record(plan, result.occupied)
        for job in result.finished:
            self.active.pop(job, None)
            planner.retire(job)
            if self.admission is not None:
                self.admission.release(job)
        s = self.stats
        s.rounds += 1
        s.solves, s.solve_seconds = planner.solves, planner.solve_seconds
        renewed = int(np.count_nonzero(plan.renewed))
        s.renewals += renewed
        s.launches += plan.num_entries - renewed
        return result

    def _admit(self, jobs: list[int]) -> list[int]:
        """The arrivals admission lets in (all of them without admission control)."""
        if self.admission is None:
            self.active.update(dict.fromkeys(jobs))
            return jobs
        out = []
        for job in jobs:
            refusal = self.admission.admit(job, *self.owner(job))
            if refusal is not None:
                self.executor.refuse(job, refusal.reason)
                continue
            self.active[job] = None
            out.append(job)
        return out
