"""One elastic workload under any policy, summarized alike (what `simulate --workload` prints).

The policies of `registry` run in `simulate_elastic`; every other policy runs the
workload's fixed jobs (tuned GPU count and batch) in the ordinary simulator. Tuned GPU
counts wider than the cluster's largest type are capped first, for every policy alike
(`cap_tuned_gpus`), so that all policies see the same jobs.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from gavel_ng.cluster import Cluster
from gavel_ng.errors import InputError

from .registry import get_elastic_policy, is_elastic_policy
from .simulate import DEFAULT_REALLOC_DELAY, simulate_elastic
from .workload import POLLUX_NETWORK_GBPS, ElasticTrace, cap_tuned_gpus, fixed_job_table

log = logging.getLogger(__name__)

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


def fit_to_cluster(etrace: ElasticTrace, cluster: Cluster) -> ElasticTrace:
    """The workload with tuned GPU counts capped at the cluster's largest worker type."""
    widest = int(cluster.capacity().max())
    if int(etrace.gpus.max()) <= widest:
        return etrace
    log.info("tuned GPU counts above %d (the largest worker type) capped for %d job(s)", widest,
             int((etrace.gpus > widest).sum()))
    return cap_tuned_gpus(etrace, widest)


def load_workload(cluster: Cluster, trace: str | None = None, jobs: int = 160, hours: float = 8.0,
                  seed: int = 0) -> ElasticTrace:
    """The workload `simulate --workload pollux` / `--trace FILE.csv` (and a sweep point) runs, fit to
    `cluster`: one place, so that both give the same jobs."""
    from .workload import pollux_workload, read_pollux_csv

    if trace is not None:
        return fit_to_cluster(read_pollux_csv(trace), cluster)
    if jobs < 1:
        raise InputError("--jobs", jobs, "must be at least 1")
    return fit_to_cluster(pollux_workload(num_jobs=jobs, hours=hours, seed=seed), cluster)


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


def contention_free_jct(etrace: ElasticTrace, cluster: Cluster, overhead: float = 0.0, steps: int = 200,
                        network_gbps: float = POLLUX_NETWORK_GBPS):
    """Each job's JCT (seconds) were it alone on `cluster`: at every progress its best goodput over
    the types and GPU counts (packed, one type per job, a batch re-chosen for free), plus `overhead`.

    A lower bound for any policy that runs a job on one type at a time, to judge a goal against
    (midpoint rule over `steps` progress intervals; phi grows smoothly, so 200 are plenty)."""
    import numpy as np

    from .goodput import best_goodput_many

    if not (isinstance(steps, int) and steps >= 1):
        raise InputError("steps", steps, "must be an integer >= 1")
    mid = (np.arange(steps) + 0.5) / steps
    per_spec: dict = {}
    out = np.zeros(len(etrace))
    for m, spec in enumerate(etrace.specs):
        if spec not in per_spec:
            best = np.zeros(steps)
            for w in cluster.worker_types:
                k = np.arange(1, int(cluster.gpus[w]) + 1)
                g, _, _ = best_goodput_many(spec, w, k[None, :], (-(-k // cluster.server_size(w)))[None, :],
                                            mid[:, None], network_gbps)
                best = np.maximum(best, g.max(axis=1))
            with np.errstate(divide="ignore"):
                per_spec[spec] = float(np.sum(1.0 / best)) / steps
        out[m] = per_spec[spec] * float(etrace.work[m]) + overhead
    return out
