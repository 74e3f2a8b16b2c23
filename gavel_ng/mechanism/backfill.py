"""Mid-round backfill: GPUs an entry frees before the round ends go to the round's waiting entries.

Gavel's rounds hold every placed entry's GPUs until the round boundary; a job that finishes (or
fails) early leaves them idle until then. Backfill hands them, for the rest of the round (a lease
that ends at the boundary), to the entries this round's allocation wanted but did not run,
walked in the mechanism's own order for the round (priority, then allocation: what greedy
selection walked) and after them the jobs no allocation knows yet (each on its fastest types
first, as the round's own backfill of new jobs). An entry is taken when none of its jobs ran or
runs this round, the freed GPUs hold it under placement's server rules (below) and enough of
the round is left (`worth_starting`).

The mechanism builds a `Waitlist` with each plan (`RoundPlan.waiting`); the simulator's executor
and the deployment runtime both ask it `choose(...)` when GPUs come free, so the choice is one
piece of code. It is built lazily: most rounds free nothing early and never ask.

Server rules, as placement applies them:
* a multi-GPU entry of a column that may not be spread (a consolidated column of a
  placement-sensitive allocation, or any column while the mechanism consolidates) needs its
  GPUs on one server: the fullest server that holds it whole (best fit, as placement does).
  Only a spread column (`TYPE_unconsolidated`), or a mechanism that does not consolidate,
  takes GPUs over several servers. A split job runs at a fraction of its consolidated rate,
  which the mechanism accepts for a whole round only when nothing better exists;
* one-GPU entries take the free GPU on the fullest server, which keeps whole servers free;
* with server rules (gavel_ng.rules) an entry the rules concern (labels, (anti-)affinity, one
  split job per server) waits for the next round, whose placement sees every entry at once;
  per-round quotas count the entries holding GPUs at that moment.

The policy's packing rows (a budget, a cap: gavel_ng.mechanism.limits) are counted the same
way: an entry is taken only if, with every entry holding GPUs at that moment, it keeps them.
A caller passes those holders (`choose`'s `holding`) whenever the waitlist `watches_holders`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from ..topology import Topology

# a lease shorter than this share of a round is not worth a start-up; the runtime's launcher
# already refused launches with less than a quarter round left, so both use the same bound
MIN_LEASE_SHARE = 0.25


def worth_starting(seconds_left: float, overhead: float, round_seconds: float) -> bool:
    """Whether a backfilled job should start with `seconds_left` of the round to go: after paying
    its start-up `overhead` it must still run at least as long as it spent starting, and at least
    MIN_LEASE_SHARE of a round (restarts are never free on a real cluster even when modeled as 0)."""
    return seconds_left - overhead >= max(overhead, MIN_LEASE_SHARE * round_seconds) - 1e-9


def may_start(seconds_left: float, round_seconds: float, lead: float) -> bool:
    """Whether a job may still start mid-round, on a cluster and in the simulator alike: the round's plan is
    still the latest (the next is made `lead` s before the boundary, mechanism.plan_lead: from then on the
    mechanism has moved on) and a quarter round is left (`worth_starting` with no start-up: what a launch will
    cost is not known when it is decided)."""
    return seconds_left > lead + 1e-9 and worth_starting(seconds_left, 0.0, round_seconds)


@dataclass
class Candidates:
    """The round's waiting entries, best first (arrays over candidates)."""

    keys: list[tuple[int, ...]]
    rows: np.ndarray      # allocation row, -1 for a job the allocation does not know
    cols: np.ndarray      # allocation column
    types: np.ndarray     # worker type (index into the topology's)
    sfs: np.ndarray       # GPUs it needs
    spread: np.ndarray    # bool: may be split over servers
    lead: np.ndarray      # its first job (a quick test of whether it is busy)

    def __len__(self) -> int:
        return len(self.keys)


class Holder(NamedTuple):
    """An entry holding GPUs at some moment of a round: its jobs, worker type, GPU count, and its
    allocation row (-1: a job the allocation does not know) and column."""

    key: tuple[int, ...]
    type: int
    sf: int
    row: int
    col: int


