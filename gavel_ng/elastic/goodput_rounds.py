"""`goodput`: every round, one whole (worker type, GPU count) configuration per job (Sia-like).

Why per round and whole: Gavel's mechanism turns an allocation of time fractions into
rounds, so an elastic job rotates between configurations (each change costs the 30 s
re-allocation delay), waits for the next round boundary after it arrives, and its
speedups are those of the last arrival or completion while its noise scale grows. On
Pollux's workload under 360 s rounds that cost `goodput_lp` a job's arrival-to-start wait
of about half a round and 2.2 re-allocations per job (experiments/README.md). Sia
(SOSP'23) instead re-solves every scheduling interval at current progress and gives each
job one configuration; so does this policy:

    choose at most one column c per job m (0/1), GPUs of each type within capacity,
    maximizing the power mean (p = -1 by default, Pollux's) of the jobs' speedups,

where the speedup is the job's goodput on c at its current progress over its goodput on
one GPU of its fastest type (`simulate.speedup_entries`; fixed jobs take their scale
factor on a type, as in `goodput_lp`). With one column per job the p-mean is a sum over
the chosen pairs (`policy.config_values`), so the 0/1 program is exact, and its LP
relaxation is nearly integral (`policy.solve_configurations`).

**Restart factor** (Sia, as Pollux): for a job that ran last round, every column other
than its current one has its speedup times ``(T - R delta) / (T + delta)`` (age T, R
re-allocations so far, delta the re-allocation delay), so a job moves only when moving
pays. A job keeps its GPUs while its configuration stays (`mechanism.Placer`).

`goodput_agnostic` is the type-blind twin: it sees each (job, GPU count) averaged over the
types, solves with one pool of GPUs and puts each job on a type it does not choose for
speed (`policy.solve_configurations`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from gavel_ng.mechanism import Placer
from gavel_ng.topology import Topology

from .execution import DEFAULT_GPU_COUNTS, speedup_entries
from .policy import DEFAULT_P, ElasticColumns, config_values, solve_configurations
from .pollux import realloc_factor
from .rounds import Entry, RoundPolicy

if TYPE_CHECKING:
    from .execution import ElasticExecutor, ElasticState


class GoodputRounds(RoundPolicy):
    """The per-round `goodput` policy (module docstring)."""

    def __init__(self, state: ElasticState, topology: Topology, executor: ElasticExecutor, seed: int = 0,
                 p: float = DEFAULT_P, agnostic: bool = False, gpu_counts: tuple[int, ...] | None = None,
                 restart_factor: bool = True):
        super().__init__(state, topology, executor, seed)
        config_values(np.ones((1, 1)), p)   # validates p
        self.p = float(p)
        self.agnostic = agnostic
        self.restart = bool(restart_factor)
        self.gpu_counts = tuple(gpu_counts or DEFAULT_GPU_COUNTS)
        self.delta = executor.delay
        self.network = executor.network
        self.set_topology(topology)

    def set_topology(self, topology: Topology, gpu_remap: np.ndarray | None = None) -> None:
        """Columns, capacity, server sizes and placer of these GPUs. A live cluster's change gives
        `gpu_remap` (old GPU id -> new, -1 gone): jobs whose GPUs all remain keep them."""
        if gpu_remap is not None:
            remap = np.asarray(gpu_remap, np.int64)
            self.last = {m: tuple(remap[list(g)].tolist()) for m, g in self.last.items() if (remap[list(g)] >= 0).all()}
            self.placer.set_topology(topology, remap)
        else:
            self.placer = Placer(topology, consolidate=True)
        self.topo = topology
        self.names = list(topology.worker_types)
        self.capacity = np.asarray(topology.capacity, float)
        self.columns = ElasticColumns.build(self.names, self.capacity, self.gpu_counts)
        self.per_server = np.array([max((len(topology.server_gpus[s]) for s in topology.type_servers[t]), default=0)
                                    for t in range(len(self.names))], np.int64)

    # ----- what the simulator knows of its jobs (the runtime's subclass knows it otherwise) -----
    def entries(self, jobs: list[int]) -> tuple[np.ndarray, np.ndarray]:
        """(speedups, GPUs) of these jobs on every column."""
        return speedup_entries(self.state, jobs, self.columns, self.names, self.per_server, self.network)

    def history(self, jobs: np.ndarray, now: float) -> tuple[np.ndarray, np.ndarray]:
        """(age in seconds, re-allocations so far) per job: the restart factor's inputs."""
        return now - self.state.arrival[jobs], self.state.reallocations[jobs]

    def is_adaptive(self, job: int) -> bool:
        return bool(self.state.adaptive[job])

    def decide(self, now: float) -> list[Entry]:
        cols = self.columns
        jobs = np.fromiter(self.active, np.int64, len(self.active))
        S, need = self.entries(jobs.tolist())
        current, prev_type = self._current(jobs, need)
        running = current >= 0
        if self.restart and running.any():
            f = realloc_factor(*self.history(jobs, now), self.delta)
            stay = np.zeros_like(S, bool)
            stay[np.flatnonzero(running), current[running]] = True
            S = np.where(running[:, None] & ~stay, S * f[:, None], S)
        choice = solve_configurations(S, need, cols, self.capacity, self.p, self.agnostic, prev_type)
        on = np.flatnonzero(choice >= 0)
        if not len(on):
            return []
        types = cols.pool[choice[on]].tolist()
        ks = need[on, choice[on]].astype(np.int64).tolist()
        placed = self.placer.place([(int(m),) for m in jobs[on]], types, ks)
        return [Entry(int(m), t, tuple(g)) for m, t, g in zip(jobs[on], types, placed.gpus) if g is not None]

    def _current(self, jobs: np.ndarray, need: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Column each job ran on last round (-1: it did not run) and its type there (-1)."""
        cols = self.columns
        cur = np.full(len(jobs), -1, np.int64)
        typ = np.full(len(jobs), -1, np.int64)
        for i, m in enumerate(jobs.tolist()):
            g = self.last.get(m)
            if not g:
                continue
            t = int(self.topo.gpu_type[g[0]])
            typ[i] = t
            kind = (cols.gpus > 0) == self.is_adaptive(m)   # configurations, or a fixed job's plain column
            hit = np.flatnonzero((cols.pool == t) & (need[i] == len(g)) & kind)
            cur[i] = hit[0] if len(hit) else -1
        return cur, typ
