"""What the simulator does differently for a round policy: which jobs adapt, which settings apply,
and the planner (gavel_ng.round_planner) it runs instead of an allocator and Gavel's mechanism.

Decided by the policy's declared properties (`PolicySpec.kind`, `.jobs`), never by its name."""

from __future__ import annotations

import numpy as np

from ..errors import InputError
from ..policies.registry import ADAPTIVE, BOTH, PolicySpec
from ..round_planner import RoundPlanner
from ..rules import ClusterRules, ServerRules
from ..topology import Topology
from .adaptive import NETWORK_GBPS, AdaptiveModels, ArraysSource

NO_ADAPTIVE_SPECS = "this trace has no adaptive specs (--workload pollux or a Pollux workload CSV)"


def adaptive_models(spec: PolicySpec, etrace, num_jobs: int) -> AdaptiveModels | None:
    """Which jobs run adaptive under this policy: none under an allocation policy or a FIXED round
    policy; those with a goodput model under BOTH; every job under ADAPTIVE (else InputError)."""
    specs = list(etrace.specs) if etrace is not None else [None] * num_jobs
    has = np.array([s is not None for s in specs], bool)
    if spec.is_round and spec.jobs == ADAPTIVE and not has.all():
        what = NO_ADAPTIVE_SPECS if not has.any() else \
            f"{int((~has).sum())} of its {num_jobs} jobs have no adaptive spec"
        raise InputError("--policy", spec.name, f"{spec.name} runs adaptive jobs only: {what}")
    if etrace is None:
        return None
    adapt = has if spec.is_round and spec.jobs in (ADAPTIVE, BOTH) else np.zeros(num_jobs, bool)
    return AdaptiveModels(specs, np.asarray(etrace.work, float), adapt, etrace.restart_seconds)


def check_adaptive_fits(models: AdaptiveModels | None, cluster, gpu_counts) -> None:
    """An adaptive job that no (type, GPU count) configuration can run would never finish: InputError
    naming the first such job, up front (else the run would only stop at its time cap)."""
    from ..elastic.goodput import best_goodput_many

    if models is None or not models.any:
        return
    cap = cluster.capacity()
    fits: dict = {}
    for m in np.flatnonzero(models.adaptive).tolist():
        spec = models.specs[m]
        if spec not in fits:
            fits[spec] = False
            for t, w in enumerate(cluster.worker_types):
                k = np.array([g for g in sorted(set(gpu_counts)) if g <= cap[t]], np.int64)
                if len(k) and (best_goodput_many(spec, w, k, -(-k // cluster.server_size(w)), 0.0,
                                                 NETWORK_GBPS)[0] > 0).any():
                    fits[spec] = True
                    break
        if not fits[spec]:
            raise InputError(f"trace job {m}", spec.family, "fits no configuration of the cluster (GPU counts "
                             f"{', '.join(map(str, sorted(set(gpu_counts))))} of each type, within its capacity; "
                             f"min_gpus {spec.min_gpus})")


def check_round_config(spec: PolicySpec, config, crules: ClusterRules, job_rules: list) -> None:
    """Settings of Gavel's allocation path that a round policy has no use for: InputError naming them."""
    flags = (("--space-sharing", config.space_sharing), ("--placement-sensitive", config.placement_sensitive),
             ("--estimate-throughputs", config.estimate_throughputs), ("--ideal", config.ideal),
             ("--gavel-compat", config.gavel_compat), ("--ledger reset", config.reset_ledger),
             ("--min-solve-interval", config.min_solve_interval > 0), ("--entities", bool(config.entities)))
    for flag, on in flags:
        if on:
            raise InputError(flag, True, f"{spec.name} is a round policy: {flag} does not apply")
    for m, r in enumerate(job_rules):
        if r is not None and r.preferred_types:
            raise InputError(f"trace job {m} rules.preferred_types", list(r.preferred_types),
                             f"{spec.name} is a round policy: preferences do not apply (allowed_types and server "
                             "rules do)")


def round_planner(spec: PolicySpec, config, jobs, topology: Topology, clock, crules: ClusterRules,
                  ruled: bool, learned=None, restarts=None) -> RoundPlanner:
    """The policy's planner over the job arrays; placement rules (labels, affinity, quotas) apply. `learned`:
    the policy reads adaptive jobs' learned models (simulator.learned) instead of the exact ones; `restarts`:
    the executor's RestartLedger, whose jobs still paying a restart keep their configuration."""
    source = ArraysSource(jobs, list(topology.worker_types), learned=learned, restarts=restarts)
    planner = RoundPlanner(spec.name, spec.decider(config.options), source, topology, clock,
                           realloc_delay=config.realloc_delay, gpu_counts=spec.gpu_counts or config.gpu_counts,
                           seed=config.seed)
    if ruled:
        planner.placer.rules = ServerRules(crules, jobs.rules_of)
    return planner
