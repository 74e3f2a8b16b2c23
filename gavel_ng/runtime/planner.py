"""The deployment's planners, fed by a cluster whose workers come and go.

`LivePlanner` wraps the loop's planner as gavel_ng.assembly built it (an allocation policy's
AllocationPlanner, a round policy's RoundPlanner: both plan over GPU numbers) and moves it onto
the live workers when they changed (`set_topology`: last round's placements, renumbered, stay, so
that a worker joining costs the others neither their history nor their lease renewals; an
allocation policy solves again for the new capacity), and gives the executor the (worker id,
local GPU) of each planned GPU.

`DynamicPlanner` is the allocation policy's: it makes the mechanism's history durable, the ledger
(time received per row and worker type) written to the Store after each round that ran something
and the allocation after each solve; `restore()` reads both back after a scheduler restart. A round
policy's is runtime.rounds.ClusterRounds.
"""

from __future__ import annotations

import logging
import time

import numpy as np

from ..allocation_planner import AllocationPlanner
from ..mechanism import AllocationRows, Ledger, Planner, RoundPlan, make_plan
from ..topology import Topology
from .jobs import FINISHED
from .records import AllocationRecord, LedgerRecord
from .state import ClusterState
from .store import StoreError

log = logging.getLogger(__name__)


class LivePlanner:
    """The loop's planner (`inner`, a mechanism.loop.Planner) on the live workers. `gpu_map` and `version`:
    the workers `inner` was built on (ClusterState.topology())."""

    def __init__(self, state: ClusterState, inner: Planner, gpu_map: list[tuple[str, int]], version: int):
        self.state = state
        self.inner = inner
        self.gpu_map, self.version = gpu_map, version
        self.plan_map = self.gpu_map     # the GPU numbering of the plan last handed out

    @property
    def solves(self) -> int:
        return self.inner.solves

    @property
    def solve_seconds(self) -> float:
        return self.inner.solve_seconds

    @property
    def slo_dropped(self):
        return self.inner.slo_dropped

    def arrive(self, jobs: list[int]) -> None:
        self.inner.arrive(jobs)

    def set_topology(self, topology: Topology, gpu_remap) -> None:
        self.inner.set_topology(topology, gpu_remap)

    def restore(self) -> None:
        """After a restart: nothing kept beside the job state unless a subclass says so."""

    def retire(self, job: int) -> None:
        self.inner.retire(job)

    def plan(self, now: float) -> RoundPlan:
        self._sync_topology()
        if not self.gpu_map:
            return make_plan([], [], [], [], [], [], [])
        self._before_plan()
        plan = self.inner.plan(now)
        self.plan_map = self.gpu_map
        return plan

    def _before_plan(self) -> None:
        """A subclass's look at the live jobs before each plan (the topology is current)."""

    def record(self, plan: RoundPlan, occupied: np.ndarray) -> None:
        if plan.num_entries:    # an idle wait (about a second) is no round: history must not decay
            self.inner.record(plan, occupied)

    def placement(self, plan: RoundPlan, entry: int) -> list[tuple[str, int]]:
        """(worker id, local GPU) of each GPU of a planned entry, in rank order."""
        return [self.plan_map[g] for g in np.asarray(plan.gpus[entry]).tolist()]

    def gpu_index(self) -> dict[tuple[str, int], int]:
        """GPU number of each live (worker id, local GPU)."""
        return {g: i for i, g in enumerate(self.gpu_map)}

    def _sync_topology(self) -> None:
        """Move the planner onto the live workers if they changed since it last looked."""
        if self.state.topology_version == self.version:
            return
        topo, gpu_map, version = self.state.topology()
        if version == self.version:
            return
        index = {g: i for i, g in enumerate(gpu_map)}
        remap = np.array([index.get(g, -1) for g in self.gpu_map], np.int64)
        self.inner.set_topology(topo, remap)
        self.gpu_map, self.version = gpu_map, version
        log.info("topology: %d GPUs on %d workers (%d of them were there before)", len(gpu_map),
                 len({w for w, _ in gpu_map}), int((remap >= 0).sum()))


