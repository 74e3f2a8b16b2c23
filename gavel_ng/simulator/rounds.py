"""What the simulator does differently for a round policy: which jobs adapt and which settings apply,
asked of gavel_ng.assembly (which reads the policy's declared properties, never its name)."""

from __future__ import annotations

import numpy as np

from ..assembly import adaptive_jobs, check_job, check_settings
from ..errors import InputError
from ..policies.registry import PolicySpec
from .adaptive import NETWORK_GBPS, AdaptiveModels

NO_ADAPTIVE_SPECS = "this trace has no adaptive specs (--workload pollux or a Pollux workload CSV)"


def adaptive_models(spec: PolicySpec, etrace, num_jobs: int) -> AdaptiveModels | None:
    """The trace's goodput models and which jobs run adaptive under this policy (assembly.adaptive_jobs);
    None for a trace without any."""
    specs = list(etrace.specs) if etrace is not None else [None] * num_jobs
    adapt = adaptive_jobs(spec, np.array([s is not None for s in specs], bool), NO_ADAPTIVE_SPECS)
    if etrace is None:
        return None
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


def check_round_config(spec: PolicySpec, config, job_rules: list) -> None:
    """Settings of Gavel's allocation path that a round policy has no use for, and soft preferences of
    the trace's jobs: InputError naming them (nothing for an allocation policy)."""
    check_settings(spec, {"--space-sharing": config.space_sharing,
                          "--placement-sensitive": config.placement_sensitive,
                          "--estimate-throughputs": config.estimate_throughputs, "--ideal": config.ideal,
                          "--gavel-compat": config.gavel_compat, "--ledger reset": config.reset_ledger,
                          "--min-solve-interval": config.min_solve_interval > 0,
                          "--entities": bool(config.entities)})
    for m, r in enumerate(job_rules):
        if r is not None:
            check_job(spec, True, r.preferred_types, f"trace job {m} rules")
