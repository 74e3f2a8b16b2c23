"""Round policies: every round, which configuration (worker type, GPU count) each job runs on.

An allocation policy (`registry.policy`) states an objective over time fractions and Gavel's
round mechanism turns the allocation into rounds. A *round policy* decides each round itself,
from what changes every round: an adaptive job's goodput (its noise scale grows as it
trains), the service each job attained, where it ran last. It is a function of a
`RoundContext` that returns one column per job (`ctx.columns`; -1: the job waits this round),
which the planner places (consolidated, a job that keeps its column keeps its GPUs):

    @gavel_ng.round_policy("speedup_sum", "maximize the sum of speedups")
    def speedup_sum(ctx):
        return ctx.assign(ctx.speedups)      # at most one column per job, GPUs within capacity

or a list of `Entry` (a job on GPUs it chose itself, e.g. Pollux's per-server search). A policy
with state of its own (attained-service queues, a search's random stream) is a class: it is
built once per run with the policy's options as keyword arguments, and its `decide(ctx)` is
called every round. Such a class also gives `history()` (its state as JSON-able data) and
`restore_history(data)`, so that a scheduler restart keeps that state as it keeps the
planner's (the service each job attained, when each last ran: runtime.rounds).

Who fills the context: the simulator and the scheduler service each give a `RoundSource`
(their jobs and each adaptive job's goodput model); the planner (`gavel_ng.round_planner`)
adds the history it keeps (GPUs held last round, service attained) and the placer.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING, Protocol

import numpy as np

from ...columns import Columns
from ..input.fields import Fields

if TYPE_CHECKING:
    from ...topology import Topology


@dataclass(frozen=True)
class Entry:
    """One job's GPUs this round (global GPU ids of the topology, all of worker type `type`)."""

    job: int
    type: int
    gpus: tuple[int, ...]


@dataclass(frozen=True)
class RoundJobs:
    """What a source knows of some jobs, one entry per job in the order asked."""

    adaptive: np.ndarray        # bool: the job adapts its GPU count and batch (else it runs on scale_factors GPUs)
    scale_factors: np.ndarray   # GPUs a fixed job runs on
    throughputs: np.ndarray     # (jobs, types) a fixed job's steps/s on each type (0: cannot run there)
    arrival: np.ndarray         # seconds, on the clock of the context's `now`
    reallocations: np.ndarray   # times the job changed configuration so far (an adaptive job's restarts)
    restart: np.ndarray | None = None   # seconds a restart costs each job (nan or None: the run's realloc delay)
    restarting: np.ndarray | None = None   # bool: the job is still paying a restart (None: not known)


class RoundSource(Protocol):
    """The jobs' side of a round context: the simulator's job arrays, or the scheduler's state."""

    def round_jobs(self, jobs: list[int]) -> RoundJobs: ...

    def goodput(self, jobs: list[int], worker_type: str, gpus: np.ndarray, servers: np.ndarray) -> np.ndarray:
        """(len(jobs), len(gpus)) best goodput of each adaptive job on `gpus[i]` GPUs of the type over
        `servers[i]` servers, at its progress now (0 where it cannot run, and for fixed jobs)."""


