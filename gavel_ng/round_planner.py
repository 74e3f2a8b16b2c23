"""The SchedulerLoop's planner for a round policy, one for the simulator and the scheduler service.

Each round it builds the policy's `RoundContext` (policies.rounds) from the jobs' source
(the simulator's job arrays or the cluster's state) and the history it keeps itself (the
GPUs each job held last round, the GPU-seconds and seconds each has run, when each last
stopped), asks the policy, places the columns it chose (consolidated; a job that keeps its
type and GPU count keeps its GPUs) and hands the loop a `RoundPlan`. What the executor
reports back (`record`) becomes the next round's history. A live cluster whose workers
come and go moves it onto the new GPUs (`set_topology`).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

import numpy as np

from .columns import Columns
from .errors import PolicyError
from .mechanism import Placer, RoundPlan, make_plan
from .policies.input.fields import call_policy, defined_at
from .policies.rounds import Entry, RoundContext, RoundSource
from .topology import Topology

log = logging.getLogger(__name__)
DEFAULT_GPU_COUNTS = (1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64)


class RoundPlanner:
    """Planner (mechanism.loop) for a round policy's `decide(ctx)` (module docstring).

    `clock()` is the time the context's `now` and `record` read (the executor's). `seed` seeds
    the context's random stream; `gpu_counts` are the configurations' GPU counts, or a function of
    the topology giving each type's (a policy's declared configuration set, `PolicySpec.gpu_counts`);
    `rules` the placer's server rules (gavel_ng.rules.placement.ServerRules; None: none)."""

    slo_dropped = frozenset()   # a round policy states no SLOs to drop

    def __init__(self, name: str, decide: Callable[[RoundContext], object], source: RoundSource,
                 topology: Topology, clock: Callable[[], float], *, realloc_delay: float = 0.0,
                 gpu_counts: tuple[int, ...] | Callable[[Topology], list] = DEFAULT_GPU_COUNTS, seed: int = 0,
                 rules=None):
        self.name = name
        self.decide = decide
        self.source = source
        self.clock = clock
        self.delay = float(realloc_delay)
        self.gpu_counts = gpu_counts if callable(gpu_counts) else tuple(gpu_counts)
        self.rng = np.random.default_rng(seed)
        self.placer = Placer(topology, consolidate=True, rules=rules)
        self.active: dict[int, None] = {}             # arrival order
        self.last: dict[int, tuple[int, ...]] = {}    # job -> GPUs it held in the previous round
        self.attained: dict[int, float] = {}          # job -> GPU-seconds run
        self.executed: dict[int, float] = {}          # job -> seconds run
        self.last_end: dict[int, float] = {}          # job -> when it last stopped running
        self.solves = 0                               # decisions taken (the loop's "solves")
        self.solve_seconds = 0.0                      # CPU seconds they took
        self._use(topology)

    def _use(self, topology: Topology) -> None:
        self.topo = topology
        counts = self.gpu_counts(topology) if callable(self.gpu_counts) else self.gpu_counts
        self.columns = Columns.configurations(list(topology.worker_types), topology.capacity, counts)

    def set_topology(self, topology: Topology, gpu_remap) -> None:
        """GPUs renumbered (workers joined or left): `gpu_remap[g]` is old GPU g's new number, -1 if gone.
        Jobs whose GPUs all remain keep them."""
        remap = np.asarray(gpu_remap, np.int64)
        self.last = {m: tuple(remap[list(g)].tolist()) for m, g in self.last.items() if (remap[list(g)] >= 0).all()}
        self.placer.set_topology(topology, remap)
        self._use(topology)

    # ----- the jobs ------------------------------------------------------------------------------
    def arrive(self, jobs: list[int]) -> None:
        for m in jobs:
            self.active[int(m)] = None

    def retire(self, job: int) -> None:
        for d in (self.active, self.last, self.attained, self.executed, self.last_end):
            d.pop(job, None)

    # ----- what a scheduler restart keeps --------------------------------------------------------------
    def history(self) -> tuple[list[tuple[int, float, float, float | None]], dict | None, dict]:
        """What this planner and its policy know of past rounds, as plain data (runtime.rounds stores it,
        so that a restarted scheduler decides as the stopped one would have): (job, GPU-seconds, seconds
        run, last stop or None) per job; the policy's own state (`history()` of a policy class that keeps
        some, e.g. tiresias's promotions); the random stream's position."""
        jobs = sorted(set(self.attained) | set(self.last_end))
        rows = [(m, self.attained.get(m, 0.0), self.executed.get(m, 0.0), self.last_end.get(m)) for m in jobs]
        owner = getattr(self.decide, "__self__", None)
        state = owner.history() if callable(getattr(owner, "history", None)) else None
        return rows, state, self.rng.bit_generator.state

    def restore_history(self, jobs: list[tuple[int, float, float, float | None]], policy_state: dict | None,
                        rng: dict | None) -> None:
        """Take back what `history()` gave (the caller drops jobs that ended meanwhile)."""
        for m, attained, executed, last_end in jobs:
            self.attained[m], self.executed[m] = float(attained), float(executed)
            if last_end is not None:
                self.last_end[m] = float(last_end)
        owner = getattr(self.decide, "__self__", None)
        if policy_state is not None and callable(getattr(owner, "restore_history", None)):
            owner.restore_history(policy_state)
        if rng is not None:
            try:
                self.rng.bit_generator.state = rng
            except (TypeError, ValueError, KeyError) as exc:
                log.warning("round policy %s: saved random stream not restored (%s): it starts from its seed",
                            self.name, exc)

    # ----- Planner protocol -------------------------------------------------------------------------
    def plan(self, now: float) -> RoundPlan:
        entries = []
        if self.active and self.topo.num_gpus:   # a round with no job to place is no decision
            start = time.perf_counter()
            entries = self._decide(now)
            self.solve_seconds += time.perf_counter() - start
            self.solves += 1
        gpus = [e.gpus for e in entries]
        renewed = [self.last.get(e.job) == e.gpus for e in entries]
        servers = self.topo.gpu_server
        consolidated = [len(set(servers[list(g)].tolist())) == 1 for g in gpus]
        self.last = {e.job: e.gpus for e in entries}
        return make_plan([(e.job,) for e in entries], [-1] * len(entries), [e.type for e in entries],
                         [len(g) for g in gpus], gpus, renewed, consolidated)

    def record(self, plan: RoundPlan, occupied: np.ndarray) -> None:
        """What ran: GPU-seconds and seconds per job, and when it stopped (the executor's clock has moved
        on to the round's end)."""
        if not plan.num_entries:
            return
        now = self.clock()
        for m, k, sec in zip(plan.member_job.tolist(), plan.sfs.tolist(), np.asarray(occupied, float).tolist()):
            self.attained[m] = self.attained.get(m, 0.0) + k * sec
            self.executed[m] = self.executed.get(m, 0.0) + sec
            self.last_end[m] = now

    def summary(self) -> dict:
        """What a run's summary says of the planning: its own decision every round (no allocation, no
        mechanism, no mid-round backfill, no constraints measured)."""
        return {"solver_fallbacks": 0, "policy_solved": self.name, "mode": "round policy", "backfill": False,
                "constraints": {}}

    # ----- deciding ---------------------------------------------------------------------------------
    def context(self, now: float) -> RoundContext:
        jobs = np.fromiter(self.active, np.int64, len(self.active))
        ids = jobs.tolist()
        info = self.source.round_jobs(ids)
        ctx = RoundContext(
            now, jobs, self.columns, self.topo, info, [self.last.get(m, ()) for m in ids],
            np.array([self.attained.get(m, 0.0) for m in ids]), np.array([self.executed.get(m, 0.0) for m in ids]),
            np.array([self.last_end.get(m, a) for m, a in zip(ids, np.asarray(info.arrival, float).tolist())]),
            self.delay, self.rng, self.source, None)
        ctx.placer = lambda rows, cols: self._place(ctx, rows, cols)
        return ctx

    def _decide(self, now: float) -> list[Entry]:
        ctx = self.context(now)
        out = call_policy(self.name, self.decide, ctx)
        if isinstance(out, list) and all(isinstance(e, Entry) for e in out):
            return self._checked(ctx, out)
        choice = np.asarray(out)
        if choice.shape != (len(ctx.jobs),) or not np.issubdtype(choice.dtype, np.integer):
            raise self._error(f"returned {type(out).__name__} {getattr(choice, 'shape', '')}: expected one column "
                              f"index per job ({len(ctx.jobs)} integers, -1: none) or a list of Entry")
        if choice.size and (choice.max() >= self.columns.num or choice.min() < -1):
            bad = int(choice.max()) if choice.max() >= self.columns.num else int(choice.min())
            raise self._error(f"chose column {bad}: there are {self.columns.num} (ctx.columns), -1: none")
        on = np.flatnonzero(choice >= 0)
        return self._place(ctx, on, choice[on])

    def _error(self, text: str) -> PolicyError:
        """What the policy decided is no decision: an error naming it and where it is defined."""
        return PolicyError(self.name, defined_at(self.decide), text)

    def _place(self, ctx: RoundContext, rows, cols) -> list[Entry]:
        rows = np.asarray(rows, np.int64)
        cols = np.asarray(cols, np.int64)
        if not len(rows):
            return []
        types = self.columns.pool[cols].tolist()
        ks = ctx.need[rows, cols].astype(np.int64).tolist()
        asked = np.bincount(types, weights=ks, minlength=len(self.topo.capacity))
        over = np.flatnonzero(asked > self.topo.capacity)
        if len(over):   # the placer could not place it: the policy's choice, not a placement failure
            j = int(over[0])
            raise self._error(f"chose {int(asked[j])} GPUs of {self.topo.worker_types[j]} for one round; there are "
                              f"{int(self.topo.capacity[j])} (ctx.assign keeps each type within capacity)")
        placed = self.placer.place([(int(m),) for m in ctx.jobs[rows].tolist()], types, ks)
        return [Entry(int(m), t, tuple(g)) for m, t, g in zip(ctx.jobs[rows].tolist(), types, placed.gpus)
                if g is not None]

    def _checked(self, ctx: RoundContext, entries: list[Entry]) -> list[Entry]:
        """Entries a policy placed itself: active jobs, once each, on distinct GPUs of one type each."""
        seen_jobs, seen_gpus = set(), set()
        topo = self.topo
        for e in entries:
            gpus = list(e.gpus)
            if e.job not in self.active or e.job in seen_jobs:
                raise self._error(f"entry for job {e.job}, which is not active or repeats")
            if not gpus or min(gpus) < 0 or max(gpus) >= topo.num_gpus or seen_gpus & set(gpus) \
                    or len(set(gpus)) != len(gpus) or (topo.gpu_type[gpus] != e.type).any():
                raise self._error(f"job {e.job} on GPUs {gpus} of type {e.type}: GPUs must be distinct, free this "
                                  f"round and of the entry's type (0..{topo.num_gpus - 1})")
            seen_jobs.add(e.job)
            seen_gpus.update(gpus)
        return entries
