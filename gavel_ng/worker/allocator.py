"""The deployment's Allocator: the configured policy over live capacity and what was measured.

What the policy believes about throughputs comes from one place, `ClusterState.view_*`:
the throughput table corrected by measurements (`MeasuredTable`), or, with
`"estimator": true`, the online estimator fed by the same measurements. With space
sharing the policy is NAME_packed and also gets pair fractions from that view.
"""

from __future__ import annotations

import logging
import math
import time

import numpy as np

from ..mechanism import AllocationRows, JobView
from ..policies import SchedulingProblem, get_policy, solve
from ..policies.registry import needs_pairs, space_sharing_name
from .state import ClusterState

log = logging.getLogger(__name__)


class PolicyAllocator:
    """The SchedulerLoop's Allocator: the policy over live capacity and measured throughputs."""

    def __init__(self, state: ClusterState, policy: str, space_sharing: bool = False):
        self.state = state
        self.spec = get_policy(space_sharing_name(policy, space_sharing))
        self.packed = needs_pairs(self.spec.name)
        self.prices = None
        prices = state.config.prices
        if prices and all(w in prices for w in state.worker_types):
            self.prices = np.array([prices[w] for w in state.worker_types], dtype=float)

    def allocate(self, jobs: list[int], now: float) -> AllocationRows:
        st = self.state
        J = len(st.worker_types)
        cap = st.capacity()
        with st.lock:
            present = [m for m in jobs if m in st.jobs]
            T = st.view_isolated(present)
            sf = np.array([st.jobs[m].spec.scale_factor for m in present], dtype=float)
            runnable = ((T > 0) & (sf[:, None] <= cap[None, :])).any(axis=1) if present else np.zeros(0, bool)
            idx = np.flatnonzero(runnable)
            ids = [present[i] for i in idx]
            specs = [st.jobs[m] for m in ids]
            pairs = st.view_pairs(ids, T[idx]) if self.packed and ids else None
        if not ids:
            st.allocation = ([], np.zeros((0, J)))
            return AllocationRows([], np.zeros((0, J)), np.zeros(0))
        start = time.perf_counter()
        problem = SchedulingProblem.build(
            [str(m) for m in ids], st.worker_types, cap, T[idx], scale_factors=sf[idx],
            weights=[j.spec.weight for j in specs],
            steps_remaining=[max(j.spec.steps - j.steps_done, 0) for j in specs],
            steps_total=[j.spec.steps for j in specs],
            time_since_arrival=[max(0.0, now - j.submitted) for j in specs],
            slo_s=[j.spec.slo_s if j.spec.slo_s is not None else math.inf for j in specs], prices=self.prices,
            pairs=pairs)
        sol = solve(problem, self.spec.name)
        if sol.warnings:   # each already logged where it arose (repeats collapsed, see gavel_ng.logs)
            log.debug("solve: %s", "; ".join(sol.warnings))
        a = sol.allocation
        rows = [tuple(int(m) for m in r) for r in a.rows]
        st.allocation = (rows, np.asarray(a.values, dtype=float))
        st.store.event("solve", round_no=st.round_no, jobs=len(ids), seconds=round(time.perf_counter() - start, 4),
                       capacity=cap.tolist(), pairs=sum(len(r) == 2 for r in rows))
        return AllocationRows(rows, np.asarray(a.values, dtype=float), np.asarray(a.scale_factors, dtype=float))

    def job_view(self, jobs: list[int]) -> JobView:
        st = self.state
        with st.lock:
            present = [m for m in jobs if m in st.jobs]
            return JobView(present, [st.jobs[m].spec.scale_factor for m in present], st.view_isolated(present))