@dataclass
class RoundContext(Fields):
    """What a round policy sees (module docstring). Row i of every array is job `jobs[i]`."""

    _FIELDS_LABEL = "ctx"

    now: float
    jobs: np.ndarray                 # job ids, in arrival order
    columns: Columns                 # worker types, then every (type, GPU count) configuration
    topology: Topology               # servers and GPUs (`gpu_type`, `gpu_server`, `server_gpus`, ...)
    info: RoundJobs                  # adaptive, scale factors, throughputs, arrival, re-allocations
    held: list[tuple[int, ...]]      # GPUs each job held last round (() if it did not run)
    attained: np.ndarray             # GPU-seconds each job has run so far
    executed: np.ndarray             # seconds each job has run so far
    last_end: np.ndarray             # when each job last stopped running (its arrival if it never ran)
    realloc_delay: float             # seconds a job loses when its configuration changes
    rng: np.random.Generator         # the run's random stream (seeded)
    source: RoundSource
    placer: Callable                 # place(rows, columns) -> list[Entry]

    # ----- the jobs ---------------------------------------------------------------------------
    @property
    def adaptive(self) -> np.ndarray:
        return self.info.adaptive

    @property
    def scale_factors(self) -> np.ndarray:
        return self.info.scale_factors

    @property
    def throughputs(self) -> np.ndarray:
        return self.info.throughputs

    @property
    def arrival(self) -> np.ndarray:
        return self.info.arrival

    @property
    def age(self) -> np.ndarray:
        """Seconds since each job arrived."""
        return self.now - self.info.arrival

    @property
    def reallocations(self) -> np.ndarray:
        return self.info.reallocations

    @property
    def capacity(self) -> np.ndarray:
        """GPUs per worker type."""
        return np.asarray(self.topology.capacity, float)

    @cached_property
    def per_server(self) -> np.ndarray:
        """GPUs of each type's largest server (how many servers K GPUs need, packed)."""
        topo = self.topology
        return np.array([max((len(topo.server_gpus[s]) for s in topo.type_servers[t]), default=1)
                         for t in range(len(topo.worker_types))], np.int64)

    def goodput(self, rows, worker_type: str, gpus, servers) -> np.ndarray:
        """Best goodput of the jobs at `rows` (adaptive ones) on each (GPU count, servers) of a type."""
        rows = np.asarray(rows, np.int64)
        g = np.asarray(gpus, np.int64).ravel()
        n = np.broadcast_to(np.asarray(servers, np.int64), g.shape)
        return np.asarray(self.source.goodput(self.jobs[rows].tolist(), worker_type, g, n), float)

    # ----- speedups on the columns -------------------------------------------------------------
    @cached_property
    def need(self) -> np.ndarray:
        """(jobs, columns) GPUs an entry takes: a configuration's count; a fixed job's scale factor on
        a type column (1 for an adaptive job there, where it never runs)."""
        sf = np.where(self.adaptive, 1, self.scale_factors)
        return self.columns.needs(sf)

    @cached_property
    def rates(self) -> np.ndarray:
        """(jobs, columns) progress rate: an adaptive job's goodput on each configuration at its progress
        now, a fixed job's scale factor x steps/s on each type (0: cannot run there)."""
        cols, J = self.columns, len(self.columns.worker_types)
        R = np.zeros((len(self.jobs), cols.num))
        fixed = np.flatnonzero(~self.adaptive)
        R[np.ix_(fixed, np.arange(J))] = self.throughputs[fixed] * self.scale_factors[fixed, None]
        rows = np.flatnonzero(self.adaptive)
        if len(rows):
            for t, w in enumerate(cols.worker_types):
                c = np.flatnonzero((cols.pool == t) & (cols.gpus > 0))
                if len(c):
                    k = cols.gpus[c]
                    R[np.ix_(rows, c)] = self.goodput(rows, w, k, -(-k // self.per_server[t])).reshape(len(rows), -1)
        return R

    @cached_property
    def speedups(self) -> np.ndarray:
        """(jobs, columns) rate over the job's rate on one GPU of its fastest type (`rates`, `to_speedups`)."""
        return to_speedups(self.rates.copy(), self.need, self.columns, self.adaptive, self.scale_factors)

    @cached_property
    def min_speedups(self) -> np.ndarray:
        """(jobs, columns) rates over the job's least productive column that runs, times its smallest GPU
        count (an adaptive job's smallest configuration that runs; a fixed job's scale factor): Sia's
        normalization (§3.2), every running option >= that count. Why not `speedups`: a row's scale is
        the job's weight in a power mean, and the least productive option moves far less with the
        job's progress and the type mix than the best single GPU does (experiments/README.md, issue 29)."""
        R, need = self.rates, self.need
        on = R > 0
        low = np.where(on, R, np.inf).min(axis=1, initial=np.inf)
        nmin = np.where(self.adaptive, np.where(on, need, np.inf).min(axis=1, initial=np.inf), self.scale_factors)
        ok = np.isfinite(low) & np.isfinite(nmin)
        return R * np.where(ok, nmin / np.where(ok, low, 1.0), 0.0)[:, None]

    def with_restart_factor(self, values: np.ndarray) -> np.ndarray:
        """`values` (jobs, columns) with each running job's columns other than its current one times its
        `restart_factor` (a job that ran on a column no longer offered: all of them)."""
        running = np.array([bool(h) for h in self.held], bool)
        if not running.any():
            return values
        other = running[:, None] & (np.arange(self.columns.num)[None, :] != self.current[:, None])
        return np.where(other, values * self.restart_factor()[:, None], values)

    # ----- where jobs ran ------------------------------------------------------------------------
    @cached_property
    def current(self) -> np.ndarray:
        """Column each job ran on last round (-1: it did not run)."""
        cols = self.columns
        out = np.full(len(self.jobs), -1, np.int64)
        for i, g in enumerate(self.held):
            if g:
                kind = (cols.gpus > 0) == bool(self.adaptive[i])   # configurations, or a fixed job's type column
                hit = np.flatnonzero((cols.pool == int(self.topology.gpu_type[g[0]])) & (self.need[i] == len(g))
                                     & kind)
                out[i] = hit[0] if len(hit) else -1
        return out

    @cached_property
    def current_type(self) -> np.ndarray:
        """Worker type each job ran on last round (-1: it did not run)."""
        return np.array([int(self.topology.gpu_type[g[0]]) if g else -1 for g in self.held], np.int64)

    @property
    def restart_delays(self) -> np.ndarray:
        """Seconds a restart costs each job: its own where the source knows it (a measured profile set's
        per-application delay), else the run's `realloc_delay`."""
        own = self.info.restart
        if own is None:
            return np.full(len(self.jobs), float(self.realloc_delay))
        own = np.asarray(own, float)
        return np.where(np.isnan(own), float(self.realloc_delay), own)

    def restart_factor(self, delays: np.ndarray | float | None = None) -> np.ndarray:
        """Pollux's REALLOC_FACTOR per job: (age - restarts x delay) / (age + delay) in [0, 1]: what a
        move is worth to a job that runs now (1 with no delay). `delays`: the restart seconds assumed
        (default: `restart_delays`).

        Jobs that carry their profile set's measured restart delay (the `sia` set, charged as Sia's
        artifact charges it: simulator.restarts) get the factor as the artifact computes it (its
        sia.py): `restarts` counts the restarts after the first start (the artifact's `num_restarts`
        is 0 after it; our `reallocations` count the first start too), and a job younger than its
        delay is not penalized at all. Other jobs keep the formula the modeled runs were made with
        (every start counted), so that their figures stay as they were."""
        age = self.age
        delay = self.restart_delays if delays is None else np.asarray(delays, float)
        den = age + delay
        n = np.asarray(self.reallocations, float)
        own = self.info.restart
        artifact = np.zeros(len(n), bool) if own is None else ~np.isnan(np.asarray(own, float))
        if artifact.any():
            n = np.where(artifact, np.maximum(n - 1.0, 0.0), n)
        with np.errstate(divide="ignore", invalid="ignore"):
            f = (age - n * delay) / den
        f = np.where(artifact & (age < delay), 1.0, f)
        return np.where(den > 0, np.clip(f, 0.0, 1.0), 1.0)

    @cached_property
    def pinned(self) -> np.ndarray:
        """(jobs,) bool: jobs still paying a restart, which keep their configuration this round (Sia's
        artifact never re-allocates a job during its checkpoint-restore: its sia.py holds such a job's
        previous configuration as a constraint). Known where the source reports restarts (the simulator
        under a profile set with measured restart delays); elsewhere none."""
        r = self.info.restarting
        if r is None:
            return np.zeros(len(self.jobs), bool)
        return np.asarray(r, bool) & (self.current >= 0)

    def around_pinned(self, solve: Callable[[np.ndarray, np.ndarray], np.ndarray]) -> np.ndarray:
        """One column per job (-1: none): `pinned` jobs on their current column, the others as
        `solve(rows, capacity)` chooses for those rows with the GPUs the pinned leave."""
        pin = self.pinned
        if not pin.any():
            return np.asarray(solve(np.arange(len(self.jobs)), self.capacity), np.int64)
        choice = np.full(len(self.jobs), -1, np.int64)
        cols = self.current[pin]
        choice[pin] = cols
        used = np.bincount(self.columns.pool[cols], weights=self.need[pin, cols], minlength=len(self.capacity))
        rest = np.flatnonzero(~pin)
        choice[rest] = solve(rest, np.maximum(self.capacity - used, 0.0))
        return choice

    # ----- helpers for deciding ---------------------------------------------------------------------
    def assign(self, values: np.ndarray, keep: np.ndarray | None = None) -> np.ndarray:
        """At most one column per job maximizing the sum of `values[i, c]` (0/1 program, HiGHS), each type's
        GPUs within capacity; only positive values on columns the job can run on count. -1: no column.
        `pinned` jobs keep their column."""
        from .configurations import assign

        V = np.asarray(values, float)
        ok = (self.speedups > 0) & (self.need <= self.capacity[self.columns.pool][None, :])
        keep = ok if keep is None else ok & keep
        return self.around_pinned(lambda rows, cap: assign(V[rows], self.need[rows], keep[rows], self.columns.pool,
                                                           cap))

    def place(self, rows, columns) -> list[Entry]:
        """Entries for these (row, column) choices, placed in the order given (consolidated; a job that
        keeps its type and GPU count keeps its GPUs). A choice that fits nowhere is left out."""
        return self.placer(np.asarray(rows, np.int64), np.asarray(columns, np.int64))


def to_speedups(S: np.ndarray, need: np.ndarray, cols: Columns, adaptive: np.ndarray, sf: np.ndarray) -> np.ndarray:
    """Rates on every column over the job's rate on one GPU of its fastest type (in place): an adaptive
    job's best one-GPU goodput; a fixed job's best steps/s; a job that cannot run on one GPU, its best
    rate per GPU."""
    J = len(cols.worker_types)
    base = np.where(adaptive, np.where(cols.gpus[None, :] == 1, S, 0.0).max(axis=1, initial=0.0),
                    S[:, :J].max(axis=1, initial=0.0) / np.maximum(sf, 1))
    base = np.where(base > 0, base, (S / need).max(axis=1, initial=0.0))
    S /= np.where(base > 0, base, np.inf)[:, None]
    return S
