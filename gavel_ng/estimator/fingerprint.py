"""Fingerprints: a job's completed feature row and its nearest reference job.

`PairModel` is the fitted completion model of one reference set (one scale factor).
It turns a profile into a fingerprint and estimates the normalized throughputs of a
pair of fingerprinted jobs, either from the completed rows themselves
(`source="completion"`, the default: it is tailored to the job) or, as in Gavel, by
copying the nearest reference jobs' measurements (`source="reference"`).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

import numpy as np

from ..throughputs import JobKey
from .completion import LowRankModel, Selection, fit_low_rank, hard_impute, select_model
from .profiling import cells_to_feature_mask, sample_cells
from .reference import MINE, THEIRS, ReferenceSet

log = logging.getLogger(__name__)
SOURCES = ("completion", "reference")
LOG_FLOOR = float(np.log(0.01))    # completed normalized throughputs stay within [1 %, 100 %]


@dataclass(frozen=True)
class Fingerprint:
    """row: (F,) log normalized throughputs, measured where observed, completed elsewhere;
    feasible: (W, R) whether the job can share each worker type with each reference job;
    distances: (R,) RMS distance of the row to each reference job's row."""

    row: np.ndarray
    observed: np.ndarray
    feasible: np.ndarray
    distances: np.ndarray
    nearest: int

    @property
    def distance(self) -> float:
        return float(self.distances[self.nearest])


class PairModel:
    """Completion model + completed reference rows for one reference set."""

    def __init__(self, ref: ReferenceSet, fraction: float = 0.25, rank: int | None = None,
                 ridge: float | None = None, seed: int = 0):
        self.ref = ref
        X = ref.features()
        self.trivial = ref.size < 2 or not np.isfinite(X).any()
        self.selection: Selection | None = None
        if self.trivial:
            self.model = LowRankModel(np.zeros(X.shape[1]), np.zeros((X.shape[1], 0)), 1.0)
            self.ref_rows = np.zeros_like(X)
            return
        if rank is None or ridge is None:
            def sample(rng: np.random.Generator) -> np.ndarray:
                return cells_to_feature_mask(ref, sample_cells(ref, fraction, rng))

            sel = select_model(X, sample, seed=seed)
            self.selection = sel
            rank = sel.rank if rank is None else rank
            ridge = sel.ridge if ridge is None else ridge
            log.debug("pair model sf=%s: rank %d, ridge %g (validation |log err| %.3f)",
                      ref.keys[0][1], rank, ridge, sel.error)
        self.model = fit_low_rank(X, rank, ridge)
        self.ref_rows = hard_impute(X)
        self._valid = np.isfinite(X)

    # ----- fingerprints ------------------------------------------------------------
    def fingerprint(self, values: np.ndarray, observed: np.ndarray, measured: np.ndarray,
                    feasible: np.ndarray) -> Fingerprint:
        """Complete a profiled row; unmeasured cells take the nearest reference's feasibility."""
        row = np.clip(self.model.fold_in(values, observed), LOG_FLOOR, 0.0)   # sharing never speeds up
        # compare where both rows hold a throughput: skip cells measured as infeasible
        blocked = np.repeat((measured & ~feasible)[:, None, :], 2, axis=1).reshape(-1)
        use = self._valid & ~blocked
        diff = np.where(use, self.ref_rows - row, 0.0)
        distances = np.sqrt((diff ** 2).sum(axis=1) / np.maximum(use.sum(axis=1), 1))
        nearest = int(np.argmin(distances)) if len(distances) else 0
        feas = np.where(measured, feasible, self.ref.feasible_rows()[nearest]) if not self.trivial \
            else np.zeros_like(feasible)
        return Fingerprint(row, observed.copy(), feas, distances, nearest)

    def reference_fingerprint(self, key: JobKey) -> Fingerprint:
        """A job known to be reference job `key`: its own measured row."""
        r = self.ref.index(key)
        distances = np.full(self.ref.size, np.inf)
        distances[r] = 0.0
        observed = self._valid[r] if not self.trivial else np.zeros(self.ref.num_features, bool)
        return Fingerprint(self.ref_rows[r], observed, self.ref.feasible_rows()[r], distances, r)

    def prior(self) -> Fingerprint:
        """Fingerprint of a job with no profile: the reference mean."""
        F, cells = self.ref.num_features, (len(self.ref.worker_types), self.ref.size)
        return self.fingerprint(np.zeros(F), np.zeros(F, bool), np.zeros(cells, bool), np.zeros(cells, bool))

    # ----- pair estimates ------------------------------------------------------------
    def pair_log_norm(self, prints: list[Fingerprint], worker: int, source: str = "completion"
                      ) -> tuple[np.ndarray, np.ndarray]:
        """(n, n) log normalized throughput of job i next to job j, and feasibility.

        Completion: job i's row at the column of j's nearest reference, and j's row at
        the 'theirs' column of i's nearest reference, averaged with weights that trust
        each row in proportion to how close the *partner* is to its reference.
        """
        n = len(prints)
        if self.trivial or n == 0:
            return np.full((n, n), -np.inf), np.zeros((n, n), bool)
        near = np.array([p.nearest for p in prints])
        feas = np.array([p.feasible[worker] for p in prints])                 # (n, R)
        ok = feas[:, near] & feas[:, near].T
        if source == "reference":
            est = self.ref.log_norm[worker][np.ix_(near, near)]
            est = np.where(np.isfinite(est), est, self.ref_rows[near][:, self.ref.column(worker, MINE, near)])
            return est, ok
        rows = np.array([p.row for p in prints])                              # (n, F)
        from_i = rows[:, self.ref.column(worker, MINE, near)]                 # [i, j]: i's row, j's ref
        from_j = rows[:, self.ref.column(worker, THEIRS, near)].T             # [i, j]: j's row, i's ref
        dist = np.array([p.distance for p in prints])
        wi = 1.0 / (dist[None, :] + 1e-3)                                     # trust i's row if j ~ its ref
        wj = 1.0 / (dist[:, None] + 1e-3)
        return (wi * from_i + wj * from_j) / (wi + wj), ok
