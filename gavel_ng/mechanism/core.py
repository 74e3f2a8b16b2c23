"""The round mechanism: from an allocation to the entries that run this round, placed.

It keeps, per allocation row and worker type, the time received since the last reset,
and knows nothing of how allocations are computed or how rounds are executed: the same
object serves the simulator and a real-cluster runtime. A runtime whose workers come and
go moves it onto the new GPUs (`set_topology`) and saves and restores its memory
(`ledger`, `restore_ledger`) across restarts.

Constraints the policy added come with the allocation (`AllocationRows.limits`): every step
here that hands out GPUs keeps their packing rows as it keeps capacity, and `record` measures
them all on the rounds as they ran (`meter`; gavel_ng.mechanism.limits).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from itertools import repeat
from operator import itemgetter

import numpy as np

from ..columns import Columns
from ..topology import Topology
from .backfill import Waitlist, no_candidates, remember_in, waiting_candidates
from .limits import Limits, Meter, round_shares
from .placement import Placer
from .priorities import eligible_rank, per_type_order, priorities
from .refill import Entries, place_with_refill
from .selection import greedy_columns, greedy_ones, place_new_jobs


@dataclass(frozen=True)
class MechanismConfig:
    """Defaults follow the paper; the prototype's choices are `gavel_compat()`."""

    initial_received: float = 0.0          # seconds each entry and type total restart from at a reset
    never_served_factor: float | None = None   # None: unserved entries rank first outright
    type_order: tuple[str, ...] | None = None  # per-type greedy in this order (prototype); None: global
    random_type_order: bool = False        # per-type greedy in a random order each round
    backfill_new_jobs: bool = True         # jobs unknown to the allocation use free GPUs
    carry_over: float = 1.0                # share of received time a persisting row keeps at a reset
    decay: float = 0.9                     # received time is multiplied by this every round (~10-round memory)
    consolidate: bool = True               # multi-GPU entries on one server when one can be had (placement.py)
    idle_aware: bool = False               # priorities from wall-clock time received (see plan())
    mid_round_backfill: bool = True        # GPUs freed mid-round go to waiting entries (mechanism.backfill)
    # Sia's artifact's Gavel (PRESETS["sia_gavel"]): each type's total never resets or decays, and each new row
    # adds initial_received to it; entries the allocation gives nothing (X = 0) take the GPUs left over, by
    # type then row; equal priorities go to the lower type first; fresh entries take free GPUs in id order
    cumulative_totals: bool = False
    fill_unallocated: bool = False
    ties_by_type: bool = False
    sequential_placement: bool = False
    seed: int = 0
    round_seconds: float | None = None     # a round's length, for measuring the policy's constraints per round
                                           # (None: the longest an entry held its GPUs that round)

    @classmethod
    def gavel_compat(cls, agnostic: bool, seed: int = 0) -> MechanismConfig:
        return cls(initial_received=180.0, never_served_factor=1e9, type_order=("v100", "p100", "k80"),
                   random_type_order=agnostic, backfill_new_jobs=False, carry_over=0.0, decay=1.0,
                   consolidate=False, mid_round_backfill=False, seed=seed)

    @classmethod
    def since_reset(cls, seed: int = 0) -> MechanismConfig:
        """The paper's literal ledger: everything restarts from zero at each reset event."""
        return cls(carry_over=0.0, decay=1.0, seed=seed)

    def for_policy(self, spec) -> MechanismConfig:
        """This config as the policy `spec` (a registry PolicySpec) needs it: one declared
        `idle_aware` (cost policies leave GPUs idle on purpose) gets wall-clock priorities, so that
        the types it paid for are what its jobs run on; one that declares a `mechanism` preset
        (a baseline run under another mechanism, PRESETS) gets it. The simulator and the runtime
        both call it."""
        cfg = self
        preset = getattr(spec, "mechanism", None)
        if preset is not None:
            if preset not in PRESETS:
                raise ValueError(f"policy {spec.name}: unknown mechanism preset {preset!r} "
                                 f"(known: {', '.join(sorted(PRESETS))})")
            cfg = replace(cfg, **PRESETS[preset])
        return replace(cfg, idle_aware=True) if getattr(spec, "idle_aware", False) else cfg


# Round mechanisms other than Gavel's, which a policy may declare it was meant for (registry.policy(mechanism=)).
# "sia_gavel": the Gavel of Sia's artifact (sia-simulator/gavel.py, read for its facts; docs/elastic.md): every
# (job, type) starts at half a round received and so does each type's total, per job; neither is ever reset or
# decayed; all entries are ranked together by priority, then allocation, equal ones in type order; after the
# entries with an allocation, those without one take what is left (work conserving); placement keeps a job on
# its GPUs when no wider job took one of them, and gives the others the type's free GPUs in order; no
# consolidation and no mid-round backfill.
PRESETS: dict[str, dict] = {
    "sia_gavel": dict(initial_received=180.0, never_served_factor=1e9, type_order=None, random_type_order=False,
                      backfill_new_jobs=False, carry_over=1.0, decay=1.0, consolidate=False, idle_aware=False,
                      mid_round_backfill=False, cumulative_totals=True, fill_unallocated=True, ties_by_type=True,
                      sequential_placement=True),
}


