"""Placement of a round's entries on GPUs.

A row that runs again on the same type keeps the GPUs it had (a lease renewal: no
checkpoint and restore). The others are placed by decreasing scale factor, each on as
few servers as possible: the fullest server that still fits it (best fit, which keeps
whole servers free for the wide jobs to come), else across the servers with most room.

With `consolidate` (the default) a multi-GPU entry that would otherwise be split over
servers is put on one server when one can be had, because a split job runs at its
unconsolidated throughput (a third to a half of the consolidated one for many models),
which costs far more than a restart:

* a split lease is renewed only when no server can take the entry whole this round;
* when no server has room, one-GPU entries renewing on the server that needs the fewest
  of them to move are moved elsewhere (they are re-placed, not renewed).

Without it (the prototype), plain entries keep their split leases and nothing is moved.
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


@dataclass
class _Round:
    """One placement's working state: free GPUs and, per GPU, the one-GPU renewal holding it."""

    free: np.ndarray           # (G,) bool
    holder: np.ndarray         # (G,) entry index of a one-GPU renewal on that GPU, -1 otherwise
    gpus: list
    renewed: list[bool]


class Placer:
    """Remembers last round's placement so that staying rows keep their GPUs."""

    def __init__(self, topology: Topology, consolidate: bool = True):
        self.topo = topology
        self.consolidate = consolidate
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
        left such an entry split is given up for a fresh try at consolidating it (with
        `consolidate`, only when a server can take it whole)."""
        topo = self.topo
        E = len(keys)
        st = _Round(np.ones(topo.num_gpus, dtype=bool), np.full(topo.num_gpus, -1, dtype=np.int64),
                    [None] * E, [False] * E)
        last = self.last
        fresh: list[int] = []
        doubtful: list[int] = []      # wide entries whose lease is split: renewed unless they can be whole
        held: list[int] = []          # GPUs of renewals and of split leases (held until their turn)
        singles: list[int] = []       # one-GPU renewals
        for i, key in enumerate(keys):
            prev = last.get(key)
            if prev is None or prev[0] != types[i] or len(prev[1]) != sfs[i]:
                fresh.append(i)
                continue
            if sfs[i] == 1:
                singles.append(i)
            elif (spread is not None and spread[i]) or self._servers(prev[1]) == 1:
                pass
            elif self.consolidate:
                doubtful.append(i)
                held.extend(prev[1])
                continue
            elif spread is not None:  # the prototype gives up split leases of consolidated columns only
                fresh.append(i)
                continue
            st.gpus[i] = prev[1]
            st.renewed[i] = True
            held.extend(prev[1])
        if held:
            st.free[held] = False
        if singles and self.consolidate:
            st.holder[[st.gpus[i][0] for i in singles]] = singles
        wide = [i for i in fresh + doubtful if sfs[i] > 1]
        wide.sort(key=lambda i: -sfs[i])
        if spread is not None:   # consolidated entries take whole servers first
            wide.sort(key=lambda i: spread[i])
        moved: list[int] = []
        split_leases = set(doubtful)
        for i in wide:
            may_split = spread is not None and spread[i]
            if i in split_leases:
                self._replace_or_renew(st, i, last[keys[i]][1], types[i], sfs[i], moved)
            else:
                st.gpus[i] = self._place_wide(types[i], sfs[i], st, None if may_split else moved)
        self._place_single([i for i in fresh if sfs[i] == 1] + moved, types, st.free, st.gpus)
        self.last = dict(zip(keys, zip(types, st.gpus)))
        consolidated = [sfs[i] == 1 or self._servers(st.gpus[i]) == 1 for i in range(E)]
        return Placed(st.gpus, np.array(st.renewed, dtype=bool), np.array(consolidated, dtype=bool))

    # ----- helpers -----------------------------------------------------------------------------
    def _servers(self, gpus) -> int:
        return len({int(self.topo.gpu_server[g]) for g in gpus})

    def _replace_or_renew(self, st: _Round, i: int, prev: tuple[int, ...], j: int, sf: int,
                          moved: list[int]) -> None:
        """A split lease: placed whole on one server if one can take it (moving one-GPU entries
        if need be), else renewed where it is."""
        st.free[list(prev)] = True
        server = self._whole_server(j, sf, st)
        if server is None:
            st.gpus[i] = prev
            st.renewed[i] = True
            st.free[list(prev)] = False
        else:
            st.gpus[i] = self._take_server(server, sf, st, moved)

    def _place_wide(self, j: int, sf: int, st: _Round, moved: list[int] | None) -> tuple[int, ...]:
        """On one server when one has room (moving one-GPU renewals when `moved` is given and that
        makes room), else split over the servers with most room."""
        free = st.free
        servers = self.topo.type_servers[j]
        counts = self._free_per_server(servers, free)
        fits = np.flatnonzero(counts >= sf)
        if len(fits):
            return self._take_server(servers[fits[np.argmin(counts[fits])]], sf, st, moved)
        if moved is not None and self.consolidate:
            server = self._whole_server(j, sf, st)
            if server is not None:
                return self._take_server(server, sf, st, moved)
        out: list[int] = []
        for s in servers[np.argsort(-counts, kind="stable")]:  # split: most room first
            ids = self.topo.server_gpus[s]
            out.extend(ids[free[ids]][: sf - len(out)].tolist())
            if len(out) == sf:
                break
        if len(out) != sf:
            raise RuntimeError(f"placement: {sf} GPUs of type {j} selected but only {len(out)} free")
        free[out] = False
        return tuple(out)

    def _free_per_server(self, servers: np.ndarray, free: np.ndarray) -> np.ndarray:
        return self._per_server(free)[servers]

    def _per_server(self, mask: np.ndarray) -> np.ndarray:
        """GPUs of each server where `mask` holds (one bincount: this runs for every wide entry)."""
        return np.bincount(self.topo.gpu_server[mask], minlength=len(self.topo.server_type))

    def _whole_server(self, j: int, sf: int, st: _Round) -> int | None:
        """The server of type j that can hold sf GPUs with the fewest one-GPU renewals moved off it
        (then the fullest: best fit), or None."""
        servers = self.topo.type_servers[j]
        counts = self._free_per_server(servers, st.free)
        movable = self._per_server(st.holder >= 0)[servers]
        ok = np.flatnonzero(counts + movable >= sf)
        if not len(ok):
            return None
        moves = np.maximum(sf - counts[ok], 0)
        best = ok[np.lexsort((counts[ok] + movable[ok], moves))[0]]
        return int(servers[best])

    def _take_server(self, s: int, sf: int, st: _Round, moved: list[int] | None) -> tuple[int, ...]:
        """sf GPUs of server s: its free ones first, then those of one-GPU renewals, which move."""
        ids = self.topo.server_gpus[s]
        out = ids[st.free[ids]][:sf].tolist()
        if len(out) < sf:
            taken = ids[st.holder[ids] >= 0][: sf - len(out)]
            for g in taken.tolist():
                k = int(st.holder[g])
                st.holder[g] = -1
                st.gpus[k] = None
                st.renewed[k] = False
                if moved is not None:
                    moved.append(k)
            out.extend(taken.tolist())
        st.free[out] = False
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
