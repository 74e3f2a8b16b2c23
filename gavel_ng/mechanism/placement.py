"""Placement of a round's entries on GPUs.

A row that runs again on the same type keeps the GPUs it had (a lease renewal: no
checkpoint and restore). The others are placed by decreasing scale factor, each on as
few servers as possible: the fullest server that still fits it (best fit, which keeps
whole servers free for the wide jobs to come), else across the servers with most room.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .topology import Topology


@dataclass
class Placed:
    """GPUs of each entry, in the order the entries were given."""

    gpus: list[tuple[int, ...]]
    renewed: np.ndarray        # (E,) bool: same row, same GPUs as last round
    consolidated: np.ndarray   # (E,) bool: all GPUs on one server


class Placer:
    """Remembers last round's placement so that staying rows keep their GPUs."""

    def __init__(self, topology: Topology):
        self.topo = topology
        self.last: dict[tuple[int, ...], tuple[int, tuple[int, ...]]] = {}

    def forget(self) -> None:
        self.last = {}

    def set_topology(self, topology: Topology, gpu_remap: np.ndarray) -> None:
        """GPUs renumbered (workers joined or left): `gpu_remap[g]` is old GPU g's new number, -1 if
        gone. A placement keeps its renewal only if all its GPUs are still there, of the same type."""
        last = {}
        for key, (j, gpus) in self.last.items():
            new = gpu_remap[np.asarray(gpus, dtype=np.int64)]
            if (new >= 0).all() and (topology.gpu_type[new] == j).all():
                last[key] = (j, tuple(new.tolist()))
        self.topo = topology
        self.last = last

    def place(self, keys: list[tuple[int, ...]], types: list[int], sfs: list[int],
              spread: list[bool] | None = None) -> Placed:
        """`spread[i]`: entry i may be split over servers (an `_unconsolidated` column). Entries
        that may not are placed first, each on one server when one has room; a renewal that
        left such an entry split is given up for a fresh try at consolidating it."""
        topo = self.topo
        E = len(keys)
        free = np.ones(topo.num_gpus, dtype=bool)
        gpus: list[tuple[int, ...] | None] = [None] * E
        renewed = [False] * E
        consolidated = [True] * E
        last = self.last
        fresh: list[int] = []
        held: list[int] = []
        for i, key in enumerate(keys):
            prev = last.get(key)
            if prev is not None and prev[0] == types[i] and len(prev[1]) == sfs[i] and (
                    spread is None or spread[i] or sfs[i] == 1
                    or len({int(topo.gpu_server[g]) for g in prev[1]}) == 1):
                gpus[i] = prev[1]
                held.extend(prev[1])
                renewed[i] = True
            else:
                fresh.append(i)
        if held:
            free[held] = False
        for i in range(E):
            if renewed[i] and sfs[i] > 1:
                consolidated[i] = len({int(topo.gpu_server[g]) for g in gpus[i]}) == 1
        if fresh:
            wide = [i for i in fresh if sfs[i] > 1]
            wide.sort(key=lambda i: -sfs[i])
            if spread is not None:   # consolidated entries take whole servers first
                wide.sort(key=lambda i: spread[i])
            for i in wide:
                gpus[i] = self._place_wide(types[i], sfs[i], free)
                consolidated[i] = len({int(topo.gpu_server[g]) for g in gpus[i]}) == 1
            self._place_single([i for i in fresh if sfs[i] == 1], types, free, gpus)
        self.last = dict(zip(keys, zip(types, gpus)))
        return Placed(gpus, np.array(renewed, dtype=bool), np.array(consolidated, dtype=bool))

    def _place_wide(self, j: int, sf: int, free: np.ndarray) -> tuple[int, ...]:
        servers = self.topo.type_servers[j]
        counts = np.array([free[self.topo.server_gpus[s]].sum() for s in servers])
        fits = np.flatnonzero(counts >= sf)
        if len(fits):
            pick = [servers[fits[np.argmin(counts[fits])]]]
        else:  # split: most room first, as few servers as that takes
            pick = servers[np.argsort(-counts, kind="stable")]
        out: list[int] = []
        for s in pick:
            ids = self.topo.server_gpus[s]
            avail = ids[free[ids]][: sf - len(out)]
            out.extend(avail.tolist())
            if len(out) == sf:
                break
        if len(out) != sf:
            raise RuntimeError(f"placement: {sf} GPUs of type {j} selected but only {len(out)} free")
        free[out] = False
        return tuple(out)

    def _place_single(self, entries: list[int], types: list[int], free: np.ndarray,
                      gpus: list[tuple[int, ...] | None]) -> None:
        """One-GPU entries, vectorized per type: fill the fullest servers first (sequential best fit)."""
        if not entries:
            return
        topo = self.topo
        by_type: dict[int, list[int]] = {}
        for i in entries:
            by_type.setdefault(types[i], []).append(i)
        for j, idx in by_type.items():
            ids = np.flatnonzero(free & (topo.gpu_type == j))
            if len(ids) < len(idx):
                raise RuntimeError(f"placement: {len(idx)} one-GPU entries on type {j} but {len(ids)} GPUs free")
            srv = topo.gpu_server[ids]
            per_server = np.bincount(srv, minlength=len(topo.server_type))[srv]
            chosen = ids[np.lexsort((ids, per_server))][: len(idx)]
            free[chosen] = False
            for i, g in zip(idx, chosen.tolist()):
                gpus[i] = (g,)
