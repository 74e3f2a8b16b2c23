"""What the elastic simulator runs: per-job state and the execution of one round.

`ElasticState` holds every job's progress, configuration and timing; `ElasticExecutor` runs
a round's plan on the simulated clock (fixed jobs at the table's steps/s, adaptive jobs at
their best batch for the configuration they got, the re-allocation delay included; see
simulate.py's module doc). Round policies (rounds.py: Tiresias, Pollux, per-round goodput)
and the LP allocator (simulate.py) all run on these, so every policy pays the same costs.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from gavel_ng.mechanism import JobView, RoundPlan, RoundResult
from gavel_ng.topology import Topology

from .efficiency import progress_after, seconds_to_progress
from .families import get_family
from .goodput import best_goodput, best_goodput_many, throughput_params
from .policy import ElasticColumns
from .workload import POLLUX_NETWORK_GBPS, ElasticTrace

DEFAULT_REALLOC_DELAY = 30.0
DEFAULT_GPU_COUNTS = (1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64)
HOUR = 3600.0


@dataclass
class ElasticState:
    """Per-job state by job id (the whole trace is known up front)."""

    etrace: ElasticTrace
    adaptive: np.ndarray          # bool
    sf: np.ndarray                # fixed jobs' GPU count (tuned)
    T: np.ndarray                 # (M, J) fixed jobs' consolidated steps/s
    Tu: np.ndarray                # (M, J) unconsolidated steps/s (nan: use T)
    progress: np.ndarray          # adaptive: fraction of work done
    remaining: np.ndarray         # fixed: steps left
    finish: np.ndarray
    last_config: dict = field(default_factory=dict)   # job -> (type, gpus) of its previous round
    owed: dict = field(default_factory=dict)          # job -> start-up seconds still to pay (longer than a round)
    reallocations: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    gpu_seconds: np.ndarray = field(default_factory=lambda: np.zeros(0))

    @property
    def arrival(self) -> np.ndarray:
        return self.etrace.trace.arrivals


def speedup_entries(st: ElasticState, jobs: list[int], cols: ElasticColumns, worker_types: list[str],
                    per_server: np.ndarray, network: float) -> tuple[np.ndarray, np.ndarray]:
    """(S, need) of these jobs on every column: speedup at their current progress over one GPU of
    their fastest type (policy.py's module docstring), and the GPUs each entry takes."""
    M, C, J = len(jobs), cols.num, len(worker_types)
    S = np.zeros((M, C))
    need = column_needs(cols, M)
    jobs_a = np.asarray(jobs, np.int64)
    by_spec: dict = {}
    for i, m in enumerate(jobs):
        if st.adaptive[m]:
            by_spec.setdefault(st.etrace.specs[m], []).append(i)
        else:
            S[i, :J] = st.T[m] * st.sf[m]
            need[i, :J] = st.sf[m]
    for spec, rows in by_spec.items():   # one vectorized search per (spec, type): jobs x GPU counts
        rows = np.asarray(rows)
        prog = st.progress[jobs_a[rows]][:, None]
        for t in range(J):
            c = np.flatnonzero((cols.pool == t) & (cols.gpus > 0))
            k = cols.gpus[c][None, :]
            g, _, _ = best_goodput_many(spec, worker_types[t], k, -(-k // per_server[t]), prog, network)
            S[np.ix_(rows, c)] = g
    return to_speedups(S, need, cols, st.adaptive[jobs_a], st.sf[jobs_a]), need


def column_needs(cols: ElasticColumns, jobs: int) -> np.ndarray:
    """(jobs, columns) GPUs an entry takes: a configuration's count; 1 on a type column (a fixed
    job's scale factor is filled in by the caller)."""
    return np.broadcast_to(np.where(cols.gpus > 0, cols.gpus, 1), (jobs, cols.num)).astype(float).copy()


def to_speedups(S: np.ndarray, need: np.ndarray, cols: ElasticColumns, adaptive: np.ndarray,
                sf: np.ndarray) -> np.ndarray:
    """Rates on every column (goodput, or a fixed job's sf x steps/s on its type) over the job's
    rate on one GPU of its fastest type (in place; the simulator's and the runtime's shared scale)."""
    J = len(cols.worker_types)
    base = np.where(adaptive, np.where(cols.gpus[None, :] == 1, S, 0.0).max(axis=1, initial=0.0),
                    S[:, :J].max(axis=1, initial=0.0) / np.maximum(sf, 1))
    # a job that cannot run on one GPU (min_gpus > 1): its best goodput per GPU
    base = np.where(base > 0, base, (S / need).max(axis=1, initial=0.0))
    S /= np.where(base > 0, base, np.inf)[:, None]
    return S


class ElasticExecutor:
    """Simulated clock and per-round execution of fixed and adaptive jobs (module docstring)."""

    def __init__(self, state: ElasticState, topology: Topology, round_seconds: float, realloc_delay: float,
                 preemption_overhead: float = 0.0, network_gbps: float = POLLUX_NETWORK_GBPS):
        self.st = state
        self.topo = topology
        self.L = float(round_seconds)
        self.delay = float(realloc_delay)
        self.overhead = float(preemption_overhead)
        self.network = network_gbps
        self.clock = 0.0
        self.order = np.argsort(state.arrival, kind="stable")
        self.next_pos = 0
        self.unfinished = 0
        self.busy = np.zeros(len(topology.worker_types))
        self.names = list(topology.worker_types)

    def now(self) -> float:
        return self.clock

    def next_arrival(self) -> float | None:
        return None if self.next_pos >= len(self.order) else float(self.st.arrival[self.order[self.next_pos]])

    def admit(self) -> list[int]:
        out = []
        while self.next_pos < len(self.order) and self.st.arrival[self.order[self.next_pos]] <= self.clock:
            out.append(int(self.order[self.next_pos]))
            self.next_pos += 1
        self.unfinished += len(out)
        return out

    def job_view(self, jobs: list[int]) -> JobView:
        """For backfill: adaptive jobs as 1-GPU jobs at their 1-GPU goodput, fixed jobs as they are."""
        st = self.st
        T = np.zeros((len(jobs), len(self.names)))
        sfs = []
        for i, m in enumerate(jobs):
            if st.adaptive[m]:
                sfs.append(1)
                for t, w in enumerate(self.names):
                    T[i, t] = best_goodput(st.etrace.specs[m], w, 1, 1, st.progress[m], self.network)[0]
            else:
                sfs.append(int(st.sf[m]))
                T[i] = st.T[m]
        return JobView(list(jobs), sfs, T)

    def execute(self, plan: RoundPlan) -> RoundResult:
        st, L, now = self.st, self.L, self.clock
        E = plan.num_entries
        if E == 0:
            st.last_config = {}
            nxt = self.next_arrival()
            if self.unfinished == 0 and nxt is not None and nxt > now:
                self.clock = nxt
            else:
                self.clock = now + L
            return RoundResult(np.zeros(0), [])
        if len(plan.member_job) != E:
            raise ValueError("elastic simulation runs one job per entry (no space sharing)")
        occupied = np.zeros(E)
        finished = []
        configs = {}
        for e in range(E):
            m = int(plan.member_job[e])
            t, k = int(plan.types[e]), int(plan.sfs[e])
            gpus = np.asarray(plan.gpus[e], np.int64)
            servers = len(np.unique(self.topo.gpu_server[gpus])) if len(gpus) else 1
            configs[m] = (t, k)
            if st.adaptive[m]:
                fresh = st.last_config.get(m) != (t, k)
                st.reallocations[m] += fresh and self.delay > 0
                start = self._start_up(m, fresh, self.delay)
                used, done = self._run_adaptive(m, self.names[t], k, servers, L - start)
            else:
                start = self._start_up(m, not plan.renewed[e], self.overhead)
                rate = st.T[m, t]
                if not plan.consolidated[e] and not np.isnan(st.Tu[m, t]):
                    rate = st.Tu[m, t]
                can = rate * (L - start)
                done = rate > 0 and st.remaining[m] <= can
                used = st.remaining[m] / rate if done else L - start
                st.remaining[m] = 0.0 if done else st.remaining[m] - can
            occupied[e] = start + used
            if done:
                st.finish[m] = now + start + used
                finished.append(m)
            self.busy[t] += k * occupied[e]
            st.gpu_seconds[m] += k * occupied[e]
        st.last_config = configs
        self.unfinished -= len(finished)
        self.clock = now + L
        return RoundResult(occupied, finished)

    def _start_up(self, m: int, fresh: bool, cost: float) -> float:
        """Seconds of this round job m spends starting: a fresh start owes `cost`; what a round
        cannot hold is owed in the next one on the same configuration (a 200 s restart in 60 s
        rounds costs 200 s, not 60)."""
        owed = cost if fresh else self.st.owed.pop(m, 0.0)
        self.st.owed.pop(m, None)
        start = min(owed, self.L)
        if owed > start:
            self.st.owed[m] = owed - start
        return start

    def _run_adaptive(self, m: int, worker: str, k: int, servers: int, seconds: float) -> tuple[float, bool]:
        """Run job m for `seconds` at its best batch on this configuration: (seconds used, finished)."""
        st = self.st
        spec = st.etrace.specs[m]
        p = float(st.progress[m])
        g, mb, s = best_goodput(spec, worker, k, servers, p, self.network)
        if g <= 0 or seconds <= 0:
            return max(seconds, 0.0), False
        curve = spec.phi or get_family(spec.family).phi
        batch = k * mb * (s + 1)
        x = float(throughput_params(spec.family, worker, self.network).throughput(mb, s, k, servers))
        work = float(st.etrace.work[m])
        need = float(seconds_to_progress(curve, spec.init_batch, batch, x, work, p, 1.0))
        if need <= seconds:
            st.progress[m] = 1.0
            return need, True
        st.progress[m] = float(progress_after(curve, spec.init_batch, batch, x, work, p, seconds))
        return seconds, False
