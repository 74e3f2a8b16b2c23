"""What an estimator believes about throughputs, on a problem's worker-type columns.

Shared by the simulator (`--estimate-throughputs`) and the deployment runtime
(`"estimator": true`), so both hand a policy exactly the same kind of input.
Columns may include `TYPE_unconsolidated` twins (placement-aware problems); a job the
estimator knows at scale factor 1 never runs split, so it gets nothing there.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ..pairs import PairTable
from ..throughputs import UNCONSOLIDATED
from .online import JobId, ThroughputEstimator


def isolated_columns(est: ThroughputEstimator, jobs: Sequence[JobId], columns: Sequence[str]) -> np.ndarray:
    """(jobs, columns) steps/s alone; single-GPU jobs get 0 on `_unconsolidated` twins."""
    out = est.isolated_matrix(list(jobs), list(columns))
    twin = np.array([c.endswith(UNCONSOLIDATED) for c in columns], dtype=bool)
    if twin.any() and len(jobs):
        single = np.array([est.jobs[j].scale_factor <= 1 for j in jobs])
        out[np.ix_(single, twin)] = 0.0
    return out


def pair_table(est: ThroughputEstimator, jobs: Sequence[JobId], columns: Sequence[str], T: np.ndarray) -> PairTable:
    """Every job its own class: frac[a, b, c] = a's estimated in-pair share of its isolated
    steps/s on column c (a twin column takes its base type's fraction); 0 where T[a, c] is 0."""
    jobs = list(jobs)
    n = len(jobs)
    frac = np.zeros((n, n, len(columns)))
    base_frac: dict[str, np.ndarray] = {}
    alone = dict(zip(est.workers, est.isolated_matrix(jobs, est.workers).T))
    for c, col in enumerate(columns):
        base = col.removesuffix(UNCONSOLIDATED)
        if base not in base_frac:
            pm = est.pair_matrix(jobs, base)[:, :, 0]
            iso = alone[base][:, None]
            base_frac[base] = np.where(iso > 0, pm / np.where(iso > 0, iso, 1.0), 0.0)
        frac[:, :, c] = np.where(T[:, c][:, None] > 0, base_frac[base], 0.0)
    return PairTable(np.arange(n), frac)
