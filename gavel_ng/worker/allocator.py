"""The deployment's Allocator: the configured policy over live capacity and measured throughputs."""

from __future__ import annotations

import logging
import math
import time

import numpy as np

from ..mechanism import AllocationRows, JobView
from ..policies import SchedulingProblem, get_policy, solve
from .state import ClusterState

log = logging.getLogger(__name__)


class PolicyAllocator:
    """The SchedulerLoop's Allocator: the policy over live capacity and measured throughputs."""

    def __init__(self, state: ClusterState, policy: str):
        self.state = state
        self.spec = get_policy(policy)
        self.prices = None
        prices = state.config.prices
        if prices and all(w in prices for w in state.worker_types):
            self.prices = np.array([prices[w] for w in state.worker_types], dtype=float)

    def allocate(self, jobs: list[int], now: float) -> AllocationRows:
        st = self.state
        J = len(st.worker_types)
        cap = st.capacity()
        with st.lock:
            specs = [(m, st.jobs[m]) for m in jobs if m in st.jobs]
            keys = [j.key for _, j in specs]
            T = st.table.matrix(keys)
            sf = np.array([j.spec.scale_factor for _, j in specs], dtype=float)
            runnable = ((T > 0) & (sf[:, None] <= cap[None, :])).any(axis=1) if specs else np.zeros(0, bool)
            idx = np.flatnonzero(runnable)
            ids = [specs[i][0] for i in idx]
            jobs_ = [specs[i][1] for i in idx]
        if not ids:
            st.allocation = ([], np.zeros((0, J)))
            return AllocationRows([], np.zeros((0, J)), np.zeros(0))
        start = time.perf_counter()
        problem = SchedulingProblem.build(
            [str(m) for m in ids], st.worker_types, cap, T[idx], scale_factors=sf[idx],
            weights=[j.spec.weight for j in jobs_],
            steps_remaining=[max(j.spec.steps - j.steps_done, 0) for j in jobs_],
            steps_total=[j.spec.steps for j in jobs_],
            time_since_arrival=[max(0.0, now - j.submitted) for j in jobs_],
            slo_s=[j.spec.slo_s if j.spec.slo_s is not None else math.inf for j in jobs_], prices=self.prices)
        sol = solve(problem, self.spec.name)
        if sol.warnings:
            log.warning("solve: %s", "; ".join(sol.warnings))
        a = sol.allocation
        rows = [tuple(int(m) for m in r) for r in a.rows]
        st.allocation = (rows, np.asarray(a.values, dtype=float))
        st.store.event("solve", round_no=st.round_no, jobs=len(ids), seconds=round(time.perf_counter() - start, 4),
                       capacity=cap.tolist())
        return AllocationRows(rows, np.asarray(a.values, dtype=float), np.asarray(a.scale_factors, dtype=float))

    def job_view(self, jobs: list[int]) -> JobView:
        st = self.state
        with st.lock:
            present = [m for m in jobs if m in st.jobs]
            keys = [st.jobs[m].key for m in present]
            return JobView(present, [k[1] for k in keys], st.table.matrix(keys))