@dataclass
class AllocationRows:
    """An allocation in the mechanism's terms: rows of job indices (a job, or a combination)."""

    rows: list[tuple[int, ...]]
    X: np.ndarray          # (K, J) time fractions
    row_sf: np.ndarray     # (K,) GPUs a row needs
    limits: Limits | None = None   # the policy's own constraints over these entries (mechanism.limits)
    runnable: np.ndarray | None = None   # (K, J) the row can run there (throughput > 0); None: wherever it fits


@dataclass
class Ledger:
    """The mechanism's memory of who got what: seconds each allocation row received per column
    (decayed as configured), and each column's total where the config keeps one. A runtime saves it
    so that a restarted scheduler keeps its fairness history."""

    rows: list[tuple[int, ...]]
    received: np.ndarray                # (K, J)
    totals: np.ndarray | None = None    # (J,)
    elapsed: float = 0.0                # wall-clock seconds, decayed alike (what idle-aware priorities divide by)

    def without_jobs(self, jobs) -> Ledger:
        """The rows none of whose jobs is in `jobs` (e.g. finished ones)."""
        gone = set(jobs)
        keep = [k for k, r in enumerate(self.rows) if not gone.intersection(r)]
        return Ledger([self.rows[k] for k in keep], np.asarray(self.received, dtype=float)[keep], self.totals,
                      self.elapsed)


@dataclass
class RoundPlan:
    """What runs this round. Entry e runs jobs keys[e] on gpus[e] of type types[e] (a
    topology type), as allocation column cols[e] (when columns are not the types)."""

    keys: list[tuple[int, ...]]
    rows: np.ndarray            # (E,) allocation row, -1 for a backfilled job
    types: np.ndarray           # (E,)
    sfs: np.ndarray             # (E,)
    gpus: list[tuple[int, ...]]   # global GPU ids of each entry
    renewed: np.ndarray         # (E,) bool
    consolidated: np.ndarray    # (E,) bool
    member_job: np.ndarray      # (F,) every job that runs, flattened
    member_entry: np.ndarray    # (F,) its entry
    share: np.ndarray | None = None   # (E, J) time fractions, only for fluid (ideal) plans
    cols: np.ndarray | None = None    # (E,) allocation column of each entry; None: the same as types
    waiting: Waitlist | None = None   # the entries that wait this round, for mid-round backfill (None: off)
    # (E,) each entry's cell row * J + column in the mechanism's ledger, where every entry is an allocation
    # row (its one-GPU path sets it, so that record() credits in one flat index); None: from rows and cols
    cells: np.ndarray | None = None

    @property
    def num_entries(self) -> int:
        return len(self.keys)


@dataclass
class JobView:
    """What the mechanism needs about jobs the allocation does not cover yet."""

    jobs: list[int] = field(default_factory=list)
    sfs: list[int] = field(default_factory=list)
    throughputs: np.ndarray = field(default_factory=lambda: np.zeros((0, 0)))  # (len(jobs), J)


