"""The SchedulerLoop's planner for an allocation policy: the policy's allocation, Gavel's mechanism each round.

`AllocationPlanner` meets the loop's `Planner` protocol (mechanism.loop) as the round planner
(gavel_ng.round_planner) does, so that the loop never asks which kind of policy runs. It owns
what only an allocation policy needs: the solve bookkeeping (a job's arrival or end, or new GPUs,
call for a new allocation; `min_solve_interval` rate-limits solves, so jobs that arrive in between
are known to no allocation) and the policy's beliefs about those new jobs (the allocator's
throughput source, its rules compiled in), by which the mechanism backfills them onto free GPUs
instead of letting them wait for the next solve. The mechanism is Gavel's `RoundMechanism` or
the ideal time-sharing baseline (mechanism.ideal).
"""

from __future__ import annotations

import time
from typing import Protocol

import numpy as np

from .allocator import PolicyAllocator
from .mechanism import AllocationRows, JobView, RoundPlan, Waitlist
from .mechanism.limits import Meter
from .topology import Topology


class Mechanism(Protocol):
    """From an allocation to each round's plan (mechanism.core.RoundMechanism, mechanism.ideal.IdealPlanner)."""

    def reset(self, alloc: AllocationRows) -> None: ...
    def retire(self, job: int) -> None: ...
    def set_topology(self, topology: Topology, gpu_remap) -> None: ...
    def plan(self, new_jobs: JobView | None = None) -> RoundPlan: ...
    def record(self, plan: RoundPlan, occupied: np.ndarray) -> None: ...

    backfills: bool      # GPUs freed mid-round go to the plan's waiting entries
    meter: Meter         # the policy's own constraints measured on what ran


class AllocationPlanner:
    """Planner (mechanism.loop) of an allocation policy (module docstring)."""

    def __init__(self, allocator: PolicyAllocator, mechanism: Mechanism, min_solve_interval: float = 0.0):
        self.allocator = allocator
        self.mech = mechanism
        self.min_solve_interval = float(min_solve_interval)
        self.active: dict[int, None] = {}        # insertion order = arrival order
        self.unallocated: dict[int, None] = {}   # arrived since the last solve
        self.reset_pending = False
        self.last_solve: float | None = None
        self.allocation: AllocationRows | None = None   # the allocation in force (None before the first solve)
        self.solves = 0
        self.solve_seconds = 0.0

    @property
    def slo_dropped(self) -> set[int]:
        """Jobs whose SLO the policy dropped at some solve."""
        return self.allocator.slo_dropped

    # ----- Planner protocol ---------------------------------------------------------------------
    def arrive(self, jobs: list[int]) -> None:
        for m in jobs:
            self.active[m] = None
            self.unallocated[m] = None
        if jobs:
            self.reset_pending = True

    def retire(self, job: int) -> None:
        self.active.pop(job, None)
        self.unallocated.pop(job, None)
        self.mech.retire(job)
        self.reset_pending = True

    def set_topology(self, topology: Topology, gpu_remap) -> None:
        """New GPUs: the mechanism moves onto them, and the capacity the allocation assumed is gone."""
        self.mech.set_topology(topology, gpu_remap)
        self.reset_pending = True

    def plan(self, now: float) -> RoundPlan:
        if self.reset_pending and self.active and self._may_solve(now):
            self._solve(now)
        view = self.allocator.believed(list(self.unallocated)) if self.unallocated else None
        return self.mech.plan(view)

    def record(self, plan: RoundPlan, occupied: np.ndarray) -> None:
        self.mech.record(plan, occupied)

    def summary(self) -> dict:
        """What a run's summary says of the planning: fallbacks, the policy solved, backfill, the policy's
        constraints as measured on what ran (mechanism.limits; {}: it added none)."""
        return {"solver_fallbacks": self.allocator.fallbacks, "policy_solved": self.allocator.spec.name,
                "backfill": self.mech.backfills, "constraints": self.mech.meter.report()}

    # ----- jobs no allocation knows -----------------------------------------------------------------
    def arrivals(self, jobs: list[int], plan: RoundPlan) -> Waitlist:
        """The waitlist of `jobs` (arrived after `plan` was made) as the policy believes them: what a live
        cluster offers GPUs that idle mid-round (runtime.backfill)."""
        return self.mech.arrivals(self.allocator.believed(jobs), plan)

    # ----- solving ----------------------------------------------------------------------------------
    def _may_solve(self, now: float) -> bool:
        return self.last_solve is None or now - self.last_solve >= self.min_solve_interval - 1e-9

    def _solve(self, now: float) -> None:
        start = time.perf_counter()
        alloc = self.allocator.allocate(list(self.active), now)
        self.solve_seconds += time.perf_counter() - start
        self.solves += 1
        self.mech.reset(alloc)
        self.allocation = alloc
        self.last_solve = now
        self.reset_pending = False
        self.unallocated = {}