class DynamicPlanner(LivePlanner):
    """An allocation policy's AllocationPlanner on the live workers, its memory durable (module docstring)."""

    def __init__(self, state: ClusterState, inner: AllocationPlanner, gpu_map: list[tuple[str, int]], version: int):
        super().__init__(state, inner, gpu_map, version)
        self.mech = inner.mech
        self._recorded = time.monotonic()   # when the loop last reported a round or an idle wait

    # ----- restart ---------------------------------------------------------------------------
    def restore(self) -> None:
        """After a restart (ClusterState already restored): the last allocation, for status, and
        the ledger, minus the rows of jobs that finished, into the mechanism. Rows come back
        without an allocation; the first solve carries their time received over."""
        st = self.state
        types = list(st.worker_types)
        alloc = st.store.load_allocation()
        if alloc is not None and alloc.worker_types == types:
            st.allocation = (list(alloc.rows), np.asarray(alloc.shares, dtype=float).reshape(-1, len(types)))
        saved = st.store.load_ledger()
        if saved is None:
            return
        if saved.columns != types:
            log.warning("ledger in the store is for worker types %s, not %s: fairness history starts over",
                        saved.columns, types)
            return
        finished = {m for m, j in st.jobs.items() if j.status in FINISHED}
        known = set(st.jobs)
        ledger = Ledger(list(saved.rows), np.asarray(saved.received, dtype=float).reshape(-1, len(types)),
                        None if saved.totals is None else np.asarray(saved.totals, dtype=float), saved.elapsed)
        gone = finished | {m for r in ledger.rows for m in r if m not in known}
        ledger = ledger.without_jobs(gone)
        self.mech.restore_ledger(ledger)
        log.info("restored the ledger of %d allocation rows (round %d)", len(ledger.rows), saved.round)

    # ----- Planner protocol (what the mechanism's memory adds) ---------------------------------------
    def plan(self, now: float) -> RoundPlan:
        solves = self.inner.solves
        plan = super().plan(now)
        if self.inner.solves != solves:   # a new allocation: shown by status, the ledger reset with it
            self.save_allocation(self.inner.allocation)
            self._save_ledger()
        return plan

    def record(self, plan: RoundPlan, occupied: np.ndarray) -> None:
        now = time.monotonic()
        if plan.num_entries:
            super().record(plan, occupied)
            self._save_ledger()
        elif self.mech.cfg.round_seconds:   # an idle wait, no round: only the policy's own rows see the time
            L = self.mech.cfg.round_seconds  # pass unused (mechanism.limits)
            self.mech.idle(min(now - self._recorded, L) / L)
        self._recorded = now

    # ----- persistence ---------------------------------------------------------------------------
    def _save_ledger(self) -> None:
        st = self.state
        led = self.mech.ledger()
        try:
            st.store.save_ledger(LedgerRecord(
                round=st.round_no, columns=list(st.worker_types), rows=[list(r) for r in led.rows],
                received=led.received.tolist(), totals=None if led.totals is None else led.totals.tolist(),
                elapsed=led.elapsed))
        except StoreError:     # the mechanism's memory; kept in memory, saved again next round
            pass

    def save_allocation(self, alloc: AllocationRows) -> None:
        """The allocation in force, for status: in the state and in the store."""
        st = self.state
        X = np.asarray(alloc.X, dtype=float).reshape(len(alloc.rows), len(st.worker_types))
        st.allocation = ([tuple(int(m) for m in r) for r in alloc.rows], X)
        try:
            st.store.save_allocation(AllocationRecord(
                round=st.round_no, worker_types=list(st.worker_types),
                rows=[[int(m) for m in r] for r in alloc.rows], shares=X.tolist()))
        except StoreError:     # shown by `status --state` only; saved again with the next allocation
            pass
