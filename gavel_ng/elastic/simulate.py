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

import inspect
import math
import time
from dataclasses import dataclass

import numpy as np

from gavel_ng.cluster import Cluster
from gavel_ng.errors import InputError
from gavel_ng.mechanism import AllocationRows, MechanismConfig, RoundMechanism, SchedulerLoop
from gavel_ng.throughputs import ThroughputTable
from gavel_ng.topology import Topology

from .execution import DEFAULT_GPU_COUNTS, DEFAULT_REALLOC_DELAY, HOUR, ElasticExecutor, ElasticState, speedup_entries
from .policy import DEFAULT_FLOOR, ElasticColumns, solve_goodput
from .registry import get_elastic_policy
from .workload import POLLUX_NETWORK_GBPS, ElasticTrace


class ElasticAllocator:
    """The SchedulerLoop's Allocator for `goodput_lp` (gavel_ng.elastic.policy; `goodput` is a RoundPolicy)."""

    def __init__(self, policy: str, state: ElasticState, worker_types: list[str], capacity: np.ndarray,
                 gpus_per_server: list[int], gpu_counts: tuple[int, ...] = DEFAULT_GPU_COUNTS,
                 floor: float = DEFAULT_FLOOR, network_gbps: float = POLLUX_NETWORK_GBPS):
        info = get_elastic_policy(policy)
        if info.planner:
            raise InputError("--policy", policy, "decides its rounds itself (registry.ElasticPolicy.planner)")
        self.agnostic = not info.type_aware
        self.state = state
        self.worker_types = list(worker_types)
        self.capacity = np.asarray(capacity, float)
        self.columns = ElasticColumns.build(self.worker_types, self.capacity, gpu_counts)
        self.per_server = np.asarray(gpus_per_server, np.int64)
        self.floor = floor
        self.network = network_gbps
        self.solve_seconds: list[float] = []

    def entries(self, jobs: list[int]) -> tuple[np.ndarray, np.ndarray]:
        """(S, need): each job's speedup and GPUs on every column (`speedup_entries`)."""
        return speedup_entries(self.state, jobs, self.columns, self.worker_types, self.per_server, self.network)

    def allocate(self, jobs: list[int], now: float) -> AllocationRows:
        start = time.perf_counter()
        S, need = self.entries(jobs)
        X = solve_goodput(S, need, self.columns, self.capacity, self.floor, self.agnostic)
        self.solve_seconds.append(time.perf_counter() - start)
        row_sf = np.where(self.state.adaptive[jobs], 1, self.state.sf[jobs]) if jobs else np.zeros(0)
        return AllocationRows([(m,) for m in jobs], X, np.asarray(row_sf, float))


@dataclass
class ElasticResult:
    summary: dict
    state: ElasticState


def simulate_elastic(cluster: Cluster, etrace: ElasticTrace, policy: str = "goodput",
                     adaptive: np.ndarray | None = None, table: ThroughputTable | None = None,
                     round_seconds: float | None = None, realloc_delay: float = DEFAULT_REALLOC_DELAY,
                     preemption_overhead: float = 0.0, floor: float = DEFAULT_FLOOR,
                     gpu_counts: tuple[int, ...] = DEFAULT_GPU_COUNTS, network_gbps: float = POLLUX_NETWORK_GBPS,
                     seed: int = 0, max_hours: float | None = None,
                     observe=None, options: dict | None = None) -> ElasticResult:
    """Simulate `etrace` (module docstring); `adaptive` marks the adaptive jobs (None: all).

    The policy's declared properties (`registry.ElasticPolicy`) decide the rest: a policy
    that is not `adaptive` runs every job as a fixed job, a `planner` policy decides each
    round itself (`options`: its keyword arguments, e.g. Tiresias's thresholds).
    `floor` and `gpu_counts` are `goodput_lp`'s (the per-round `goodput` takes `p`, `gpu_counts`,
    `restart_factor` as options). `table` gives the fixed jobs' steps/s (needed when some job is fixed; the pollux
    workload's is `fixed_job_table(etrace, ...)`). `observe(plan)` sees every round's plan. `round_seconds`
    defaults to the policy's declared interval (`ElasticPolicy.round_seconds`)."""
    info = get_elastic_policy(policy)
    round_seconds = info.round_seconds if round_seconds is None else round_seconds
    if not round_seconds > 0:
        raise InputError("--round-seconds", round_seconds, "must be positive")
    if not (realloc_delay >= 0 and math.isfinite(realloc_delay)):
        raise InputError("--realloc-delay", realloc_delay, "must be a number of seconds >= 0")
    if options and not info.planner:
        raise InputError("options", sorted(options), f"{policy} takes no options here (floor, gpu_counts do)")
    if options and info.planner:
        known = set(inspect.signature(info.make.load()).parameters) - {"state", "topology", "executor", "seed"}
        if set(options) - known:
            raise InputError("options", sorted(set(options) - known), f"{policy} takes {', '.join(sorted(known))}")
    wall = time.perf_counter()
    workers = cluster.worker_types
    M = len(etrace)
    if not info.adaptive:
        if adaptive is not None and np.asarray(adaptive, bool).any():
            raise InputError("adaptive", int(np.asarray(adaptive, bool).sum()), f"{policy} runs fixed jobs only")
        adaptive = np.zeros(M, bool)
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
        capacity = cluster.capacity()
        too_wide = [m for m in np.flatnonzero(~adaptive)
                    if not ((T[m] > 0) & (trace.scale_factors[m] <= capacity)).any()]
        if too_wide:
            m = too_wide[0]
            raise InputError("num_replicas", int(trace.scale_factors[m]),
                             f"job {etrace.names[m] if etrace.names else m} fits no worker type of the cluster "
                             f"(cap_tuned_gpus caps tuned GPU counts); {len(too_wide)} such job(s)")
    state = ElasticState(etrace, adaptive, trace.scale_factors.astype(np.int64), T, Tu, np.zeros(M),
                         trace.steps.astype(float).copy(), np.full(M, np.nan),
                         reallocations=np.zeros(M, np.int64), gpu_seconds=np.zeros(M))
    topo = Topology.from_cluster(cluster)
    ex = ElasticExecutor(state, topo, round_seconds, realloc_delay, preemption_overhead, network_gbps)
    if info.planner:
        kw = dict(options or {})
        if "gpu_counts" in inspect.signature(info.make.load()).parameters:
            kw.setdefault("gpu_counts", gpu_counts)
        planner = allocator = info.make(state, topo, ex, seed, **kw)
    else:
        per_server = [cluster.server_size(w) for w in workers]
        allocator = ElasticAllocator(policy, state, workers, cluster.capacity(), per_server, gpu_counts, floor,
                                     network_gbps)
        cols = allocator.columns
        planner = RoundMechanism(topo, MechanismConfig(seed=seed), cols.pool, np.zeros(cols.num, bool), cols.gpus)
    if observe is not None:
        plan_round = planner.plan

        def plan(new_jobs=None):
            out = plan_round(new_jobs)
            observe(out)
            return out

        planner.plan = plan
    loop = SchedulerLoop(planner, allocator, ex)
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
        "rounds": loop.stats.rounds,
        "launches": loop.stats.launches,
        "unstable": unstable,
        "wall_seconds": round(time.perf_counter() - wall, 3),
    }
    return ElasticResult(summary, state)
