"""One elastic workload under any policy, summarized alike (what `simulate --workload` prints).

The policies of `registry` run in `simulate_elastic`; every other policy runs the
workload's fixed jobs (tuned GPU count and batch) in the ordinary simulator. Tuned GPU
counts wider than the cluster's largest type are capped first, for every policy alike
(`cap_tuned_gpus`), so that all policies see the same jobs.
"""

from __future__ import annotations

from dataclasses import dataclass

from gavel_ng.cluster import Cluster

from .bounds import contention_free_jct
from .registry import get_elastic_policy, is_elastic_policy
from .simulate import DEFAULT_REALLOC_DELAY, simulate_elastic
from .workload import POLLUX_NETWORK_GBPS, ElasticTrace, fit_to_cluster, fixed_job_table, load_workload

# moved to the model (workload, bounds); still importable from here until this module goes
__all__ = ["RunSettings", "contention_free_jct", "fit_to_cluster", "load_workload", "round_seconds_of", "run_policy"]

SUMMARY_KEYS = ("policy", "avg_jct_hours", "p99_jct_hours", "makespan_hours", "gpu_hours", "utilization",
                "jobs_measured", "reallocations", "policy_solves", "unstable", "wall_seconds")


@dataclass(frozen=True)
class RunSettings:
    """How each policy is run (the simulate flags of an elastic workload)."""

    round_seconds: float | None = None   # None: each policy's own (ElasticPolicy.round_seconds; others 360 s)
    realloc_delay: float = DEFAULT_REALLOC_DELAY
    preemption_overhead: float = 0.0
    floor: float | None = None          # goodput policies' fairness floor (None: their default)
    seed: int = 0
    max_hours: float | None = None


def round_seconds_of(name: str) -> float:
    """How often a policy decides by default: its declared interval, or Gavel's 360 s rounds."""
    return get_elastic_policy(name).round_seconds if is_elastic_policy(name) else 360.0


def run_policy(name: str, cluster: Cluster, etrace: ElasticTrace, settings: RunSettings,
               options: dict | None = None) -> dict:
    """Summary row (`SUMMARY_KEYS`) of one policy on `etrace` (already `fit_to_cluster`)."""
    from gavel_ng.simulator import SimConfig, simulate

    table = fixed_job_table(etrace, cluster.worker_types, network_gbps=POLLUX_NETWORK_GBPS)
    rounds = settings.round_seconds or round_seconds_of(name)
    if is_elastic_policy(name):
        extra = {} if settings.floor is None else {"floor": settings.floor}
        s = simulate_elastic(cluster, etrace, name, table=table, round_seconds=rounds,
                             realloc_delay=settings.realloc_delay, preemption_overhead=settings.preemption_overhead,
                             seed=settings.seed, max_hours=settings.max_hours, options=options, **extra).summary
        return {k: s.get(k) for k in SUMMARY_KEYS}
    config = SimConfig(policy=name, round_seconds=rounds,
                       preemption_overhead_s=settings.preemption_overhead, seed=settings.seed,
                       max_sim_seconds=None if settings.max_hours is None else settings.max_hours * 3600)
    s = simulate(cluster, table, etrace.trace, config).summary
    busy = s["utilization"] * float(cluster.capacity().sum()) * s.get("simulated_hours", 0.0)
    return {k: s.get(k) for k in SUMMARY_KEYS} | {"gpu_hours": round(busy, 3), "reallocations": None}
