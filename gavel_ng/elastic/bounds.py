"""Lower bounds on adaptive jobs' completion times, to judge a policy's result against."""

from __future__ import annotations

import numpy as np

from gavel_ng.cluster import Cluster
from gavel_ng.errors import InputError

from .goodput import best_goodput_many
from .workload import POLLUX_NETWORK_GBPS, ElasticTrace


def contention_free_jct(etrace: ElasticTrace, cluster: Cluster, overhead: float = 0.0, steps: int = 200,
                        network_gbps: float = POLLUX_NETWORK_GBPS) -> np.ndarray:
    """Each job's JCT (seconds) were it alone on `cluster`: at every progress its best goodput over
    the types and GPU counts (packed, one type per job, a batch re-chosen for free), plus `overhead`.

    A lower bound for any policy that runs a job on one type at a time, to judge a goal against
    (midpoint rule over `steps` progress intervals; phi grows smoothly, so 200 are plenty)."""
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
