"""The simulator's allocator: the active jobs' arrays handed to a PolicySession.

The policy input is built from the arrays the executor keeps, without Job objects on
the hot path; the session reuses work between successive solves.

Space sharing (`--space-sharing`, a `NAME_packed` policy, or `gandiva`): the pair table
by job key (`PairTable.from_table`, one class per (job type, scale factor) key of the
throughput table) is built once per simulation; each solve gets only the classes of its
active jobs (the rows and columns of `frac` they use), so the LP never carries partner
variables for classes nobody belongs to. Placement (`--placement`): every worker type
gets an `_unconsolidated` twin column on the same GPUs, where multi-GPU jobs run at the
table's unconsolidated throughput (single-GPU jobs have no variables there).
With an estimator (`--estimate-throughputs`) the policy sees the estimator's isolated
and pair throughputs instead of the table's (see estimated.py).
"""

from __future__ import annotations

import logging
import math

import numpy as np

from ..cluster import Cluster
from ..mechanism import AllocationRows
from ..policies import SchedulingProblem
from ..policies.packing import PairTable
from ..policies.registry import needs_pairs, space_sharing_name
from ..policies.session import PolicySession
from ..throughputs import UNCONSOLIDATED, ThroughputTable

log = logging.getLogger(__name__)
class PolicyAllocator:
    """Builds the policy input from the executor's job arrays and solves it."""

    def __init__(self, policy: str, cluster: Cluster, jobs, warm: bool = True, *,
                 table: ThroughputTable | None = None, space_sharing: bool = False, placement: bool = False,
                 estimator=None):
        self.cluster = cluster
        self.jobs = jobs                      # simulator.executor.JobArrays
        policy = space_sharing_name(policy, space_sharing)
        self.packed = needs_pairs(policy)
        self.placement = placement
        self.estimator = estimator            # simulator.estimated.EstimatedThroughputs or None
        workers = cluster.worker_types
        J = len(workers)
        cap = cluster.capacity()
        prices = cluster.prices()
        self.columns = list(workers)
        self.pools = None
        if placement:
            self.columns += [w + UNCONSOLIDATED for w in workers]
            self.pools = np.r_[np.arange(J), np.arange(J)]
            cap = np.r_[cap, cap]
            prices = None if prices is None else np.r_[prices, prices]
        self.capacity = cap
        self.prices = prices
        self.warnings = 0
        # warm max-min LP only for single-job rows on plain columns, with fixed throughputs per job
        # (it keeps a job's coefficients from its arrival; estimates change as measurements come)
        self.session = PolicySession(policy, cap, warm=warm and not self.packed and not placement
                                     and estimator is None)
        self.spec = self.session.spec
        self.T_cols = jobs.T                  # (keys, columns): what the policy sees per key (oracle)
        if placement:
            multi = np.array([k[1] > 1 for k in jobs.key_list])[:, None]
            self.T_cols = np.hstack([jobs.T, np.where(multi, np.nan_to_num(jobs.Tu), 0.0)])
        self.pairs_by_key = None
        if self.packed and estimator is None:
            if table is None:
                raise ValueError("space sharing needs the throughput table's pair entries")
            self.pairs_by_key = PairTable.from_table(table, jobs.key_list, self.columns)

    @property
    def is_agnostic(self) -> bool:
        return self.spec.agnostic

    @property
    def col_pool(self) -> np.ndarray | None:
        return self.pools

    def allocate(self, jobs: list[int], now: float) -> AllocationRows:
        ja = self.jobs
        idx = np.asarray(jobs, dtype=np.int64)
        pairs = None
        if self.estimator is not None:
            T = self.estimator.isolated(jobs, self.columns)
            if self.packed:
                pairs = self.estimator.pair_table(jobs, self.columns, T)
        else:
            keys = ja.key[idx]
            T = self.T_cols[keys]
            if self.pairs_by_key is not None:
                pairs = self._pairs(keys)
        sf = ja.sf[idx].astype(float)
        inp = SchedulingProblem.build(
            [str(j) for j in jobs], self.columns, self.capacity, T, scale_factors=sf,
            weights=ja.weight[idx], steps_remaining=ja.remaining[idx], steps_total=ja.steps[idx],
            time_since_arrival=np.maximum(0.0, now - ja.arrival[idx]), slo_s=ja.slo[idx], prices=self.prices,
            pairs=pairs, pools=self.pools)
        sol = self.session.solve(inp)
        if sol.warnings:
            self.warnings += 1
            log.debug("solve at t=%.0f: %s", now, "; ".join(sol.warnings))
        a = sol.allocation
        singles = len(a.rows) == len(jobs) and all(len(r) == 1 for r in a.rows)
        rows = [(j,) for j in jobs] if singles else [tuple(int(m) for m in r) for r in a.rows]
        return AllocationRows(rows, a.values, np.asarray(a.scale_factors, dtype=float))

    def _pairs(self, keys: np.ndarray) -> PairTable:
        """The pair table of these jobs: only the classes (keys) present, renumbered."""
        present, cls = np.unique(keys, return_inverse=True)
        full = self.pairs_by_key
        return PairTable(np.asarray(cls).ravel(), full.frac[np.ix_(present, present)])


def default_prices(worker_types: list[str]) -> dict[str, float]:
    """$/GPU-hour of the GPU types gavel_ng.profiles knows (its list prices); others unknown."""
    from ..profiles import GPUS

    return {w: GPUS[w.lower()].dollars_per_hour for w in worker_types if w.lower() in GPUS}


def finite_or_none(v: float) -> float | None:
    return None if v is None or not math.isfinite(v) else float(v)
