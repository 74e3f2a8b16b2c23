"""The scheduler's workers: who registered, who is alive, and the topology the live ones form.

`WorkerRegistry` knows nothing of jobs; ClusterState, which holds the lock, decides what a
worker joining or leaving means for the attempts it runs.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from ..topology import Topology
from .store import Store

log = logging.getLogger(__name__)


@dataclass
class WorkerState:
    worker_id: str
    address: str
    gpu_type: str
    gpus: int
    order: int                     # registration order: keeps the topology stable
    last_seen: float               # time.monotonic()
    alive: bool = True
    stub: object | None = None     # the link to its daemon (protocol.rpc.Stub of service "Worker")
    channel: object | None = None
    labels: frozenset = frozenset()  # server labels (worker flags and cluster config), for gavel_ng.rules
    call_token: str = ""           # the token its service accepts from the scheduler (given at registration)


class WorkerConflict(Exception):
    """A registration under the id of a live worker at another address (the service answers ALREADY_EXISTS)."""


@dataclass(frozen=True)
class Kill:
    """An order for a worker: stop its share of this attempt."""

    worker: WorkerState
    job_id: int
    attempt: int


class WorkerRegistry:
    def __init__(self, worker_types: list[str], store: Store):
        self.worker_types = list(worker_types)
        self.store = store
        self.workers: dict[str, WorkerState] = {}
        self.version = 0               # grows whenever a worker joins or leaves: the topology changed

    def join(self, worker_id: str, address: str, gpu_type: str, gpus: int,
             connect: Callable[[str], tuple[object, object]], labels: frozenset = frozenset(),
             call_token: str = "") -> WorkerState:
        """A worker registers: new, back after it was declared dead, at a new address or with a new call token
        (then `connect(address)` gives the (channel, stub) to reach it); otherwise it is only seen."""
        w = self.workers.get(worker_id)
        if w is not None and w.alive and w.address != address:
            raise WorkerConflict(f"worker_id {worker_id!r} is held by the live worker at {w.address} "
                                 f"(not {address}); it is free again once that one is declared dead")
        new = w is None or not w.alive or w.address != address or w.labels != labels or w.call_token != call_token
        with self.store.transaction():       # recorded first: StoreError changes nothing here
            if new:
                self.store.event("worker_up", worker_id=worker_id, address=address, gpu_type=gpu_type, gpus=gpus)
            self.store.upsert_worker(worker_id, address, gpu_type, gpus, time.time(), True)
        if new:
            order = w.order if w is not None else len(self.workers)
            channel, stub = connect(address)
            w = WorkerState(worker_id, address, gpu_type, gpus, order, time.monotonic(), stub=stub, channel=channel,
                            labels=frozenset(labels), call_token=call_token)
            self.workers[worker_id] = w
            self.version += 1
            log.info("worker %s registered: %d x %s at %s", worker_id, gpus, gpu_type, address)
        w.last_seen = time.monotonic()
        return w

    def live(self, worker_id: str) -> WorkerState | None:
        w = self.workers.get(worker_id)
        return w if w is not None and w.alive else None

    def is_alive(self, worker_id: str) -> bool:
        return self.live(worker_id) is not None

    def leave(self, w: WorkerState, reason: str) -> bool:
        """Declare a worker dead; False if it already was."""
        if not w.alive:
            return False
        with self.store.transaction():       # recorded first: StoreError leaves it alive, to retry
            self.store.set_worker_alive(w.worker_id, False, time.time())
            self.store.event("worker_down", worker_id=w.worker_id, reason=reason)
        w.alive = False
        self.version += 1
        log.info("worker %s (%s) declared dead: %s", w.worker_id, w.address, reason)
        return True

    def overdue(self, timeout: float, quiet_since: float = -math.inf) -> list[WorkerState]:
        """Live workers not heard from for more than `timeout` seconds of the time since the
        scheduler's last stall ended (`quiet_since`, runtime.liveness): heartbeats it could not
        serve are not missed heartbeats."""
        deadline = time.monotonic() - timeout
        if quiet_since >= deadline:
            return []
        return [w for w in self.workers.values() if w.alive and w.last_seen < deadline]

    # ----- what the live workers form ----------------------------------------------------------
    def capacity(self) -> np.ndarray:
        cap = np.zeros(len(self.worker_types))
        for w in self.workers.values():
            if w.alive:
                cap[self.worker_types.index(w.gpu_type)] += w.gpus
        return cap

    def live_sorted(self) -> list[WorkerState]:
        """The live workers type by type, in registration order (the topology's servers; lock held)."""
        types = self.worker_types
        return sorted((w for w in self.workers.values() if w.alive), key=lambda w: (types.index(w.gpu_type), w.order))

    def topology(self, live: list[WorkerState] | None = None) -> tuple[Topology, list[tuple[str, int]], int]:
        """Live workers as servers, GPUs numbered type by type; gpu_map[g] = (worker id, local GPU).
        `live`: live_sorted() as copied under the lock, to build this without it."""
        live = self.live_sorted() if live is None else live     # type by type: the topology's server order
        topo = Topology.from_servers(self.worker_types, self._as_servers(live))
        gpu_map = [(w.worker_id, local) for w in live for local in range(w.gpus)]
        return topo, gpu_map, self.version

    def servers(self) -> list:
        """The live workers as gavel_ng.rules servers (type, GPUs, labels)."""
        return self._as_servers(w for w in self.workers.values() if w.alive)

    @staticmethod
    def _as_servers(workers) -> list:
        from ..rules import Server

        return [Server(w.gpu_type, w.gpus, w.labels) for w in workers]