def holders(plan) -> list[Holder]:
    """A plan's entries as Holders (a RoundPlan: columns are its types unless it has `cols`)."""
    cols = plan.types if plan.cols is None else plan.cols
    return [Holder(k, t, s, r, c) for k, t, s, r, c in zip(plan.keys, plan.types.tolist(), plan.sfs.tolist(),
                                                             plan.rows.tolist(), cols.tolist())]


@dataclass(frozen=True)
class Backfilled:
    """One chosen candidate and the GPUs it gets for the rest of the round."""

    key: tuple[int, ...]
    row: int
    col: int
    type: int
    sf: int
    gpus: tuple[int, ...]
    consolidated: bool

    @property
    def holder(self) -> Holder:
        return Holder(self.key, self.type, self.sf, self.row, self.col)


class Waitlist:
    """A plan's waiting entries (built by `build()` when first needed) and the choice over them.

    `consolidate`: multi-GPU entries of non-spread columns need one server. `rules`: the placer's
    ServerRules or None. `remember(key, type, gpus)`: called for each chosen entry, so that the
    next round's placement renews it where it runs (the placer's memory). `limits()`: a fresh
    mechanism.limits.Tally of the policy's packing rows as they were when the plan was made, or
    None where there are none."""

    def __init__(self, build: Callable[[], Candidates], topology: Topology, consolidate: bool, rules=None,
                 remember: Callable[[tuple[int, ...], int, tuple[int, ...]], None] | None = None,
                 limits: Callable[[], object] | None = None):
        self._build = build
        self._candidates: Candidates | None = None
        self.topo = topology
        self.consolidate = consolidate
        self.rules = rules
        self.remember = remember
        self.limits = limits

    @property
    def watches_holders(self) -> bool:
        """Whether `choose` needs the entries holding GPUs (rules or the policy's packing rows)."""
        return self.rules is not None or self.limits is not None

    @property
    def candidates(self) -> Candidates:
        return self.build()

    def build(self) -> Candidates:
        """The candidates, built on the first call (a runtime builds them when the plan is published)."""
        if self._candidates is None:
            self._candidates = self._build()
            self._build = None
        return self._candidates

    def choose(self, free: np.ndarray, busy: set[int], holding: list[Holder] = ()) -> list[Backfilled]:
        """Entries for the GPUs `free` (bool per GPU) marks, down the order: none with a job in `busy`
        (updated in place with the chosen entries' jobs). `holding`: the entries that hold GPUs now
        (`holders`), for quotas, rules and the policy's packing rows. Nothing when nothing fits."""
        topo = self.topo
        free = np.array(free, dtype=bool)
        left = np.bincount(topo.gpu_type[free], minlength=len(topo.worker_types))
        if not left.any():
            return []
        c = self.candidates
        if not len(c):
            return []
        ok = c.sfs <= left[c.types]
        if busy:   # (a lookup table: np.isin sorts, slow at a round's sizes)
            b = np.fromiter(busy, np.int64, len(busy))
            hit = np.zeros(max(int(b.max()), int(c.lead.max())) + 1, dtype=bool)
            hit[b] = True
            ok &= ~hit[c.lead]
        idx = np.flatnonzero(ok)
        if not len(idx):
            return []
        rules, tally = self.rules, None
        named = rules.named([h.key for h in holding]) if rules is not None else set()
        if rules is not None and rules.rules.quotas:
            tally = rules.quota_tally(list(topo.worker_types))
            for h in holding:
                tally(h.key, h.type, h.sf)
        limit = self.limits() if self.limits is not None else None
        if limit is not None:
            for h in holding:
                if h.row >= 0:
                    limit.take(h.row, h.col)
        out: list[Backfilled] = []
        for i in idx.tolist():
            key, t, sf = c.keys[i], int(c.types[i]), int(c.sfs[i])
            if left[t] < sf or any(m in busy for m in key):
                continue
            if limit is not None and not limit.fits(int(c.rows[i]), int(c.cols[i])):
                continue
            if rules is not None and rules.joins_involved(key, sf, named):   # (per entry: no pass over the holders)
                continue
            gpus = self._fit(t, sf, bool(c.spread[i]) or not self.consolidate, free)
            if gpus is None or (tally is not None and not tally(key, t, sf)):
                continue
            if limit is not None:
                limit.take(int(c.rows[i]), int(c.cols[i]))
            free[list(gpus)] = False
            left[t] -= sf
            busy.update(key)
            if rules is not None:
                named |= rules.named([key])
            one = len({int(topo.gpu_server[g]) for g in gpus}) == 1
            out.append(Backfilled(key, int(c.rows[i]), int(c.cols[i]), t, sf, gpus, one))
            if self.remember is not None:
                self.remember(key, t, gpus)
            if not left.any():
                break
        return out

    def _fit(self, t: int, sf: int, may_split: bool, free: np.ndarray) -> tuple[int, ...] | None:
        """sf free GPUs of type t: on the fullest server that holds them whole, else (`may_split`)
        over the servers with most room; None when the rules of module docstring say no."""
        topo = self.topo
        servers = topo.type_servers[t]
        counts = np.bincount(topo.gpu_server[free], minlength=len(topo.server_type))[servers]
        fits = np.flatnonzero(counts >= sf)
        if len(fits):
            return topo.free_on(int(servers[fits[np.argmin(counts[fits])]]), free, sf)
        return topo.spread(servers, counts, free, sf) if may_split else None


