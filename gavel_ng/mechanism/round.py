"""The scheduler loop shared by the simulator and a real-cluster runtime (as in Blox).

    admission -> policy (on reset events) -> mechanism + placement -> executor -> bookkeeping

Only the executor differs: the simulator advances a simulated clock, a runtime would
launch, renew and preempt micro-tasks on workers. The allocator hides how allocations
are computed (cvxpy, HiGHS, a cache): this module imports no solver.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from typing import Protocol

import numpy as np

from .core import AllocationRows, JobView, RoundMechanism, RoundPlan

log = logging.getLogger(__name__)


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

    def job_view(self, jobs: list[int]) -> JobView:
        """Scale factors and throughputs of these jobs (for placing jobs the allocation lacks)."""

    def execute(self, plan: RoundPlan) -> RoundResult:
        """Run one round of `plan` (or idle until work arrives) and report what happened."""


class Planner(Protocol):
    def reset(self, alloc: AllocationRows) -> None: ...
    def retire(self, job: int) -> None: ...
    def plan(self, new_jobs: JobView | None = None) -> RoundPlan: ...
    def record(self, plan: RoundPlan, occupied: np.ndarray) -> None: ...


@dataclass
class LoopStats:
    rounds: int = 0
    solves: int = 0
    solve_seconds: float = 0.0
    renewals: int = 0
    launches: int = 0


class SchedulerLoop:
    """One round per step(). Re-solves on reset events (arrivals, completions).

    `min_solve_interval` rate-limits solves (seconds of executor time between them);
    jobs that arrive in between are known to no allocation, and the mechanism backfills
    them onto free GPUs instead of letting them wait for the next solve.

    Without an allocator the planner decides every round itself (a round policy's planner,
    gavel_ng.round_planner): it is told of each admitted job (`arrive`) and of each finished
    one (`retire`), and there is nothing to solve.
    """

    def __init__(self, planner: Planner | RoundMechanism, allocator: Allocator | None, executor: Executor,
                 min_solve_interval: float = 0.0, admission=None, owner=None):
        # admission: a gavel_ng.rules.admission.AdmissionControl, asked for each arrival with
        # owner(job) -> (user, GPUs); a refused job goes to executor.refuse(job, reason) and never runs
        self.admission = admission
        self.owner = owner
        self.planner = planner
        self.allocator = allocator
        self.executor = executor
        self.min_solve_interval = float(min_solve_interval)
        self.active: dict[int, None] = {}      # insertion order = arrival order
        self.unallocated: dict[int, None] = {}
        self.reset_pending = False
        self.last_solve: float | None = None
        self.stats = LoopStats()

    def step(self) -> RoundResult:
        ex = self.executor
        now = ex.now()
        for job in ex.admit():
            if self.admission is not None:
                refusal = self.admission.admit(job, *self.owner(job))
                if refusal is not None:
                    ex.refuse(job, refusal.reason)
                    continue
            self.active[job] = None
            if self.allocator is None:
                self.planner.arrive([job])
                continue
            self.unallocated[job] = None
            self.reset_pending = True
        if self.allocator is not None and self.reset_pending and self.active and self._may_solve(now):
            self._solve(now)
        view = ex.job_view(list(self.unallocated)) if self.unallocated else None
        plan = self.planner.plan(view)
        result = ex.execute(plan)
        if result.plan is not None:
            plan = result.plan
        self.planner.record(plan, result.occupied)
        for job in result.finished:
            self.active.pop(job, None)
            self.unallocated.pop(job, None)
            self.planner.retire(job)
            if self.admission is not None:
                self.admission.release(job)
            self.reset_pending = True
        s = self.stats
        s.rounds += 1
        renewed = int(np.count_nonzero(plan.renewed))
        s.renewals += renewed
        s.launches += plan.num_entries - renewed
        return result

    def _may_solve(self, now: float) -> bool:
        return self.last_solve is None or now - self.last_solve >= self.min_solve_interval - 1e-9

    def _solve(self, now: float) -> None:
        start = time.perf_counter()
        alloc = self.allocator.allocate(list(self.active), now)
        self.stats.solve_seconds += time.perf_counter() - start
        self.stats.solves += 1
        self.planner.reset(alloc)
        self.last_solve = now
        self.reset_pending = False
        self.unallocated = {}
