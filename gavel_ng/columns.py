"""The columns of an allocation or a round decision: one description for policies, mechanism and planners.

A column is where a job can run: a worker type (`pool`, the type whose GPUs it draws on),
how many GPUs an entry of it takes (`gpus`: 0 for the job's own scale factor, K > 0 for a
configuration of K GPUs, what an adaptive job is given), and whether such an entry may be
split over servers (`spread`: the `TYPE_unconsolidated` twin of a placement-sensitive
allocation). The plain columns are the worker types themselves.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .throughputs import UNCONSOLIDATED


@dataclass(frozen=True)
class Columns:
    worker_types: tuple[str, ...]
    pool: np.ndarray      # (C,) worker type index of each column
    gpus: np.ndarray      # (C,) 0: the job's scale factor; K > 0: K GPUs (a configuration)
    spread: np.ndarray    # (C,) bool: an entry may run split over servers

    @classmethod
    def types(cls, worker_types, placement_sensitive: bool = False) -> Columns:
        """One column per worker type, then (placement-sensitive) an `_unconsolidated` twin of each."""
        J = len(worker_types)
        pool = np.r_[np.arange(J), np.arange(J)] if placement_sensitive else np.arange(J)
        spread = np.r_[np.zeros(J, bool), np.ones(J, bool)] if placement_sensitive else np.zeros(J, bool)
        return cls(tuple(worker_types), pool.astype(np.int64), np.zeros(len(pool), np.int64), spread)

    @classmethod
    def configurations(cls, worker_types, capacity, gpu_counts) -> Columns:
        """The worker types (a fixed job takes its scale factor there), then every (type, K GPUs) with
        K in `gpu_counts` and at most the type's capacity, a type's in increasing K. `gpu_counts` is
        one list of counts for every type, or (a list of lists, one per type) each type's own."""
        counts = list(gpu_counts)
        per_type = bool(counts) and all(np.ndim(c) == 1 for c in counts)
        if per_type and len(counts) != len(worker_types):
            raise ValueError(f"gpu_counts: {len(counts)} lists of counts for {len(worker_types)} worker types")
        pool, gpus = list(range(len(worker_types))), [0] * len(worker_types)
        for t in range(len(worker_types)):
            for k in sorted(set(int(k) for k in (counts[t] if per_type else counts))):
                if k <= capacity[t]:
                    pool.append(t)
                    gpus.append(k)
        return cls(tuple(worker_types), np.array(pool, np.int64), np.array(gpus, np.int64),
                   np.zeros(len(pool), bool))

    @property
    def num(self) -> int:
        return len(self.pool)

    @property
    def plain(self) -> bool:
        """Whether the columns are exactly the worker types, in order."""
        return self.num == len(self.worker_types) and not self.spread.any() and not self.gpus.any()

    @property
    def names(self) -> list[str]:
        """`TYPE`, `TYPE_unconsolidated` or `TYPExK`."""
        out = []
        for p, g, s in zip(self.pool.tolist(), self.gpus.tolist(), self.spread.tolist()):
            w = self.worker_types[p]
            out.append(f"{w}x{g}" if g else w + UNCONSOLIDATED if s else w)
        return out

    def needs(self, scale_factors) -> np.ndarray:
        """(jobs, C) GPUs an entry of each job takes on each column."""
        sf = np.asarray(scale_factors, float).reshape(-1, 1)
        return np.where(self.gpus[None, :] > 0, self.gpus[None, :].astype(float), sf)
