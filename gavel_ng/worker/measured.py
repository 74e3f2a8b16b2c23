"""Throughputs the policy sees: the configured table corrected by real measurements.

A measured (job type, scale factor, worker type) entry replaces the table's value. The
types a job type has not run on yet are scaled by how far its measurements are from the
table on the types it did run on (geometric mean of measured/table), so that a model
table and real measurements never mix on different scales: the table keeps the relative
speeds of the types, the measurements set the absolute level.
"""

from __future__ import annotations

import math

import numpy as np

from ..throughputs import JobKey, ThroughputTable

MIN_WEIGHT = 0.3     # weight of a new sample once a few are in (exponential moving average)


class MeasuredTable:
    def __init__(self, base: ThroughputTable, worker_types: list[str], enabled: bool = True):
        self.base = base
        self.worker_types = list(worker_types)
        self.enabled = enabled
        # (job type, sf, worker type, consolidated) -> (steps/s, samples)
        self.values: dict[tuple[str, int, str, bool], tuple[float, int]] = {}
        self._cache: dict[JobKey, np.ndarray] = {}

    def load(self, rows: list[tuple[str, int, str, bool, float, int]]) -> None:
        for job_type, sf, w, cons, value, n in rows:
            self.values[(job_type, sf, w, cons)] = (value, n)
        self._cache.clear()

    def record(self, job_type: str, sf: int, worker_type: str, consolidated: bool,
               steps_per_s: float) -> tuple[float, int]:
        """Fold in one measurement; returns the new (value, samples) to persist."""
        key = (job_type, sf, worker_type, consolidated)
        old, n = self.values.get(key, (0.0, 0))
        weight = max(MIN_WEIGHT, 1.0 / (n + 1))
        value = steps_per_s if n == 0 else (1 - weight) * old + weight * steps_per_s
        self.values[key] = (value, n + 1)
        self._cache.pop((job_type, sf), None)
        return value, n + 1

    def row(self, key: JobKey) -> np.ndarray:
        """Steps/s of one (job type, scale factor) on each worker type (consolidated)."""
        if key in self._cache:
            return self._cache[key]
        base = np.array([self.base.get(key, w) for w in self.worker_types])
        out = base.copy()
        if self.enabled:
            measured = {j: self.values[(key[0], key[1], w, True)][0] for j, w in enumerate(self.worker_types)
                        if (key[0], key[1], w, True) in self.values}
            ratios = [math.log(v / base[j]) for j, v in measured.items() if base[j] > 0 and v > 0]
            if ratios:
                out = base * math.exp(sum(ratios) / len(ratios))
            for j, v in measured.items():
                if base[j] > 0:          # a type the table says cannot run the job stays so
                    out[j] = v
        self._cache[key] = out
        return out

    def matrix(self, keys: list[JobKey]) -> np.ndarray:
        if not keys:
            return np.zeros((0, len(self.worker_types)))
        return np.vstack([self.row(k) for k in keys])

    def measured(self) -> dict[str, float]:
        """'job type|sf|worker type' -> steps/s (consolidated measurements), for status."""
        return {f"{t}|{sf}|{w}": v for (t, sf, w, cons), (v, _) in sorted(self.values.items()) if cons}
