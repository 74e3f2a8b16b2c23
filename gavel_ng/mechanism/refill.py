"""A round's entries under server rules: GPUs an entry cannot use go to the next entries.

Selection counts GPUs per type; the rules (labels, anti-affinity, one split job per server:
gavel_ng.rules) only show at placement, where an entry no server can take this round waits.
Its GPUs would then idle while entries further down the order wait for them. So, after a
placement that left entries out, the selection goes on down the order without them, for the
GPUs the placed entries leave, and the whole round is placed again; a few passes at most,
and a pass is kept only when it places more GPUs than the one before.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field

from .placement import Placed, Placer

log = logging.getLogger(__name__)

MAX_PASSES = 3


@dataclass
class Entries:
    """A round's chosen entries, position by position (`rows[i]` is -1 for a backfilled job;
    `cols[i]` its allocation column, the same as `types[i]` when columns are the types)."""

    keys: list[tuple[int, ...]] = field(default_factory=list)
    rows: list[int] = field(default_factory=list)
    cols: list[int] = field(default_factory=list)
    types: list[int] = field(default_factory=list)
    sfs: list[int] = field(default_factory=list)

    def add(self, key: tuple[int, ...], row: int, col: int, typ: int, sf: int) -> None:
        self.keys.append(key)
        self.rows.append(row)
        self.cols.append(col)
        self.types.append(typ)
        self.sfs.append(sf)

    def subset(self, idx: list[int]) -> Entries:
        return Entries(*([a[i] for i in idx] for a in (self.keys, self.rows, self.cols, self.types, self.sfs)))

    def extend(self, other: Entries) -> Entries:
        return Entries(self.keys + other.keys, self.rows + other.rows, self.cols + other.cols,
                       self.types + other.types, self.sfs + other.sfs)


def place_with_refill(placer: Placer, ent: Entries, spread: Callable[[list[int]], list[bool] | None],
                      more: Callable[[Entries, set[tuple[int, int]], set[int]], Entries]) -> tuple[Entries, Placed]:
    """Place `ent`; while entries were left out and `more(kept, skip, skip_jobs)` finds others
    for the GPUs the kept ones leave (never an entry in `skip`, (row, col) pairs left out
    before, nor a backfilled job in `skip_jobs`), place the kept and the new entries again.
    Returns the entries that got GPUs and their placement (the others wait this round)."""
    before = dict(placer.last)
    placed = placer.place(ent.keys, ent.types, ent.sfs, spread(ent.cols))
    skip: set[tuple[int, int]] = set()
    skip_jobs: set[int] = set()
    for _ in range(MAX_PASSES):
        out = [i for i, g in enumerate(placed.gpus) if g is None]
        if not out:
            break
        for i in out:
            if ent.rows[i] >= 0:
                skip.add((ent.rows[i], ent.cols[i]))
            else:
                skip_jobs.update(ent.keys[i])
        kept = ent.subset([i for i, g in enumerate(placed.gpus) if g is not None])
        extra = more(kept, skip, skip_jobs)
        if not extra.keys:
            break
        trial_ent = kept.extend(extra)
        after = dict(placer.last)
        placer.last = dict(before)
        trial = placer.place(trial_ent.keys, trial_ent.types, trial_ent.sfs, spread(trial_ent.cols))
        if _gpus(trial) <= _gpus(placed):   # no better: keep the previous pass
            placer.last = after
            break
        ent, placed = trial_ent, trial
    k = [i for i, g in enumerate(placed.gpus) if g is not None]
    if len(k) == len(ent.keys):
        return ent, placed
    return ent.subset(k), Placed([placed.gpus[i] for i in k], placed.renewed[k], placed.consolidated[k])


def _gpus(placed: Placed) -> int:
    return sum(len(g) for g in placed.gpus if g is not None)
