"""What the deployment's policy believes about throughputs, and how real runs change it.

One `ThroughputView` per scheduler: the throughput table corrected by measurements
(`MeasuredTable`), or, with `"estimator": true`, the online estimator fed by the same
measurements. ClusterState decides *what* an interval measured (alone, with a partner, or
nothing); this module decides where it goes and answers the allocator's questions.
"""

from __future__ import annotations

import logging

import numpy as np

from ..estimator import Measurement, ThroughputEstimator
from ..estimator.view import isolated_columns, pair_table
from ..policies.packing import PairTable
from ..throughputs import UNCONSOLIDATED, JobKey
from .measured import MeasuredTable

log = logging.getLogger(__name__)


class ThroughputView:
    def __init__(self, table: MeasuredTable, estimator: ThroughputEstimator | None = None):
        self.table = table
        self.estimator = estimator
        self.worker_types = list(table.worker_types)

    # ----- jobs ------------------------------------------------------------------------------
    def add_job(self, job_id: int, key: JobKey) -> None:
        """A job type of the table starts as that reference job; a new type from its neighbours."""
        est = self.estimator
        if est is not None and job_id not in est.jobs:
            est.add_job(job_id, key[1], known_key=key)

    def remove_job(self, job_id: int) -> None:
        if self.estimator is not None:
            self.estimator.remove_job(job_id)

    # ----- measurements ----------------------------------------------------------------------
    def record(self, job_id: int, key: JobKey, worker_type: str, seconds: float, steps: float,
               partner: tuple[int, JobKey] | None = None) -> tuple[float, int] | None:
        """Fold in `steps` in `seconds` on `worker_type` (`_unconsolidated` when split), alone or
        next to `partner` (job id, key). Returns the table's new isolated (value, samples) to
        persist, or None when the table's isolated entries did not change."""
        base, consolidated = worker_type.removesuffix(UNCONSOLIDATED), not worker_type.endswith(UNCONSOLIDATED)
        out = None
        if partner is None:
            out = self.table.record(key[0], key[1], base, consolidated, steps / seconds)
        elif consolidated:
            self.table.record_pair(key, partner[1], base, steps / seconds)
        est = self.estimator
        other = partner[0] if partner is not None else None
        if est is not None and job_id in est.jobs and worker_type in est.workers and (
                other is None or other in est.jobs):
            est.record(Measurement(job_id, worker_type, seconds, steps, partner=other))
        return out

    def replay(self, events: list[dict], keys: dict[int, JobKey]) -> int:
        """After a restart, from the "measure" events: pair rates, and every sample of the jobs the
        estimator follows (isolated rates per job type are in the store's throughputs table)."""
        n = 0
        for e in events:
            d, job_id = e["detail"], e["job_id"]
            partner = d.get("partner")
            followed = self.estimator is not None and job_id in self.estimator.jobs
            if job_id not in keys or (partner is None and not followed) or (
                    partner is not None and partner not in keys):
                continue
            if partner is None:
                if d["worker_type"] in self.estimator.workers:
                    self.estimator.record(Measurement(job_id, d["worker_type"], d["seconds"], d["steps"]))
            else:
                self.record(job_id, keys[job_id], d["worker_type"], d["seconds"], d["steps"],
                            (partner, keys[partner]))
            n += 1
        if n:
            log.info("replayed %d throughput measurements", n)
        return n

    # ----- the policy's input ----------------------------------------------------------------
    def isolated(self, ids: list[int], keys: list[JobKey]) -> np.ndarray:
        """(jobs, worker types) steps/s alone."""
        if self.estimator is not None:
            return isolated_columns(self.estimator, ids, self.worker_types)
        return self.table.matrix(keys)

    def pairs(self, ids: list[int], keys: list[JobKey], T: np.ndarray) -> PairTable:
        """Fractions of their isolated rates that jobs keep when sharing a GPU."""
        if self.estimator is not None:
            return pair_table(self.estimator, ids, self.worker_types, T)
        return self.table.pair_table(keys)
