"""The ideal time-sharing baseline (paper Fig 15b) as a mechanism: fluid plans, no GPUs placed.

Every allocation row gets exactly its allocated time fractions each round (`RoundPlan.share`);
the simulator's executor runs such a plan at the rates those fractions give. It stands where
Gavel's `RoundMechanism` stands under an allocation policy (gavel_ng.allocation_planner).
"""

from __future__ import annotations

import numpy as np

from ..topology import Topology
from .core import AllocationRows, JobView, RoundPlan, make_plan
from .limits import Meter


class IdealPlanner:
    """Paper Fig 15b's baseline: every row gets exactly its allocated time fractions each round. The
    policy's constraints are measured as the mechanism measures them (`meter`), on those fractions."""

    backfills = False      # nothing waits: every row runs every round

    def __init__(self, num_types: int, round_seconds: float):
        self.J = num_types
        self.L = float(round_seconds)
        self.meter = Meter()
        self.reset(AllocationRows([], np.zeros((0, num_types)), np.zeros(0)))

    def reset(self, alloc: AllocationRows) -> None:
        self.limits = alloc.limits
        self.rows = [tuple(int(m) for m in r) for r in alloc.rows]
        self.X = np.asarray(alloc.X, dtype=float).reshape(len(self.rows), self.J)
        self.row_sf = np.asarray(alloc.row_sf, dtype=np.int64)
        self.alive = self.X.sum(axis=1) > 1e-9
        self.rows_of_job: dict[int, list[int]] = {}
        for k, r in enumerate(self.rows):
            for m in r:
                self.rows_of_job.setdefault(m, []).append(k)

    def retire(self, job: int) -> None:
        for k in self.rows_of_job.pop(job, ()):
            self.alive[k] = False

    def set_topology(self, topology: Topology, gpu_remap) -> None:
        """Fluid plans hold no GPUs: nothing moves (the worker types, hence the columns, stay)."""

    def plan(self, new_jobs: JobView | None = None) -> RoundPlan:
        live = np.flatnonzero(self.alive)
        keys = [self.rows[k] for k in live.tolist()]
        E = len(keys)
        return make_plan(keys, live, np.full(E, -1), self.row_sf[live], [()] * E,
                         np.ones(E, bool), np.ones(E, bool), share=self.X[live])

    def record(self, plan: RoundPlan, occupied: np.ndarray) -> None:
        if self.limits is not None and plan.num_entries:
            y = np.zeros((len(self.rows), self.J))
            y[plan.rows] = plan.share * (np.asarray(occupied, dtype=float) / self.L)[:, None]
            self.meter.observe(self.limits, y.ravel())
