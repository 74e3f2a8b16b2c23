"""How jobs share a GPU: pair throughputs by class, as fractions of the isolated ones.

A plain data type that the throughput sources fill (the oracle table, the measured table,
the online estimator) and that a policy's input carries (`SchedulingProblem.pairs`); the
LP layout built from it is gavel_ng.policies.lp.packing.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from .errors import InputError

USEFUL_EPS = 1e-9


@dataclass(frozen=True)
class PairTable:
    """How jobs share a GPU, by class.

    job_class[m] is job m's class (jobs of one class pair identically: same job type and
    scale factor); frac[c, d, j] is the fraction of its isolated steps/s on column j that a
    job of class c keeps while sharing a GPU with a job of class d (0: cannot share).
    """

    job_class: np.ndarray          # (M,) int
    frac: np.ndarray               # (C, C, J)
    class_names: tuple[str, ...] = ()

    @property
    def num_classes(self) -> int:
        return self.frac.shape[0]

    def useful(self) -> np.ndarray:
        """(C, C, J): both can share and together they beat time slicing (sum of fractions > 1)."""
        f = self.frac
        ft = f.transpose(1, 0, 2)
        return (f > 0) & (ft > 0) & (f + ft > 1 + USEFUL_EPS)

    def subset(self, jobs) -> PairTable:
        return replace(self, job_class=self.job_class[np.asarray(jobs, dtype=int)])

    def agnostic(self) -> PairTable:
        """Blind to worker types, not to packing: a useful pair keeps, on every column where it
        is useful, its mean fraction over those columns (same useful set, so the same layout)."""
        u = self.useful()
        cnt = u.sum(axis=2, keepdims=True)
        mean = np.where(u, self.frac, 0.0).sum(axis=2, keepdims=True) / np.maximum(cnt, 1)
        return replace(self, frac=np.where(u, np.broadcast_to(mean, self.frac.shape), self.frac))

    def validate(self, num_jobs: int, num_cols: int) -> None:
        f = self.frac
        if f.ndim != 3 or f.shape[0] != f.shape[1] or f.shape[2] != num_cols:
            raise InputError("pairs.frac", f.shape, "must be classes x classes x worker types")
        if self.job_class.shape != (num_jobs,):
            raise InputError("pairs.job_class", self.job_class.shape, "must give every job a class")
        if num_jobs and (self.job_class.min() < 0 or self.job_class.max() >= f.shape[0]):
            raise InputError("pairs.job_class", int(self.job_class.max()), "class index out of range")
        if not np.isfinite(f).all() or (f < 0).any():
            raise InputError("pairs.frac", float(f[~np.isfinite(f) | (f < 0)][0]), "must be finite and >= 0")

    @classmethod
    def from_table(cls, table, keys, columns) -> PairTable:
        """Classes = distinct (job type, scale factor) keys; fractions from the table's pair entries.

        `columns` are the problem's worker-type columns; a column without pair entries in
        the table (e.g. an `_unconsolidated` twin the table does not pair) gets none.
        """
        uniq = list(dict.fromkeys(keys))
        index = {k: i for i, k in enumerate(uniq)}
        C, J = len(uniq), len(columns)
        frac = np.zeros((C, C, J))
        for j, w in enumerate(columns):
            per = table.pairs.get(w, {})
            iso = table.isolated.get(w, {})
            mine = np.array([iso.get(k, 0.0) for k in uniq])
            for c, key in enumerate(uniq):
                for other, (a, b) in per.get(key, {}).items():
                    d = index.get(other)
                    if d is None or other[1] != key[1]:
                        continue
                    if mine[c] > 0:
                        frac[c, d, j] = a / mine[c]
                    if mine[d] > 0 and (other not in per or key not in per[other]):  # one side measured
                        frac[d, c, j] = b / mine[d]
        return cls(np.array([index[k] for k in keys], dtype=int), frac,
                   tuple(f"{k[0]} x{k[1]}" for k in uniq))
