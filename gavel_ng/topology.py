"""GPUs, grouped into servers per worker type: what placement chooses from."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from .cluster import Cluster
from .rules.compile import Server, labelled_servers


@dataclass(frozen=True)
class Topology:
    """Global GPU ids 0..G-1, numbered type by type, server by server."""

    worker_types: list[str]
    capacity: np.ndarray            # (J,) GPUs per type
    gpu_type: np.ndarray            # (G,)
    gpu_server: np.ndarray          # (G,) global server id
    server_type: np.ndarray         # (S,)
    server_gpus: list[np.ndarray]   # GPU ids of each server
    type_servers: list[np.ndarray]  # server ids of each type
    server_labels: tuple = ()       # frozenset of labels per server (gavel_ng.rules); empty: none anywhere

    @classmethod
    def from_servers(cls, worker_types: list[str], servers: Sequence[Server]) -> Topology:
        """Servers (type, GPUs, labels) grouped type by type in `worker_types` order, each type's in the order
        given; GPUs numbered in that order. What a simulated cluster and a real one's live workers both are."""
        j_of = {w: j for j, w in enumerate(worker_types)}
        servers = sorted(servers, key=lambda s: j_of[s.worker_type])    # stable: a type's servers keep their order
        server_type = np.array([j_of[s.worker_type] for s in servers], dtype=np.int64)
        sizes = np.array([s.gpus for s in servers], dtype=np.int64)
        starts = np.concatenate([[0], np.cumsum(sizes)])
        gpu_server = np.repeat(np.arange(len(servers), dtype=np.int64), sizes)
        gpu_type = server_type[gpu_server]
        labels = tuple(s.labels for s in servers)
        return cls(list(worker_types), np.bincount(gpu_type, minlength=len(worker_types)).astype(float), gpu_type,
                   gpu_server, server_type, [np.arange(starts[s], starts[s + 1]) for s in range(len(servers))],
                   [np.flatnonzero(server_type == j) for j in range(len(worker_types))],
                   labels if any(labels) else ())

    @classmethod
    def from_cluster(cls, cluster: Cluster, labels: dict[str, dict[str, int]] | None = None) -> Topology:
        """`labels[type][label]`: the first N servers of the type carry the label (a simulated cluster)."""
        return cls.from_servers(cluster.worker_types, labelled_servers(cluster.gpus, cluster.server_size, labels or {}))

    @property
    def num_gpus(self) -> int:
        return len(self.gpu_type)

    def free_on(self, server: int, free: np.ndarray, k: int) -> tuple[int, ...]:
        """The first k free GPUs of one server (`free`: a bool per GPU)."""
        ids = self.server_gpus[server]
        return tuple(ids[free[ids]][:k].tolist())

    def spread(self, servers: np.ndarray, room: np.ndarray, free: np.ndarray, k: int) -> tuple[int, ...] | None:
        """k free GPUs over `servers`, those with most `room` first (fewest servers); None if too few."""
        if int(np.sum(room)) < k:
            return None
        out: list[int] = []
        for s in np.asarray(servers)[np.argsort(-np.asarray(room), kind="stable")]:
            out.extend(self.free_on(int(s), free, k - len(out)))
            if len(out) == k:
                break
        return tuple(out)