class RoundMechanism:
    """`columns` (gavel_ng.columns; None: the topology's worker types) are the allocation's columns:
    column j draws on the GPUs of type `columns.pool[j]` (a placement-sensitive allocation has
    `TYPE` and `TYPE_unconsolidated` columns on the same GPUs), and `columns.spread[j]` says
    that an entry of column j may be spread over servers. Entries of the other columns
    are placed on one server when any has room, and run split (at whatever the executor
    charges for that) only when none has. `rules`: the placer's server rules (labels, affinity,
    quotas; gavel_ng.rules.placement.ServerRules), None: none."""

    def __init__(self, topology: Topology, config: MechanismConfig | None = None, columns: Columns | None = None,
                 rules=None):
        self.cfg = config or MechanismConfig()
        T = len(topology.worker_types)
        if columns is not None and columns.gpus.any():
            raise ValueError("RoundMechanism: columns of a configuration's GPU count are a round planner's "
                             "(gavel_ng.round_planner), not the mechanism's")
        if columns is None or columns.plain:
            self.col_pool = None
            self.J = T
            self.col_spread = np.zeros(T, bool)
        else:
            self.col_pool = np.asarray(columns.pool, dtype=np.int64)
            self.J = len(self.col_pool)
            self.col_spread = np.asarray(columns.spread, bool)
            if self.J and self.col_pool.max() >= T:
                raise ValueError("columns must give every column a worker type of the topology")
        self._use_topology(topology)
        self.placer = Placer(topology, self.cfg.consolidate, self.cfg.sequential_placement, rules)
        self.rng = np.random.default_rng(self.cfg.seed)
        self._fresh_row = np.full((1, self.J), self.cfg.initial_received)   # a new row's time received
        self._row_of_job = np.full(64, -1, np.int64)   # per job id, its row while every row is one job
        self._no_waiting: Waitlist | None = None   # the waitlist of rounds where nothing waits
        self.meter = Meter()   # the policy's constraints measured on every round as it ran
        self.reset(AllocationRows([], np.zeros((0, self.J)), np.zeros(0)))

    @property
    def backfills(self) -> bool:
        """Whether GPUs freed mid-round go to the plan's waiting entries (the plan carries a waitlist)."""
        return self.cfg.mid_round_backfill

    def _use_topology(self, topology: Topology) -> None:
        """Everything the mechanism derives from the topology rather than from its ledger."""
        T = len(topology.worker_types)
        pool = np.arange(T) if self.col_pool is None else self.col_pool
        self.topo = topology
        # the column a job the allocation does not know (backfill) is credited to: its type's first
        # non-spread column
        self._home_col = np.array([int(np.flatnonzero((pool == t) & ~self.col_spread)[0])
                                   if ((pool == t) & ~self.col_spread).any() else -1 for t in range(T)])
        self._col_cap = topology.capacity[pool]
        self._cap_min = int(self._col_cap.min()) if len(self._col_cap) else None
        self._capacity = topology.capacity.astype(np.int64).tolist()
        # a plan of one-GPU entries has at most one entry per GPU: its constant columns (one GPU each,
        # consolidated, entry e is member e) are read-only views of these
        G = topology.num_gpus
        self._ones_g = _frozen(np.ones(G, dtype=np.int64))
        self._true_g = _frozen(np.ones(G, dtype=bool))
        self._arange_g = _frozen(np.arange(G, dtype=np.int64))
        names = list(topology.worker_types)
        if self.cfg.type_order is not None:
            first = [names.index(w) for w in self.cfg.type_order if w in names]
            self._type_order = self._cols_of_types(first + [j for j in range(T) if j not in first])

    def set_topology(self, topology: Topology, gpu_remap) -> None:
        """Workers joined or left (same worker types, new GPU numbering). The ledger (rows, time
        received, retired jobs) and the allocation stay; `gpu_remap[g]` is old GPU g's new number or
        -1 where it is gone: last round's placements move with their GPUs, and those that lost one are
        forgotten (placed afresh, no renewal). Capacities, hence which rows fit, follow the new GPUs."""
        if list(topology.worker_types) != list(self.topo.worker_types):
            raise ValueError(f"set_topology: worker types {list(topology.worker_types)} differ from "
                             f"{list(self.topo.worker_types)}; build a new mechanism instead")
        remap = np.asarray(gpu_remap, dtype=np.int64).reshape(-1)
        if len(remap) != self.topo.num_gpus:
            raise ValueError(f"set_topology: gpu_remap has {len(remap)} entries for {self.topo.num_gpus} GPUs")
        kept = remap[remap >= 0]
        if len(kept) and (kept.max() >= topology.num_gpus or len(np.unique(kept)) != len(kept)):
            raise ValueError("set_topology: gpu_remap must map old GPUs to distinct GPUs of the new topology")
        self._use_topology(topology)
        self.placer.set_topology(topology, remap)
        self._fits = self._rows_fit()
        self._entries = None

    def _cols_of_types(self, types: list[int]) -> list[int]:
        """Columns in the order of their types (a type's columns in column order)."""
        if self.col_pool is None:
            return list(types)
        return [int(c) for t in types for c in np.flatnonzero(self.col_pool == t)]

    # ----- allocation epochs -------------------------------------------------------------
    def reset(self, alloc: AllocationRows) -> None:
        """A new allocation. Time received restarts from `initial_received`; a row that persists
        keeps `carry_over` of what it had (by default all of it, decayed every round: see
        MechanismConfig; `since_reset()` is the paper's literal restart)."""
        cfg = self.cfg
        rows = alloc.rows
        K = len(rows)
        old_rows = getattr(self, "rows", None)
        carry = cfg.carry_over > 0 and bool(old_rows)
        old_jobs = self._single_np if old_rows is not None and self._all_single else None
        before = self.received if carry else None
        # (after each solve: a few passes over the rows in C rather than one in Python)
        self.rows = list(rows) if _TUPLE.issuperset(map(type, rows)) else \
            [r if type(r) is tuple else tuple(int(m) for m in r) for r in rows]
        rows = self.rows
        self._all_single = not K or set(map(len, rows)) == _ONE
        if self._all_single:
            self._single_np = np.fromiter(map(itemgetter(0), rows), np.int64, K)
            self._single = self._single_np.tolist()
        else:
            self._single = [r[0] if len(r) == 1 else -1 for r in rows]
            self._single_np = np.array(self._single, dtype=np.int64)
        if carry:   # each new row's old row, -1 where it is new
            if old_jobs is not None and self._all_single:
                was = self._job_row(self._single_np)
            else:
                index = dict(zip(old_rows, range(len(old_rows))))
                was = np.fromiter(map(index.get, rows, repeat(-1)), np.int64, K)
        if old_jobs is not None:   # the job -> row index follows the rows (while all are single jobs)
            self._row_of_job[old_jobs] = -1
        if self._all_single:
            self._job_row(self._single_np)   # (room for the new jobs)
            self._row_of_job[self._single_np] = np.arange(K)
        self.X = np.asarray(alloc.X, dtype=float).reshape(K, self.J)
        limits = alloc.limits
        if limits is not None and limits.A.shape[1] != K * self.J:
            raise ValueError(f"reset: the allocation's limits are over {limits.A.shape[1]} entries, not {K * self.J}")
        self.limits = limits
        self._packing = limits is not None and limits.keeps_per_round   # rounds check entries against them
        self.row_sf = np.asarray(alloc.row_sf, dtype=np.int64)
        self._row_sf_list = self.row_sf.tolist()
        sfs = set(self._row_sf_list)
        self._smallest = min(sfs) if sfs else 1
        self._largest = max(sfs) if sfs else 1
        # every row one job on one GPU, columns the types: plan() takes _plan_ones
        self._plain_ones = self._all_single and self._largest == 1 and self.col_pool is None \
            and cfg.type_order is None and not cfg.random_type_order and not cfg.fill_unallocated
        self._runnable = None if alloc.runnable is None else np.asarray(alloc.runnable, bool).reshape(K, self.J)
        if carry:
            if cfg.carry_over == 1.0:   # a new row (-1) takes the fresh row appended to the old ones
                self.received = np.concatenate((before, self._fresh_row)).take(was, axis=0)
            else:
                self.received = cfg.carry_over * before.take(was, axis=0)
                self.received[was < 0] = cfg.initial_received
        else:
            self.received = np.full((K, self.J), cfg.initial_received)
        if cfg.cumulative_totals:   # every new row adds its initial time; nothing is taken back
            kept = getattr(self, "totals", None)
            new_rows = int(np.count_nonzero(was < 0)) if carry else K
            self.totals = (np.zeros(self.J) if kept is None else kept) + cfg.initial_received * new_rows
        else:
            self.totals = np.full(self.J, cfg.initial_received) if cfg.initial_received else None
        # seconds of wall-clock time since the ledger began, decayed and carried over like `received`
        self.elapsed = cfg.carry_over * getattr(self, "elapsed", 0.0) if carry else 0.0
        self._dead = np.zeros(K, dtype=bool)   # rows retired since
        self._retired = 0   # rows no longer alive
        self.rows_of_job = None   # every row one job: a job's row is _row_of_job[job]
        if not self._all_single:
            self.rows_of_job = {}
            for k, r in enumerate(rows):
                for m in r:
                    self.rows_of_job.setdefault(m, []).append(k)
        self._fits = self._rows_fit()
        self._entries = None

    def _rows_fit(self) -> np.ndarray | None:
        """(K, J): row k's GPUs fit column j's capacity; None where every row fits everywhere."""
        if self._cap_min is None or self._largest <= self._cap_min:
            return None
        return self.row_sf[:, None] <= self._col_cap[None, :]

    def _job_rows(self, job: int) -> list[int]:
        """The rows of `job` still alive."""
        if self.rows_of_job is not None:
            return self.rows_of_job.get(job, [])
        k = int(self._job_row(np.array([job]))[0])
        return [k] if k >= 0 and not self._dead[k] else []

    def _job_row(self, jobs: np.ndarray) -> np.ndarray:
        """Each job's row while every row is one job (-1: none); the index grows to take `jobs` (job
        ids are >= 0, as everywhere in the mechanism)."""
        try:
            return self._row_of_job[jobs]
        except IndexError:
            n = len(self._row_of_job)
            more = np.full(max(2 * n, int(jobs.max()) + 1) - n, -1, np.int64)
            self._row_of_job = np.concatenate((self._row_of_job, more))
            return self._row_of_job[jobs]

    @property
    def alive(self) -> np.ndarray:
        """(K,) bool: the rows not retired since the last reset (a copy)."""
        return ~self._dead

    def knows(self, job: int) -> bool:
        return bool(self._job_rows(job))

    def retire(self, job: int) -> None:
        """A finished job: its rows (alone or in combinations) run no more."""
        for k in self._job_rows(job):
            self._dead[k] = True
            self._retired += 1
            self._entries = None
        if self.rows_of_job is not None:
            self.rows_of_job.pop(job, None)

    # ----- the ledger, for a runtime to save and restore -----------------------------------------
    def ledger(self) -> Ledger:
        """A copy of the time received by the rows still alive (retired jobs' rows carry nothing)."""
        keep = np.flatnonzero(self.alive)
        return Ledger([self.rows[k] for k in keep], self.received[keep].copy(),
                      None if self.totals is None else self.totals.copy(), self.elapsed)

    def restore_ledger(self, ledger: Ledger) -> None:
        """Take a saved ledger (e.g. after a restart). Its rows have no allocation yet, so nothing of
        them runs until the next reset(), which carries their time received over as usual."""
        K = len(ledger.rows)
        received = np.asarray(ledger.received, dtype=float)
        if received.shape != (K, self.J):
            raise ValueError(f"restore_ledger: received has shape {received.shape}, expected {(K, self.J)}")
        self.reset(AllocationRows(list(ledger.rows), np.zeros((K, self.J)), np.ones(K)))
        self.received = received.copy()
        if ledger.totals is not None and self.totals is not None:
            self.totals = np.asarray(ledger.totals, dtype=float).reshape(self.J).copy()
        self.elapsed = float(ledger.elapsed)

    # ----- one round ----------------------------------------------------------------------
    def plan(self, new_jobs: JobView | None = None) -> RoundPlan:
        """The entries to run this round, placed.

        Priority is X / f. Gavel §5 takes f as a row's share of the time its type handed out to
        all rows; a type with idle GPUs hands out less than it has, so its shares look large, and a
        job split over it and a busy type drifts to the busy one (a cost policy's 0.9 V100 + 0.1
        P100, with V100s idle, ran half on each). With `idle_aware` f is what X is, the row's
        fraction of wall-clock time on the type (the paper's Figure 5, X / rounds received). While
        every type of equal size is busy the two rank entries alike. It is not the default: with
        LAS at low load the drift helps (jobs 250-500 at 2 jobs/h: 18.8 h, 21.3 h idle-aware, the
        ideal allocation 20.8 h), and the paper's results are measured with §5's rule. The
        simulator turns it on for policies that leave GPUs idle on purpose (cost policies,
        declared with `@policy(..., idle_aware=True)`), whose allocation is what they promise."""
        cfg = self.cfg
        totals = self.totals
        if cfg.idle_aware and self.elapsed > 0:
            totals = np.full(self.J, self.elapsed)
        if self._entries is None:   # what can run changes only at reset, retire and set_topology
            eligible = self.X > 1e-9
            if self._retired:
                eligible &= ~self._dead[:, None]
            if self._fits is not None:
                eligible &= self._fits
            flat = eligible.reshape(-1).nonzero()[0]
            if cfg.ties_by_type:   # (column, row) order: equal entries go to the lower type first
                flat = flat.take(np.lexsort(np.divmod(flat, self.J)))
            neg_x = -self.X.take(flat)
            rows = np.count_nonzero(np.logical_or.reduce(eligible, axis=1))   # rows with an eligible entry
            # the entries by -X, then flat index (stable): eligible_rank's one-sort order (by_x)
            by_x = neg_x.argsort(kind="stable")
            flat, neg_x = flat.take(by_x), neg_x.take(by_x)
            row_flat, col_flat = np.divmod(flat, self.J)
            # (eligible, flat, column, row, -X, number of rows with an eligible entry, the X = 0 entries after)
            self._entries = (eligible, flat, col_flat, row_flat, neg_x, rows,
                             self._unallocated(eligible) if cfg.fill_unallocated else None)
        eligible, flat, col_flat, row_flat, neg_x, self._eligible_rows, rest = self._entries
        if cfg.type_order is None and not cfg.random_type_order:   # global order: eligible entries only
            received = self.received
            total = np.add.reduce(received, 0) if totals is None else totals   # (received.sum(axis=0))
            rank = eligible_rank(None, neg_x, received.take(flat), total.take(col_flat), cfg.never_served_factor,
                                 min(total.tolist()) > 0, by_x=True)
            if self._plain_ones and self.placer.rules is None and not self._packing and not (
                    cfg.backfill_new_jobs and new_jobs is not None and new_jobs.jobs):
                return self._plan_ones(flat, rank, row_flat[rank].tolist(), col_flat[rank].tolist())
            order = flat[rank] if rest is None else np.concatenate((flat[rank], rest))
        else:
            prio, never = priorities(self.X, self.received, totals, cfg.never_served_factor)
            T = len(self.topo.worker_types)
            types = self._cols_of_types(self.rng.permutation(T).tolist()) if cfg.random_type_order \
                else self._type_order
            totals = self.received.sum(axis=0) if self.totals is None else self.totals
            order = per_type_order(self.X, prio, self.received, totals, eligible, types)
        free = list(self._capacity)
        busy: set[int] = set()
        rules = self.placer.rules
        admit = self._quota_tally()
        ent = self._select(order, free, busy, admit, new_jobs, self._limit_tally())
        member = None
        if rules is None:
            placed = self.placer.place(ent.keys, ent.types, ent.sfs, self._spread(ent.cols))
            if self._all_single and (not ent.rows or ent.rows[-1] >= 0):   # (backfilled jobs come last)
                member = self._single_np[ent.rows]
        else:   # entries the rules keep off every server wait, and their GPUs go down the order
            ent, placed = place_with_refill(self.placer, ent, self._spread,
                                            lambda kept, skip, jobs: self._more(order, kept, skip, jobs, new_jobs))
        plan = make_plan(ent.keys, ent.rows, ent.types, ent.sfs, placed.gpus, placed.renewed, placed.consolidated,
                         cols=None if self.col_pool is None else ent.cols, member_job=member)
        if cfg.mid_round_backfill:
            # every row with an entry runs (at low load, most rounds): nothing of the allocation waits
            everyone = rules is None and self._taken == self._eligible_rows
            plan.waiting = self._waitlist(lambda: order, plan, new_jobs, everyone)
        return plan

    def _unallocated(self, eligible: np.ndarray) -> np.ndarray:
        """Flat indices of the entries the allocation gives nothing that could run (alive, fitting, runnable),
        in (column, row) order: what `fill_unallocated` offers the GPUs left after the allocation's entries."""
        rest = ~eligible
        if self._retired:
            rest &= ~self._dead[:, None]
        if self._fits is not None:
            rest &= self._fits
        if self._runnable is not None:
            rest &= self._runnable
        flat = rest.reshape(-1).nonzero()[0]
        return flat.take(np.lexsort(np.divmod(flat, self.J)))

    def _plan_ones(self, flat: np.ndarray, rank: np.ndarray, rows: list[int], cols: list[int]) -> RoundPlan:
        """plan() when every row is one job on one GPU, columns are the types, no rules or quotas
        apply and no new job waits for GPUs (most rounds of a single-GPU trace): the same choices,
        with the members and the renewals found by job (Placer.place_jobs) instead of entry by entry.
        `rows` and `cols` are the eligible entries' rows and columns in the round's order."""
        rows, cols = greedy_ones(rows, cols, list(self._capacity), self._eligible_rows, len(self.rows))
        E = self._taken = len(rows)
        keys = list(map(self.rows.__getitem__, rows))
        idx = np.fromiter(rows, np.int64, E)
        member = self._single_np[idx]
        types = np.fromiter(cols, np.int64, E)
        placed = self.placer.place_jobs(keys, member, cols, types)
        # (E <= number of GPUs: the constant columns are views of the mechanism's read-only arrays)
        plan = RoundPlan(keys, idx, types, self._ones_g[:E], placed.gpus, placed.renewed, placed.consolidated,
                         member, self._arange_g[:E], cells=idx * self.J + types)
        if self.cfg.mid_round_backfill:
            empty = self._no_waiting   # (every row runs: the waitlist of all such rounds, checked in _waitlist)
            if E == self._eligible_rows and empty is not None and empty.topo is self.topo and empty.rules is None:
                plan.waiting = empty
            else:
                plan.waiting = self._waitlist(lambda: flat[rank], plan, None, E == self._eligible_rows)
        return plan

    def _waitlist(self, order, plan: RoundPlan, new_jobs: JobView | None, everyone: bool) -> Waitlist:
        """The round's waiting entries in its order (`order()`), built only if some entry ends early
        (`everyone`: every row runs, so only new jobs can wait, and an empty list serves all rounds).
        Jobs the allocation does not know wait for the next solve while the policy's packing rows
        apply (they have no coefficients in them: mechanism.limits)."""
        new = new_jobs if self.cfg.backfill_new_jobs and new_jobs is not None and new_jobs.jobs \
            and not self._packing else None
        rules = self.placer.rules
        if everyone and new is None:
            empty = self._no_waiting
            if empty is None or empty.topo is not self.topo or empty.rules is not rules:
                empty = self._no_waiting = Waitlist(no_candidates, self.topo, self.cfg.consolidate, rules)
                empty.build()
            return empty
        rows, single, sfs, J = self.rows, self._single, self._row_sf_list, self.J
        pool, spread, home = self.col_pool, self.col_spread, self._home_col
        build = lambda: waiting_candidates(order(), J, rows, single, sfs, pool, spread,   # noqa: E731
                                           plan.member_job, new, home)
        limit = None
        if self._packing:   # the rows and credit of this plan, whenever the waitlist is asked
            limits, credit = self.limits, self.meter.credit(self.limits)
            limit = lambda: limits.tally(credit)   # noqa: E731
        return Waitlist(build, self.topo, self.cfg.consolidate, rules, remember_in(self.placer), limit)

    def arrivals(self, new_jobs: JobView, plan: RoundPlan) -> Waitlist:
        """The waiting entries of jobs that arrived after `plan` was made (in no allocation yet), each on
        the types it runs on, fastest first, as a plan's own waitlist lists new jobs: what the runtime
        offers GPUs that idle mid-round when a job arrives (runtime.backfill). Empty while the policy's
        packing rows apply: such a job has no coefficients in them and waits for the next solve."""
        if self._packing:
            return Waitlist(no_candidates, self.topo, self.cfg.consolidate, self.placer.rules)
        rows, single, sfs, J = self.rows, self._single, self._row_sf_list, self.J
        pool, spread, home = self.col_pool, self.col_spread, self._home_col
        build = lambda: waiting_candidates(np.zeros(0, np.int64), J, rows, single, sfs, pool, spread,   # noqa: E731
                                           plan.member_job, new_jobs, home)
        return Waitlist(build, self.topo, self.cfg.consolidate, self.placer.rules, remember_in(self.placer))

    def _quota_tally(self):
        rules = self.placer.rules
        return rules.quota_tally(list(self.topo.worker_types)) if rules is not None and rules.rules.quotas else None

    def _limit_tally(self):
        """A fresh round's tally of the policy's packing rows (None: it has none), with what earlier
        rounds left unused of them (mechanism.limits: an entry over a row by itself runs on that)."""
        return self.limits.tally(self.meter.credit(self.limits)) if self._packing else None

    def _select(self, order: np.ndarray, free: list[int], busy: set[int], admit, new_jobs: JobView | None,
                limit=None) -> Entries:
        """Greedy selection down `order`, then (when configured) free GPUs to jobs the allocation does
        not know yet (not while the policy's packing rows apply: `limit`, module docstring); `free`,
        `busy` and `limit` are updated in place."""
        rows, cols = greedy_columns(order, self.J, self.rows, self._row_sf_list, free, busy, self._single,
                                    self.col_pool, admit, self._all_single, self._smallest, limit)
        self._taken = len(rows)
        pool = self.col_pool
        sfs = list(map(self._row_sf_list.__getitem__, rows))
        types = list(cols) if pool is None else pool[np.asarray(cols, dtype=np.int64)].tolist()
        ent = Entries(list(map(self.rows.__getitem__, rows)), rows, cols, types, sfs)
        if self.cfg.backfill_new_jobs and new_jobs is not None and new_jobs.jobs and sum(free) > 0 and limit is None:
            for i, t in place_new_jobs(new_jobs.jobs, new_jobs.sfs, new_jobs.throughputs, free, busy, admit):
                ent.add((new_jobs.jobs[i],), -1, t if pool is None else int(self._home_col[t]), t, new_jobs.sfs[i])
        return ent

    def _more(self, order: np.ndarray, kept: Entries, skip: set[tuple[int, int]], skip_jobs: set[int],
              new_jobs: JobView | None) -> Entries:
        """Entries for the GPUs that `kept` leaves, down the same order, without those in `skip`."""
        free = list(self._capacity)
        busy = set(skip_jobs)
        admit = self._quota_tally()
        limit = self._limit_tally()
        for key, r, j, t, sf in zip(kept.keys, kept.rows, kept.cols, kept.types, kept.sfs):
            free[t] -= sf
            busy.update(key)
            if admit is not None:
                admit(key, t, sf)
            if limit is not None and r >= 0:
                limit.take(r, j)
        if sum(free) <= 0:
            return Entries()
        gone = np.fromiter((r * self.J + j for r, j in skip), dtype=np.int64, count=len(skip))
        rest = order[~np.isin(order, gone)] if len(gone) else order
        return self._select(rest, free, busy, admit, new_jobs, limit)

    def _spread(self, cols: list[int]) -> list[bool] | None:
        return None if self.col_pool is None else self.col_spread[np.asarray(cols, dtype=np.int64)].tolist()

    def idle(self, rounds: float) -> None:
        """Nothing ran for `rounds` of a round while jobs of the allocation waited: the policy's rows were
        left unused that long (mechanism.limits.Meter.idle: an entry over a row by itself runs on that)."""
        if self.limits is not None and not self._dead.all():
            self.meter.idle(self.limits, rounds)

    def record(self, plan: RoundPlan, occupied: np.ndarray) -> None:
        """Credit each running (row, type) with the seconds it held its GPUs."""
        decay = self.cfg.decay
        if decay != 1.0:
            self.received *= decay
            self.elapsed *= decay
            if self.totals is not None:
                self.totals *= decay
        occupied = np.asarray(occupied, dtype=float)
        if not len(occupied):
            self.idle(1.0)   # a round with nothing running (jobs waited for it)
            return
        self.elapsed += float(np.maximum.reduce(occupied))   # (occupied.max())
        if plan.share is not None:
            return
        cols = plan.types if plan.cols is None else plan.cols
        if self.limits is not None:   # the policy's constraints on the round as it ran
            held = self.cfg.round_seconds or float(np.maximum.reduce(occupied))
            if held > 0:
                cells = np.where(plan.rows >= 0, plan.rows * self.J + cols, -1)
                self.meter.observe(self.limits, round_shares(self.limits, cells, occupied, held))
        cells = plan.cells
        if cells is not None and len(cells) == len(occupied) and self.received.flags.c_contiguous:
            self.received.reshape(-1)[cells] += occupied   # (a view: the same cells as below, one index)
            if self.totals is not None:
                np.add.at(self.totals, cols, occupied)
            return
        if plan.rows.min() >= 0:   # no backfilled job this round
            r, j, t = plan.rows, cols, occupied
        else:
            mine = plan.rows >= 0
            if not mine.any():
                return
            r, j, t = plan.rows[mine], cols[mine], occupied[mine]
        self.received[r, j] += t
        if self.totals is not None:
            np.add.at(self.totals, j, t)