def waiting_candidates(order: np.ndarray, num_cols: int, rows: list[tuple[int, ...]], row_single: list[int],
                       row_sf: list[int], col_pool: np.ndarray | None, col_spread: np.ndarray, planned: np.ndarray,
                       new_jobs=None, home_col: np.ndarray | None = None) -> Candidates:
    """The entries of `order` (flat row * num_cols + column, best first) none of whose jobs is in
    `planned` (the round's jobs), then each job of `new_jobs` (a JobView) not planned, on every
    type it runs on, fastest first (its column: `home_col[type]`). `row_single[k]`: row k's job
    when it has one, else -1 (the mechanism's own list)."""
    r = order // num_cols
    single = np.asarray(row_single, np.int64)
    lead = single[r] if len(r) else np.zeros(0, np.int64)
    top = max(int(planned.max(initial=-1)), int(lead.max(initial=-1))) + 1
    ran = np.zeros(top + 1, bool)
    ran[planned] = True
    keep = ~ran[lead]                          # lead -1 (a combination) reads the spare last slot: False
    for i in np.flatnonzero(lead < 0).tolist():
        keep[i] = not ran[[m for m in rows[int(r[i])] if m < top]].any()
    idx = np.flatnonzero(keep)
    r, j = r[idx], order[idx] % num_cols
    keys = [rows[k] for k in r.tolist()]
    types = j if col_pool is None else col_pool[j]
    rows_out, cols_out = r.tolist(), j.tolist()
    types_out = types.tolist()
    sfs_out = [row_sf[k] for k in rows_out]
    spread_out = col_spread[j].tolist() if len(j) else []
    if new_jobs is not None and new_jobs.jobs:
        T = np.asarray(new_jobs.throughputs, float)
        done = set(planned.tolist())
        for i, m in enumerate(new_jobs.jobs):
            if m in done:
                continue
            for t in sorted(np.flatnonzero(T[i] > 0).tolist(), key=lambda t: (-T[i, t], t)):
                col = t if home_col is None else int(home_col[t])
                if col < 0:
                    continue
                keys.append((int(m),))
                rows_out.append(-1)
                cols_out.append(col)
                types_out.append(t)
                sfs_out.append(int(new_jobs.sfs[i]))
                spread_out.append(False)
    lead = np.fromiter((k[0] for k in keys), np.int64, len(keys))
    return Candidates(keys, np.asarray(rows_out, np.int64), np.asarray(cols_out, np.int64),
                      np.asarray(types_out, np.int64), np.asarray(sfs_out, np.int64),
                      np.asarray(spread_out, bool), lead)


def no_candidates() -> Candidates:
    """An empty waitlist's candidates (every entry of the allocation runs, no new job waits)."""
    z = np.zeros(0, np.int64)
    return Candidates([], z, z, z, z, np.zeros(0, bool), z)


def remember_in(placer) -> Callable[[tuple[int, ...], int, tuple[int, ...]], None]:
    """`Waitlist.remember` for a Placer: the backfilled entry becomes the last holder of its GPUs
    (whoever held them before, a finished or failed entry, is forgotten there), so that the next
    round renews it in place when it keeps its type (Placer.remember)."""
    return placer.remember
