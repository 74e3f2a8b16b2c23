"""GPUs, grouped into servers per worker type: what placement chooses from."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .cluster import Cluster


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
    def from_cluster(cls, cluster: Cluster, labels: dict[str, dict[str, int]] | None = None) -> Topology:
        """`labels[type][label]`: the first N servers of the type carry the label (a simulated cluster)."""
        gpu_type, gpu_server, server_type, server_gpus, type_servers = [], [], [], [], []
        g = 0
        for j, w in enumerate(cluster.worker_types):
            n, size = cluster.gpus[w], cluster.server_size(w)
            mine = []
            for start in range(0, n, size):
                k = min(size, n - start)
                s = len(server_type)
                server_type.append(j)
                server_gpus.append(np.arange(g, g + k))
                gpu_type += [j] * k
                gpu_server += [s] * k
                mine.append(s)
                g += k
            type_servers.append(np.array(mine, dtype=np.int64))
        server_labels = ()
        if labels:
            st = np.array(server_type)
            rank = [int((st[:s] == st[s]).sum()) for s in range(len(st))]
            server_labels = tuple(frozenset(lb for lb, n in labels.get(cluster.worker_types[t], {}).items() if k < n)
                                  for t, k in zip(server_type, rank))
        return cls(cluster.worker_types, cluster.capacity(), np.array(gpu_type, dtype=np.int64),
                   np.array(gpu_server, dtype=np.int64), np.array(server_type, dtype=np.int64),
                   server_gpus, type_servers, server_labels)

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