def _frozen(a: np.ndarray) -> np.ndarray:
    a.flags.writeable = False
    return a


_TUPLE = frozenset((tuple,))
_ONE = frozenset((1,))


def make_plan(keys, rows, types, sfs, gpus, renewed, consolidated, share=None, cols=None,
              member_job: np.ndarray | None = None) -> RoundPlan:
    """`member_job`: each entry's one job, when the caller has it (the mechanism does: most rows
    are single jobs); None: found from `keys`."""
    if member_job is not None:
        member_entry = np.arange(len(keys), dtype=np.int64)
        return RoundPlan(keys, np.asarray(rows, dtype=np.int64), np.asarray(types, dtype=np.int64),
                         np.asarray(sfs, dtype=np.int64), gpus, np.asarray(renewed, dtype=bool),
                         np.asarray(consolidated, dtype=bool), member_job, member_entry, share,
                         None if cols is None else np.asarray(cols, dtype=np.int64))
    sizes = list(map(len, keys))
    if sizes.count(1) == len(sizes):
        member_job = np.fromiter(map(itemgetter(0), keys), dtype=np.int64, count=len(keys))
        member_entry = np.arange(len(keys), dtype=np.int64)
    else:
        member_job = np.fromiter((m for k in keys for m in k), dtype=np.int64, count=sum(sizes))
        member_entry = np.repeat(np.arange(len(keys), dtype=np.int64), sizes)
    return RoundPlan(keys, np.asarray(rows, dtype=np.int64), np.asarray(types, dtype=np.int64),
                     np.asarray(sfs, dtype=np.int64), gpus, np.asarray(renewed, dtype=bool),
                     np.asarray(consolidated, dtype=bool), member_job, member_entry, share,
                     None if cols is None else np.asarray(cols, dtype=np.int64))


