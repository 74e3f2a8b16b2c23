"""Reference jobs: the pre-profiled jobs a new job is compared against.

A reference set holds, for the job keys of one scale factor (pairs only form between
equal scale factors), every reference pair's throughputs per worker type, stored as
log normalized throughputs: log(throughput when sharing / throughput alone). Sharing
slows both jobs by a factor, so the log makes the effects additive and comparable
across models whose absolute steps/s differ by 100x.

A job's *feature row* lists, per worker type, its log normalized throughput next to
each reference job ("mine") and that reference job's next to it ("theirs"). One
profiled pair fills both of its cells. Infeasible pairs (the table's (0, 0): the two
jobs do not fit on one GPU) are missing values, not throughputs, and are kept in a
separate feasibility mask.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..throughputs import UNCONSOLIDATED, JobKey, ThroughputTable

MINE, THEIRS = 0, 1


def family(job_type: str) -> str:
    """Model family of a job type: 'ResNet-50 (batch size 64)' -> 'ResNet-50'."""
    return job_type.split(" (batch size", 1)[0].strip()


@dataclass(frozen=True)
class ReferenceSet:
    """Pair measurements between reference jobs of one scale factor.

    log_norm[w, a, b] = log(a's steps/s next to b / a's steps/s alone) on worker w,
    NaN where the pair is infeasible; feasible[w, a, b] says whether it can share.
    """

    keys: tuple[JobKey, ...]
    worker_types: tuple[str, ...]
    isolated: np.ndarray      # (R, W) steps/s alone
    log_norm: np.ndarray      # (W, R, R)
    feasible: np.ndarray      # (W, R, R) bool

    @classmethod
    def from_table(cls, table: ThroughputTable, scale_factor: int = 1, worker_types: list[str] | None = None,
                   exclude_types: tuple[str, ...] = ()) -> ReferenceSet:
        """Reference jobs = the table's keys of this scale factor, minus `exclude_types`."""
        workers = tuple(worker_types if worker_types is not None else table.worker_types)
        keys = tuple(k for k in table.job_keys if k[1] == scale_factor and k[0] not in exclude_types)
        iso = table.matrix(list(keys), list(workers))
        R, W = len(keys), len(workers)
        thr = np.zeros((W, R, R))
        for w, name in enumerate(workers):
            per = table.pairs.get(name, {})
            for a, ka in enumerate(keys):
                row = per.get(ka, {})
                thr[w, a] = [row.get(kb, (0.0, 0.0))[0] for kb in keys]
        alone = iso.T[:, :, None]                                   # (W, R, 1)
        feasible = (thr > 0) & (alone > 0)
        feasible &= feasible.transpose(0, 2, 1)                     # both sides must run
        with np.errstate(divide="ignore", invalid="ignore"):
            log_norm = np.where(feasible, np.log(np.minimum(thr / alone, 1.0)), np.nan)
        return cls(keys, workers, iso, log_norm, feasible)

    # ----- shapes ------------------------------------------------------------------
    @property
    def size(self) -> int:
        return len(self.keys)

    @property
    def num_features(self) -> int:
        return 2 * len(self.worker_types) * len(self.keys)

    def index(self, key: JobKey) -> int:
        return self.keys.index(key)

    def column(self, worker: int, side: int, ref: np.ndarray | int) -> np.ndarray | int:
        """Feature column of (worker, side, reference job); vectorized over `ref`."""
        return (worker * 2 + side) * self.size + ref

    def features(self) -> np.ndarray:
        """(R, F) feature rows of the reference jobs themselves (NaN where infeasible)."""
        mine = self.log_norm                                        # [w, a, r]
        theirs = self.log_norm.transpose(0, 2, 1)                   # [w, a, r] = log_norm[w, r, a]
        return np.stack([mine, theirs], axis=1).transpose(2, 0, 1, 3).reshape(self.size, -1)

    def feasible_rows(self) -> np.ndarray:
        """(R, W, R): whether reference a can share worker w with reference r."""
        return self.feasible.transpose(1, 0, 2)

    def cells(self) -> list[tuple[int, int]]:
        """All (worker index, reference index) cells a profile may measure."""
        return [(w, r) for w in range(len(self.worker_types)) for r in range(self.size)]


def true_row(table: ThroughputTable, key: JobKey, ref: ReferenceSet) -> tuple[np.ndarray, np.ndarray]:
    """A job's exact feature row and (W, R) feasibility against `ref`, read from a full table.

    This is the ground truth a profile samples from and an accuracy report scores against.
    """
    W, R = len(ref.worker_types), ref.size
    row = np.full((W, 2, R), np.nan)
    feas = np.zeros((W, R), bool)
    for w, name in enumerate(ref.worker_types):
        mine_alone = table.get(key, name)
        for r, other in enumerate(ref.keys):
            pair = table.get_pair(key, other, name)
            if pair is None or mine_alone <= 0 or ref.isolated[r, w] <= 0 or min(pair) <= 0:
                continue
            feas[w, r] = True
            row[w, MINE, r] = np.log(min(pair[0] / mine_alone, 1.0))
            row[w, THEIRS, r] = np.log(min(pair[1] / ref.isolated[r, w], 1.0))
    return row.reshape(-1), feas


@dataclass(frozen=True)
class IsolatedReference:
    """Isolated steps/s of every reference key on every worker name (twins included).

    log_iso is NaN where the job cannot run there (or was not measured).
    """

    keys: tuple[JobKey, ...]
    workers: tuple[str, ...]
    log_iso: np.ndarray       # (K, W)

    @classmethod
    def from_table(cls, table: ThroughputTable, exclude_types: tuple[str, ...] = ()) -> IsolatedReference:
        keys = tuple(k for k in table.job_keys if k[0] not in exclude_types)
        workers = tuple(table.isolated)
        m = np.full((len(keys), len(workers)), np.nan)
        for j, w in enumerate(workers):
            per = table.isolated[w]
            m[:, j] = [per.get(k, np.nan) for k in keys]
        with np.errstate(divide="ignore", invalid="ignore"):
            log_iso = np.where(m > 0, np.log(m), np.nan)
        return cls(keys, workers, log_iso)

    def base_workers(self) -> list[str]:
        return [w for w in self.workers if not w.endswith(UNCONSOLIDATED)]
