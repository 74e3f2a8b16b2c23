"""The simulator's mechanism, fed by a cluster whose workers come and go.

`DynamicPlanner` is the SchedulerLoop's Planner: it wraps gavel_ng.mechanism's
RoundMechanism and, when the set of live workers changed since the last allocation,
rebuilds it on the new topology while keeping the time each row received and last
round's placement (remapped to the new GPU numbering), so that a worker joining does not
cost the others their lease renewals.
"""

from __future__ import annotations

import logging

import numpy as np

from ..mechanism import AllocationRows, JobView, MechanismConfig, RoundMechanism, RoundPlan, make_plan
from .state import ClusterState

log = logging.getLogger(__name__)


class DynamicPlanner:
    def __init__(self, state: ClusterState, config: MechanismConfig | None = None):
        self.state = state
        self.config = config or MechanismConfig()
        topo, self.gpu_map, self.version = state.topology()
        self.mech = RoundMechanism(topo, self.config)
        self.plan_map = self.gpu_map

    def reset(self, alloc: AllocationRows) -> None:
        topo, gpu_map, version = self.state.topology()
        if version != self.version:
            self._rebuild(topo, gpu_map)
            self.version = version
        self.mech.reset(alloc)

    def _rebuild(self, topo, gpu_map) -> None:
        old, old_map = self.mech, self.gpu_map
        new = RoundMechanism(topo, self.config)
        # carry the ledger: RoundMechanism.reset() carries rows it already knows over
        if getattr(old, "rows", None) is not None and getattr(old, "received", None) is not None:
            new.rows, new.received = old.rows, old.received
        index = {g: i for i, g in enumerate(gpu_map)}
        last = {}
        for key, (j, gpus) in getattr(old.placer, "last", {}).items():
            mapped = [index.get(old_map[int(g)]) for g in np.asarray(gpus).tolist()]
            if all(m is not None for m in mapped):     # same container type as the Placer uses
                last[key] = (j, tuple(mapped) if isinstance(gpus, tuple) else np.array(mapped, dtype=np.int64))
        new.placer.last = last
        self.mech, self.gpu_map = new, gpu_map
        log.info("topology: %d GPUs on %d workers", len(gpu_map), len(set(w for w, _ in gpu_map)))

    def retire(self, job: int) -> None:
        self.mech.retire(job)

    def plan(self, new_jobs: JobView | None = None) -> RoundPlan:
        if not self.gpu_map:
            return make_plan([], [], [], [], [], [], [])
        plan = self.mech.plan(new_jobs)
        self.plan_map = self.gpu_map
        return plan

    def record(self, plan: RoundPlan, occupied: np.ndarray) -> None:
        self.mech.record(plan, occupied)

    def placement(self, plan: RoundPlan, entry: int) -> list[tuple[str, int]]:
        """(worker id, local GPU) of each GPU of a planned entry, in rank order."""
        return [self.plan_map[g] for g in np.asarray(plan.gpus[entry]).tolist()]
