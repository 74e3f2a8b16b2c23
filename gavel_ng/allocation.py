"""Allocations: the fraction of wall-clock time each job (or job pair) spends on each type."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


class AllocationError(ValueError):
    """An allocation breaks a validity constraint."""


@dataclass
class Allocation:
    """Labelled matrix: rows are jobs or job combinations, columns worker types."""

    rows: list[tuple]            # each row's job ids (SchedulingProblem.job_ids: ints or a caller's names)
    worker_types: list[str]
    values: np.ndarray           # (rows, worker types)
    scale_factors: np.ndarray    # (rows,)
    capacity: np.ndarray         # (worker types,)
    pools: np.ndarray | None = None  # (worker types,) columns with one pool index share its GPUs

    @staticmethod
    def label(row: tuple) -> str:
        return "+".join(map(str, row))

    def to_dict(self, digits: int | None = None) -> dict[str, dict[str, float]]:
        vals = self.values if digits is None else np.round(self.values, digits)
        return {self.label(r): {w: float(v) for w, v in zip(self.worker_types, vals[i])}
                for i, r in enumerate(self.rows)}

    def to_pandas(self):
        import pandas as pd

        return pd.DataFrame(self.values, index=[self.label(r) for r in self.rows],
                            columns=list(self.worker_types))

    def job_totals(self) -> dict:
        """Total time fraction of each job over all its rows and types."""
        totals: dict = {}   # job id -> time fraction
        for i, row in enumerate(self.rows):
            for job in row:
                totals[job] = totals.get(job, 0.0) + float(self.values[i].sum())
        return totals

    def check(self, tol: float = 1e-6) -> Allocation:
        """Raise AllocationError naming the first broken validity constraint; return self."""
        x = self.values
        if x.shape != (len(self.rows), len(self.worker_types)):
            raise AllocationError(f"shape {x.shape} does not match rows x worker types")
        if not np.isfinite(x).all():
            raise AllocationError("allocation has non-finite entries")
        if (x < -tol).any() or (x > 1 + tol).any():
            i, j = np.argwhere((x < -tol) | (x > 1 + tol))[0]
            raise AllocationError(f"X[{self.label(self.rows[i])}, {self.worker_types[j]}] = {x[i, j]:.6g} "
                                  "is outside [0, 1]")
        for job, total in self.job_totals().items():
            if total > 1 + tol:
                raise AllocationError(f"job {job} gets {total:.6g} > 1 of the time")
        used = self.scale_factors @ x
        pools = np.arange(len(self.worker_types)) if self.pools is None else np.asarray(self.pools)
        # columns of one pool (v100 and v100_unconsolidated) draw on the same GPUs
        pool_used = np.bincount(pools, weights=used)
        first = {int(p): j for j, p in reversed(list(enumerate(pools)))}
        for pool, j in first.items():
            cap = self.capacity[j]
            if pool_used[pool] > cap + tol * max(1.0, cap):
                names = "+".join(w for w, q in zip(self.worker_types, pools) if q == pool)
                raise AllocationError(f"{names} uses {pool_used[pool]:.6g} GPUs of {cap:g}")
        return self
