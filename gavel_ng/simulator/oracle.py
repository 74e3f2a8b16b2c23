"""The oracle: the policy believes the throughput table the simulated jobs run at.

A ThroughputSource (gavel_ng.allocator) over the executor's job arrays: a job's row is its
key's (job type, scale factor) row of the table. With placement columns, multi-GPU jobs
get the table's unconsolidated throughput on each `TYPE_unconsolidated` twin (single-GPU
jobs none). Pairs: the pair table by key (`PairTable.from_table`, one class per key of the
table) is built once per simulation; each solve gets only the classes of its jobs (the rows
and columns of `frac` they use), so the LP never carries partner variables for classes
nobody belongs to.
"""

from __future__ import annotations

import numpy as np

from ..pairs import PairTable
from ..throughputs import UNCONSOLIDATED, ThroughputTable
from .executor import JobArrays


class TableThroughputs:
    fixed = True           # a job's throughputs never change

    def __init__(self, jobs: JobArrays, table: ThroughputTable, columns: list[str], pairs: bool = False):
        self.jobs = jobs
        self.columns = list(columns)
        twins = [c.endswith(UNCONSOLIDATED) for c in self.columns]
        self.T_cols = jobs.T                  # (keys, columns)
        if any(twins):
            multi = np.array([k[1] > 1 for k in jobs.key_list])[:, None]
            self.T_cols = np.hstack([jobs.T, np.where(multi, np.nan_to_num(jobs.Tu), 0.0)])
        self.pairs_by_key = PairTable.from_table(table, jobs.key_list, self.columns) if pairs else None

    def isolated(self, jobs: list[int], columns: list[str]) -> np.ndarray:
        self._check(columns)
        return self.T_cols.take(self.jobs.key[np.asarray(jobs, dtype=np.int64)], 0)

    def pair_table(self, jobs: list[int], columns: list[str], T: np.ndarray) -> PairTable:
        """The pair table of these jobs: only the classes (keys) present, renumbered."""
        self._check(columns)
        if self.pairs_by_key is None:
            raise ValueError("TableThroughputs built without pairs (pairs=True for space sharing)")
        present, cls = np.unique(self.jobs.key[np.asarray(jobs, dtype=np.int64)], return_inverse=True)
        full = self.pairs_by_key
        return PairTable(np.asarray(cls).ravel(), full.frac[np.ix_(present, present)])

    def _check(self, columns: list[str]) -> None:
        if list(columns) != self.columns:
            raise ValueError(f"TableThroughputs has columns {self.columns}, not {list(columns)}")
