"""Elastic jobs in the simulator: the shared round mechanism with configuration columns.

`simulate_elastic(cluster, etrace, policy="goodput")` runs an `ElasticTrace` whose jobs
are adaptive (all, or those `adaptive` marks; the others are fixed jobs at their tuned
GPU count, with the throughput table's steps/s) on the same `SchedulerLoop` and
`RoundMechanism` as every other simulation:

* **Allocation** (`ElasticAllocator`): the columns are the worker types (fixed jobs) and
  the configurations (worker type, GPU count) of `gavel_ng.elastic.policy`; the
  mechanism's `col_gpus` makes a configuration's entry take that many GPUs of its type.
  Entries are the jobs' speedups at their current progress (phi grows as they train).
* **Execution** (`ElasticExecutor`): an adaptive job placed on K GPUs of type t over N
  servers (the placement decides N) runs at the best (per-GPU batch m, accumulation s)
  of `best_goodput` at its progress when the round starts (the PolluxAgent's choice),
  and its progress over the round is exact at that (M, throughput) (`progress_after`,
  `seconds_to_progress`: phi grows within the round). It finishes at progress 1.
* **Re-allocation delay**: a round in which an adaptive job runs on a configuration (t, K)
  other than the one it ran on in the previous round (including its first start and a
  restart after a paused round) starts `realloc_delay` seconds late (Pollux: 30 s).
  Fixed jobs pay `preemption_overhead` when launched rather than renewed, as elsewhere.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field

import numpy as np

from gavel_ng.cluster import Cluster
from gavel_ng.errors import InputError
from gavel_ng.mechanism import (
    AllocationRows,
    JobView,
    MechanismConfig,
    RoundMechanism,
    RoundPlan,
    RoundResult,
    SchedulerLoop,
    Topology,
)
from gavel_ng.throughputs import ThroughputTable

from .efficiency import progress_after, seconds_to_progress
from .families import get_family
from .goodput import best_goodput, best_goodput_many, throughput_params
from .policy import DEFAULT_FLOOR, ELASTIC_POLICIES, ElasticColumns, solve_goodput
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
    reallocations: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    gpu_seconds: np.ndarray = field(default_factory=lambda: np.zeros(0))

    @property
    def arrival(self) -> np.ndarray:
        return self.etrace.trace.arrivals


class ElasticAllocator:
    """The SchedulerLoop's Allocator for the `goodput` policies (gavel_ng.elastic.policy)."""

    def __init__(self, policy: str, state: ElasticState, worker_types: list[str], capacity: np.ndarray,
                 gpus_per_server: list[int], gpu_counts: tuple[int, ...] = DEFAULT_GPU_COUNTS,
                 floor: float = DEFAULT_FLOOR, network_gbps: float = POLLUX_NETWORK_GBPS):
        if policy not in ELASTIC_POLICIES:
            raise InputError("--policy", policy, f"elastic jobs run under {', '.join(ELASTIC_POLICIES)}")
        self.agnostic = policy.endswith("_agnostic")
        self.state = state
        self.worker_types = list(worker_types)
        self.capacity = np.asarray(capacity, float)
        self.columns = ElasticColumns.build(self.worker_types, self.capacity, gpu_counts)
        self.per_server = np.asarray(gpus_per_server, np.int64)
        self.floor = floor
        self.network = network_gbps
        self.solve_seconds: list[float] = []

    def entries(self, jobs: list[int]) -> tuple[np.ndarray, np.ndarray]:
        """(S, need): each job's speedup and GPUs on every column (module docstring of policy.py)."""
        st, cols = self.state, self.columns
        M, C, J = len(jobs), cols.num, len(self.worker_types)
        S = np.zeros((M, C))
        need = np.broadcast_to(np.where(cols.gpus > 0, cols.gpus, 1), (M, C)).astype(float).copy()
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
                g, _, _ = best_goodput_many(spec, self.worker_types[t], k, -(-k // self.per_server[t]), prog,
                                            self.network)
                S[np.ix_(rows, c)] = g
        adaptive = st.adaptive[jobs_a]
        base = np.where(adaptive, np.where(cols.gpus[None, :] == 1, S, 0.0).max(axis=1, initial=0.0),
                        S[:, :J].max(axis=1, initial=0.0) / np.maximum(st.sf[jobs_a], 1))
        # a job that cannot run on one GPU (min_gpus > 1): its best goodput per GPU
        base = np.where(base > 0, base, (S / need).max(axis=1, initial=0.0))
        S /= np.where(base > 0, base, np.inf)[:, None]
        return S, need

    def allocate(self, jobs: list[int], now: float) -> AllocationRows:
        start = time.perf_counter()
        S, need = self.entries(jobs)
        X = solve_goodput(S, need, self.columns, self.capacity, self.floor, self.agnostic)
        self.solve_seconds.append(time.perf_counter() - start)
        row_sf = np.where(self.state.adaptive[jobs], 1, self.state.sf[jobs]) if jobs else np.zeros(0)
        return AllocationRows([(m,) for m in jobs], X, np.asarray(row_sf, float))


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
                start = min(self.delay, L) if st.last_config.get(m) != (t, k) else 0.0
                if start > 0:
                    st.reallocations[m] += 1
                used, done = self._run_adaptive(m, self.names[t], k, servers, L - start)
            else:
                start = 0.0 if plan.renewed[e] else min(self.overhead, L)
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


@dataclass
class ElasticResult:
    summary: dict
    state: ElasticState


def simulate_elastic(cluster: Cluster, etrace: ElasticTrace, policy: str = "goodput",
                     adaptive: np.ndarray | None = None, table: ThroughputTable | None = None,
                     round_seconds: float = 360.0, realloc_delay: float = DEFAULT_REALLOC_DELAY,
                     preemption_overhead: float = 0.0, floor: float = DEFAULT_FLOOR,
                     gpu_counts: tuple[int, ...] = DEFAULT_GPU_COUNTS, network_gbps: float = POLLUX_NETWORK_GBPS,
                     seed: int = 0, max_hours: float | None = None,
                     observe=None) -> ElasticResult:
    """Simulate `etrace` (module docstring); `adaptive` marks the adaptive jobs (None: all).

    `table` gives the fixed jobs' steps/s (needed when some job is fixed; the pollux
    workload's is `fixed_job_table(etrace, ...)`). `observe(plan)` sees every round's plan."""
    if not round_seconds > 0:
        raise InputError("--round-seconds", round_seconds, "must be positive")
    if not (realloc_delay >= 0 and math.isfinite(realloc_delay)):
        raise InputError("--realloc-delay", realloc_delay, "must be a number of seconds >= 0")
    wall = time.perf_counter()
    workers = cluster.worker_types
    M = len(etrace)
    adaptive = np.ones(M, bool) if adaptive is None else np.asarray(adaptive, bool)
    if len(adaptive) != M:
        raise InputError("adaptive", len(adaptive), f"needs one flag per job ({M})")
    trace = etrace.trace
    T = np.zeros((M, len(workers)))
    Tu = np.full((M, len(workers)), np.nan)
    if (~adaptive).any():
        if table is None:
            raise InputError("table", None, "fixed jobs need a throughput table (fixed_job_table)")
        for m in np.flatnonzero(~adaptive):
            key = (trace.job_types[m], int(trace.scale_factors[m]))
            for j, w in enumerate(workers):
                T[m, j] = table.isolated.get(w, {}).get(key, 0.0)
                u = table.get_unconsolidated(key, w)
                if u is not None:
                    Tu[m, j] = u
    state = ElasticState(etrace, adaptive, trace.scale_factors.astype(np.int64), T, Tu, np.zeros(M),
                         trace.steps.astype(float).copy(), np.full(M, np.nan),
                         reallocations=np.zeros(M, np.int64), gpu_seconds=np.zeros(M))
    topo = Topology.from_cluster(cluster)
    per_server = [cluster.server_size(w) for w in workers]
    allocator = ElasticAllocator(policy, state, workers, cluster.capacity(), per_server, gpu_counts, floor,
                                 network_gbps)
    cols = allocator.columns
    mech = RoundMechanism(topo, MechanismConfig(seed=seed), cols.pool, np.zeros(cols.num, bool), cols.gpus)
    ex = ElasticExecutor(state, topo, round_seconds, realloc_delay, preemption_overhead, network_gbps)
    if observe is not None:
        plan_round = mech.plan

        def plan(new_jobs=None):
            out = plan_round(new_jobs)
            observe(out)
            return out

        mech.plan = plan
    loop = SchedulerLoop(mech, allocator, ex)
    cap = (max_hours * HOUR) if max_hours is not None else float(trace.arrivals.max()) + 60 * 86400.0
    unstable = False
    while np.isnan(state.finish).any():
        if ex.now() > cap:
            unstable = True
            break
        loop.step()
    done = ~np.isnan(state.finish)
    jct = state.finish[done] - trace.arrivals[done]
    summary = {
        "policy": policy,
        "avg_jct_hours": round(float(jct.mean()) / HOUR, 4) if len(jct) else None,
        "p99_jct_hours": round(float(np.percentile(jct, 99)) / HOUR, 4) if len(jct) else None,
        "makespan_hours": round(float(state.finish[done].max() - trace.arrivals.min()) / HOUR, 4) if len(jct) else None,
        "gpu_hours": round(float(state.gpu_seconds.sum()) / HOUR, 3),
        "utilization": round(float(ex.busy.sum() / (cluster.capacity().sum() * max(ex.now(), 1e-9))), 6),
        "jobs_measured": int(done.sum()),
        "adaptive_jobs": int(adaptive.sum()),
        "reallocations": int(state.reallocations.sum()),
        "realloc_delay_s": float(realloc_delay),
        "policy_solves": loop.stats.solves,
        "solve_seconds_mean": round(float(np.mean(allocator.solve_seconds)), 4) if allocator.solve_seconds else 0.0,
        "unstable": unstable,
        "wall_seconds": round(time.perf_counter() - wall, 3),
    }
    return ElasticResult(summary, state)