def without_entries(plan: RoundPlan, drop: np.ndarray) -> RoundPlan:
    """`plan` without the entries `drop` marks (bool per entry), its waitlist kept: the round as it ran when some
    entries had nothing left to run (a simulator's jobs done after the plan was made)."""
    if plan.share is not None:
        raise ValueError("without_entries: a fluid plan has no entries to leave out")
    keep = np.flatnonzero(~np.asarray(drop, bool))
    sub = make_plan([plan.keys[i] for i in keep], plan.rows[keep], plan.types[keep], plan.sfs[keep],
                    [plan.gpus[i] for i in keep], plan.renewed[keep], plan.consolidated[keep],
                    cols=None if plan.cols is None else plan.cols[keep])
    sub.waiting = plan.waiting
    sub.cells = None if plan.cells is None else plan.cells[keep]
    return sub


def with_backfilled(plan: RoundPlan, entries: list) -> RoundPlan:
    """`plan` with `entries` appended: the round as it ran, which the executor reports back
    (RoundResult.plan) so that the ledger credits the backfilled rows like any other."""
    cols = plan.types if plan.cols is None else plan.cols
    return make_plan(plan.keys + [b.key for b in entries], np.concatenate([plan.rows, [b.row for b in entries]]),
                     np.concatenate([plan.types, [b.type for b in entries]]),
                     np.concatenate([plan.sfs, [b.sf for b in entries]]), plan.gpus + [b.gpus for b in entries],
                     np.concatenate([plan.renewed, np.zeros(len(entries), bool)]),
                     np.concatenate([plan.consolidated, [b.consolidated for b in entries]]),
                     cols=None if plan.cols is None else np.concatenate([cols, [b.col for b in entries]]))
