"""Rules over servers, applied where a round's entries get their GPUs (mechanism.placement).

`ServerRules.place(...)` runs before the ordinary placement and takes the entries it must
look at (`involved`): those with a job that needs server labels or has (anti-)affinity, those
with a job another entry's (anti-)affinity names (by a tag: its id, its name where the caller
gives one, its group), and (with `one_distributed_per_server`) every multi-GPU entry. Each goes, in turn, to GPUs of its
type on servers that

- carry every label its jobs need;
- host no job it must not share a server with (anti-affinity, both ways), this round;
- host a job it must share a server with, when one is already placed this round (affinity,
  both ways: a job placed after the one naming it goes next to it too; the first of them to
  be placed takes a server with room for the others when one has it);
- with `one_distributed_per_server`: when the entry is split over servers, host no other
  split entry (Pollux's interference avoidance). A whole-server placement is always tried
  first.

A lease is renewed when its GPUs still satisfy all that, and, for an entry whose affinity
partners are still to be placed this round, when its server has room for them or no allowed
server has more (else the entry moves: a kept lease must not leave its partner out). An entry
that no server can take does not run this round (the hard rules are never broken; the policy's
shares are met over the next rounds), and the mechanism gives the GPUs it leaves to the next
entries of the round's order (gavel_ng.mechanism.refill). Entity quotas are held per round too:
the mechanism's selection asks `quota_tally` before it takes an entry, so an entry whose entity
would hold more GPUs of a type than its quota this round waits and the next entries get those
GPUs; placement checks again (`within_quota`).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from .model import ClusterRules, JobRules


class ServerRules:
    """The cluster's rules and a lookup of each job's (`job_rules(job) -> JobRules | None`)."""

    def __init__(self, rules: ClusterRules | None, job_rules: Callable[[int], JobRules | None],
                 job_tags: Callable[[int], set[str]] | None = None):
        self.rules = rules or ClusterRules()
        self.job_rules = job_rules
        self.job_tags = job_tags or (lambda m: {str(m)})

    def _rules(self, key) -> list[JobRules]:
        return [r for r in (self.job_rules(m) for m in key) if r is not None]

    def constrained(self, key, sf: int) -> bool:
        if self.rules.one_distributed_per_server and sf > 1:
            return True
        return any(r.on_servers for r in self._rules(key))

    def tags(self, key) -> set[str]:
        """The names an entry's jobs answer to in (anti-)affinity rules: their tags and groups."""
        return set().union(*(self.job_tags(m) for m in key)) | {r.group for r in self._rules(key) if r.group}

    def involved(self, keys, sfs) -> list[bool]:
        """Per entry: whether placement by these rules must see it (`constrained`, or named by another
        entry's affinity or anti-affinity this round: both sides of such a rule are placed here)."""
        out = [self.constrained(k, sf) for k, sf in zip(keys, sfs)]
        named = self.named(keys)
        if named:
            out = [o or bool(self.tags(k) & named) for o, k in zip(out, keys)]
        return out

    def named(self, keys) -> set[str]:
        """The names the entries' affinity and anti-affinity rules mention."""
        return set().union(*(set(r.affinity) | set(r.anti_affinity) for k in keys for r in self._rules(k)))

    def joins_involved(self, key, sf: int, named: set[str]) -> bool:
        """involved(keys + [key], ...)[-1], given `named` = named(keys): one entry's answer without the others'."""
        return self.constrained(key, sf) or bool(self.tags(key) & (named | self.named([key])))

    # ----- per-round quotas ---------------------------------------------------------------
    def within_quota(self, keys, types, sfs, worker_types: list[str]) -> list[bool]:
        """Per entry, in the order given (the selection's): whether its entity stays within quota."""
        if not self.rules.quotas:
            return [True] * len(keys)
        tally = self.quota_tally(worker_types)
        return [tally(key, j, sf) for key, j, sf in zip(keys, types, sfs)]

    def quota_tally(self, worker_types: list[str]) -> Callable[[tuple, int, int], bool]:
        """A fresh round's tally: `tally(key, type, sf)` says whether the entry fits its entities'
        quotas on that type besides what the tally already admitted, and if so admits it. The
        mechanism's selection asks it before taking an entry, so that GPUs an over-quota entry
        would have taken go to the next entries instead of idling (placement asks it again)."""
        quotas = self.rules.quotas
        used: dict[tuple[str, int], float] = {}

        def tally(key, j: int, sf: int) -> bool:
            ents = {r.entity for r in self._rules(key) if r.entity in quotas}
            if not all(used.get((t, j), 0.0) + sf <= quotas[t].get(worker_types[j], np.inf) + 1e-9 for t in ents):
                return False
            for t in ents:
                used[(t, j)] = used.get((t, j), 0.0) + sf
            return True

        return tally

    # ----- placement ----------------------------------------------------------------------
    def place(self, topo, entries: list[int], keys, types, sfs, free: np.ndarray,
              last: dict) -> dict[int, tuple[int, ...] | None]:
        """GPUs for each of `entries` (None: it waits this round); marks them taken in `free`."""
        S = len(topo.server_type)
        hosts: list[set[str]] = [set() for _ in range(S)]       # tags of the jobs placed on each server
        shunned: list[set[str]] = [set() for _ in range(S)]     # tags those jobs keep away
        drawn: list[set[str]] = [set() for _ in range(S)]       # tags those jobs want next to them
        split_on = np.zeros(S, dtype=bool)                      # a split entry runs there
        labels = topo.server_labels if len(topo.server_labels) else [frozenset()] * S
        out: dict[int, tuple[int, ...] | None] = {}
        order = sorted(entries, key=lambda i: (last.get(keys[i]) is None, -sfs[i]))   # renewals first
        info = {}
        for i in order:
            rules = self._rules(keys[i])
            info[i] = (self.tags(keys[i]),
                       set().union(*(set(r.labels) for r in rules)) if rules else set(),
                       set().union(*(set(r.anti_affinity) for r in rules)) if rules else set(),
                       set().union(*(set(r.affinity) for r in rules)) if rules else set())
        for n, i in enumerate(order):
            tags, need, avoid, near = info[i]
            servers = topo.type_servers[types[i]]
            ok = np.array([need <= labels[s] and not (hosts[s] & avoid) and not (shunned[s] & tags)
                           for s in servers], dtype=bool)
            with_group = np.array([bool(hosts[s] & near) or bool(drawn[s] & tags) for s in servers], dtype=bool)
            if with_group.any():
                ok &= with_group
            # GPUs of the partners still to place (same type): the first of them takes a server with room
            room = sfs[i] + sum(sfs[k] for k in order[n + 1:] if types[k] == types[i]
                                and (near & info[k][0] or info[k][3] & tags))
            gpus = self._renewal(topo, last.get(keys[i]), types[i], sfs[i], servers[ok], free, split_on)
            if gpus is not None and room > sfs[i] and not self._has_room(topo, gpus, room, servers[ok], free):
                gpus = None     # its server cannot take the partners and another can: move, not leave them out
            if gpus is None:
                gpus = self._fresh(topo, servers[ok], sfs[i], free, split_on, room)
            out[i] = gpus
            if gpus is None:
                continue
            free[list(gpus)] = False
            used = {int(topo.gpu_server[g]) for g in gpus}
            for s in used:
                hosts[s] |= tags
                shunned[s] |= avoid
                drawn[s] |= near
                if len(used) > 1:
                    split_on[s] = True
        return out

    def _renewal(self, topo, prev, j: int, sf: int, allowed: np.ndarray, free: np.ndarray,
                 split_on: np.ndarray) -> tuple[int, ...] | None:
        if prev is None or prev[0] != j or len(prev[1]) != sf or not free[list(prev[1])].all():
            return None
        used = {int(topo.gpu_server[g]) for g in prev[1]}
        if not used <= set(allowed.tolist()):
            return None
        if len(used) > 1 and self.rules.one_distributed_per_server and split_on[list(used)].any():
            return None
        return tuple(prev[1])

    @staticmethod
    def _has_room(topo, gpus, room: int, allowed: np.ndarray, free: np.ndarray) -> bool:
        """Whether a renewal on `gpus` leaves its partners as much room as the best allowed server would."""
        here = {int(topo.gpu_server[g]) for g in gpus}
        if len(here) > 1:
            return True
        counts = [int(free[topo.server_gpus[s]].sum()) for s in allowed]
        return int(free[topo.server_gpus[next(iter(here))]].sum()) >= min(room, max(counts, default=0))

    def _fresh(self, topo, allowed: np.ndarray, sf: int, free: np.ndarray,
               split_on: np.ndarray, room: int = 0) -> tuple[int, ...] | None:
        """`room`: GPUs wanted on one server (the entry's and its affinity partners'), when one has them."""
        if not len(allowed):
            return None
        counts = np.array([int(free[topo.server_gpus[s]].sum()) for s in allowed])
        fits = np.flatnonzero(counts >= max(sf, room))
        if not len(fits):
            fits = np.flatnonzero(counts >= sf)
        if len(fits):   # the fullest server that takes it whole (best fit)
            return topo.free_on(int(allowed[fits[np.argmin(counts[fits])]]), free, sf)
        usable = allowed if not self.rules.one_distributed_per_server else allowed[~split_on[allowed]]
        room = np.array([int(free[topo.server_gpus[s]].sum()) for s in usable], dtype=int)
        return topo.spread(usable, room, free, sf)
