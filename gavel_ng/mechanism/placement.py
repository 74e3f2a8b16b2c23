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

With `sequential` (Gavel's prototype placer, as Sia's artifact runs it) a type's entries go by
decreasing scale factor, and in each group of equal scale factor the renewals first keep their
GPUs if no wider entry took one of them, then the others take the type's free GPUs in order
(server by server), split or not: a wide fresh entry may take the GPUs a narrower job held.
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import count

import numpy as np

from ..topology import Topology
from .leases import Holders, JobLeases


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
    holder: np.ndarray | None  # (G,) entry index of a one-GPU renewal on that GPU, -1 otherwise (for wide entries)
    gpus: list
    renewed: list[bool]


class Placer:
    """Remembers last round's placement so that staying rows keep their GPUs.

    `last` maps each key to (type, GPUs). A round of one-GPU, one-job entries (most rounds of a
    single-GPU trace) is remembered by job instead (`place_jobs`, gavel_ng.mechanism.leases), so
    that the next such round finds its renewals in a few array operations; the dict is built only
    when someone reads `last` (and from then on it is what counts, since its reader may change it)."""

    def __init__(self, topology: Topology, consolidate: bool = True, sequential: bool = False, rules=None):
        self.topo = topology
        self.consolidate = consolidate
        self.sequential = sequential
        self._last: Holders = Holders()
        self._leases = JobLeases()   # the memory instead of _last while it is active
        self._use_gpus()
        self.rules = rules  # gavel_ng.rules.placement.ServerRules: labels, (anti-)affinity, quotas per round

    @property
    def last(self) -> dict[tuple[int, ...], tuple[int, tuple[int, ...]]]:
        if self._leases.active:
            self._last = Holders(self._leases.as_dict(self._one_gpu))
        return self._last

    @last.setter
    def last(self, value: dict) -> None:
        self._leases.clear()
        self._last = value if isinstance(value, Holders) else Holders(value)

    def remember(self, key: tuple[int, ...], t: int, gpus: tuple[int, ...]) -> None:
        """`key` holds `gpus` (of type t) from now on, mid-round: whoever held one of them is
        forgotten there, so that the next round renews `key` in place when it keeps its type."""
        if self._leases.active and len(key) == 1 and len(gpus) == 1:
            self._leases.hold(key[0], t, gpus[0])
            return
        last = self.last
        for k in last.holding(gpus):
            del last[k]
        last[key] = (t, tuple(gpus))

    def _use_gpus(self) -> None:
        """What one-GPU placement keeps per topology: the tuple (g,) of each GPU g (an entry's GPUs),
        each GPU's sort key but for its server's free count (_place_single), and where each type's
        GPUs start in that sort."""
        topo = self.topo
        G = topo.num_gpus
        self._one_gpu = np.empty(G, dtype=object)
        self._one_gpu_list = [(g,) for g in range(G)]
        self._one_gpu[:] = self._one_gpu_list
        self._all_free = np.ones(G, dtype=bool)
        self._all_true = np.ones(G, dtype=bool)
        self._all_true.flags.writeable = False   # read-only: place_jobs hands out views of it
        self._gpu_server = topo.gpu_server.astype(np.int64)
        self._num_servers = len(topo.server_type)
        self._full = int(np.bincount(topo.gpu_server).max(initial=0)) + 1 if G else 1   # above any free count
        self._gpu_key = topo.gpu_type.astype(np.int64) * ((self._full + 1) * G) + np.arange(G)
        self._type_start = np.concatenate([[0], np.cumsum(np.bincount(topo.gpu_type,
                                                                      minlength=len(topo.worker_types)))]).tolist()
        # each type's GPUs server by server: the order `sequential` placement takes free ones in
        self._type_gpus = [np.concatenate([topo.server_gpus[s] for s in topo.type_servers[j]]).astype(np.int64)
                           if len(topo.type_servers[j]) else np.zeros(0, np.int64)
                           for j in range(len(topo.worker_types))]

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
        self._use_gpus()
        self.last = last

    def place(self, keys: list[tuple[int, ...]], types: list[int], sfs: list[int],
              spread: list[bool] | None = None, blocked: list[int] | None = None) -> Placed:
        """`spread[i]`: entry i may be split over servers (an `_unconsolidated` column). Entries
        that may not are placed first, each on one server when one has room; a renewal that
        left such an entry split is given up for a fresh try at consolidating it (with
        `consolidate`, only when a server can take it whole). With `rules`, an entry the rules
        keep off every server this round gets None (see gavel_ng.rules.placement)."""
        if self.rules is not None and blocked is None:
            return self._place_ruled(keys, types, sfs, spread)
        if self.sequential and not blocked:
            return self._place_sequential(keys, types, sfs)
        if not blocked and keys and min(sfs) == max(sfs) == 1:
            return self._place_ones(keys, types)
        topo = self.topo
        E = len(keys)
        st = _Round(np.ones(topo.num_gpus, dtype=bool), None, [None] * E, [False] * E)
        last = self.last
        fresh: list[int] = []
        doubtful: list[int] = []      # wide entries whose lease is split: renewed unless they can be whole
        held: list[int] = []          # GPUs of renewals and of split leases (held until their turn)
        singles: list[int] = []       # one-GPU renewals
        for i, prev, j, sf in zip(count(), map(last.get, keys), types, sfs):
            if prev is None or prev[0] != j or len(prev[1]) != sf:
                fresh.append(i)
                continue
            if sf == 1:
                singles.append(i)
                st.gpus[i] = prev[1]
                st.renewed[i] = True
                held.append(prev[1][0])
                continue
            if (spread is not None and spread[i]) or self._servers(prev[1]) == 1:
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
        if blocked:   # GPUs the rules' placement gave out this round
            st.free[blocked] = False
        all_one = not E or min(sfs) == max(sfs) == 1   # the single-GPU case: nothing wide, nothing split
        wide = [] if all_one else [i for i in fresh + doubtful if sfs[i] > 1]
        if wide:   # only wide entries look at (and move) one-GPU renewals
            st.holder = np.full(topo.num_gpus, -1, dtype=np.int64)
            if singles and self.consolidate:
                st.holder[[st.gpus[i][0] for i in singles]] = singles
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
        ones = fresh if all_one else [i for i in fresh if sfs[i] == 1] + moved
        for i, g in zip(ones, self._place_single(ones, types, st.free)):
            st.gpus[i] = (g,)
        self.last = dict(zip(keys, zip(types, st.gpus)))
        consolidated = np.ones(E, dtype=bool)
        for i in () if all_one else range(E):
            consolidated[i] = sfs[i] == 1 or self._servers(st.gpus[i]) == 1
        return Placed(st.gpus, np.array(st.renewed, dtype=bool), consolidated)

    def _place_sequential(self, keys: list[tuple[int, ...]], types: list[int], sfs: list[int]) -> Placed:
        """place() as Gavel's prototype places (module docstring, `sequential`)."""
        E = len(keys)
        free = np.ones(self.topo.num_gpus, dtype=bool)
        gpus: list = [None] * E
        renewed = np.zeros(E, dtype=bool)
        last = self.last
        for sf in sorted(set(sfs), reverse=True):
            group = [i for i in range(E) if sfs[i] == sf]
            fresh = []
            for i in group:
                prev = last.get(keys[i])
                if prev is not None and prev[0] == types[i] and len(prev[1]) == sf and free[list(prev[1])].all():
                    gpus[i] = tuple(prev[1])
                    renewed[i] = True
                    free[list(prev[1])] = False
                else:
                    fresh.append(i)
            for i in fresh:
                ids = self._type_gpus[types[i]]
                take = ids[free[ids]][:sf]
                if len(take) != sf:
                    raise RuntimeError(f"placement: {sf} GPUs of type {types[i]} selected but only {len(take)} free")
                free[take] = False
                gpus[i] = tuple(take.tolist())
        self.last = dict(zip(keys, zip(types, gpus)))
        consolidated = np.fromiter((self._servers(g) == 1 for g in gpus), dtype=bool, count=E)
        return Placed(gpus, renewed, consolidated)

    def _place_ones(self, keys: list[tuple[int, ...]], types: list[int]) -> Placed:
        """place() when every entry takes one GPU (nothing wide, nothing split): a row that stays
        on its type renews its GPU, the others go where _place_single puts them."""
        gpus: list = []
        fresh: list[int] = []
        held: list[int] = []
        i = 0
        for p, j in zip(map(self.last.get, keys), types):
            if p is not None and p[0] == j and len(p[1]) == 1:
                gpus.append(p[1])
                held.append(p[1][0])
            else:
                gpus.append(None)
                fresh.append(i)
            i += 1
        renewed = np.ones(len(keys), dtype=bool)
        if fresh:
            renewed[fresh] = False
            free = np.ones(self.topo.num_gpus, dtype=bool)
            free[held] = False
            for i, g in zip(fresh, self._place_single(fresh, types, free)):
                gpus[i] = (g,)
        self.last = dict(zip(keys, zip(types, gpus)))
        return Placed(gpus, renewed, np.ones(len(keys), dtype=bool))

    def place_jobs(self, keys: list[tuple[int, ...]], jobs: np.ndarray, types: list[int],
                   type_array: np.ndarray | None = None) -> Placed:
        """place() when entry i is job `jobs[i]` alone on one GPU (`keys[i] == (jobs[i],)`) and no
        rules apply: the same choices as `_place_ones`, remembered by job (see the class).
        `type_array`: `types` as an array, when the caller has it."""
        t = np.asarray(types, dtype=np.int64) if type_array is None else type_array
        leases = self._leases
        if not leases.active:   # last round is remembered as a dict
            placed = self._place_ones(keys, types)
            g = np.fromiter((p[0] for p in placed.gpus), dtype=np.int64, count=len(keys))
            leases.store(jobs, t, g)
        else:
            renewed, g = leases.lookup(jobs, t)
            fresh = np.logical_not(renewed).nonzero()[0]
            if len(fresh):
                free = self._all_free.copy()
                free[g[renewed]] = False
                g[fresh] = self._place_single(fresh.tolist(), types, free)
            # (one entry per GPU at most: consolidated is a read-only view)
            placed = Placed(list(map(self._one_gpu_list.__getitem__, g.tolist())), renewed,
                            self._all_true[:len(keys)])
            leases.store(jobs, t, g, looked_up=True)
        self._last = Holders()
        return placed

    def _place_ruled(self, keys, types, sfs, spread) -> Placed:
        """Entries over quota wait; those the server rules concern are placed by them first (around
        the GPUs of the other entries' leases), then the rest as usual on what is left."""
        rules, last = self.rules, self.last
        E = len(keys)
        keep = rules.within_quota(keys, types, sfs, self.topo.worker_types)
        involved = rules.involved(keys, sfs)
        special = [i for i in range(E) if keep[i] and involved[i]]
        chosen = set(special)
        plain = [i for i in range(E) if keep[i] and i not in chosen]
        free = np.ones(self.topo.num_gpus, dtype=bool)
        for i in plain:
            prev = last.get(keys[i])
            if prev is not None and prev[0] == types[i] and len(prev[1]) == sfs[i]:
                free[list(prev[1])] = False
        got = rules.place(self.topo, special, keys, types, sfs, free, last)
        blocked = [g for gp in got.values() if gp is not None for g in gp]
        sub = self.place([keys[i] for i in plain], [types[i] for i in plain], [sfs[i] for i in plain],
                         None if spread is None else [spread[i] for i in plain], blocked=blocked)
        gpus: list = [None] * E
        renewed = np.zeros(E, dtype=bool)
        consolidated = np.zeros(E, dtype=bool)
        for k, i in enumerate(plain):
            gpus[i], renewed[i], consolidated[i] = sub.gpus[k], sub.renewed[k], sub.consolidated[k]
        for i, gp in got.items():
            if gp is None:
                continue
            prev = last.get(keys[i])
            gpus[i] = gp
            renewed[i] = prev is not None and prev[0] == types[i] and tuple(prev[1]) == gp
            consolidated[i] = self._servers(gp) == 1
            self.last[keys[i]] = (types[i], gp)
        return Placed(gpus, renewed, consolidated)

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

    def _place_single(self, entries: list[int], types: list[int], free: np.ndarray) -> list[int]:
        """One-GPU entries, all types at once: the GPU of each (in `entries`' order). Each type's free
        GPUs are ranked fullest server first (sequential best fit), then by id; a type's entries take
        its first ones in their order. One sort of all GPUs by (type, free GPUs on their server, id),
        taken ones last within their type."""
        if not entries:
            return []
        topo, G = self.topo, self.topo.num_gpus
        server = self._gpu_server
        key = np.where(free, np.bincount(server[free], minlength=self._num_servers)[server], self._full)
        key *= G
        key += self._gpu_key
        ranked = key.argsort().tolist()
        is_free = free.tolist()
        nxt, end = self._type_start[:-1], self._type_start[1:]
        chosen = []
        for i in entries:
            j = types[i]
            if nxt[j] == end[j] or not is_free[ranked[nxt[j]]]:
                want = sum(1 for k in entries if types[k] == j)
                have = int(free[topo.gpu_type == j].sum())
                raise RuntimeError(f"placement: {want} one-GPU entries on type {j} but {have} GPUs free")
            chosen.append(ranked[nxt[j]])
            nxt[j] += 1
        return chosen
