"""Solving one policy again and again as jobs come and go.

The simulator and the scheduler service re-solve after every arrival or completion,
and successive problems differ by a job or two. A `PolicySession` keeps what can be
reused between those solves. For the max-min policies (las, las_pareto and their
agnostic forms) it keeps one
HiGHS model alive: each job owns a slot (J columns, a time row and a max-min row); a
leaving job's columns are fixed at 0 and its max-min row freed, an arriving job takes a
free slot, and the dual simplex restarts from the previous basis (about 0.5 ms a solve
at 100 jobs against 4-5 ms cold). For `las_pareto` (fairness.py) it then runs the
second phase, the minimum held and the total normalized throughput maximized, in a
twin model that is kept warm the same way. Every other policy, and any warm failure,
goes through `solve`. The dense
helpers below are the single-job form of the repair, leftover fill and type-blind
spreading that solving.py applies to general layouts.
"""

from __future__ import annotations

import logging
import time

import highspy
import numpy as np

from ..allocation import Allocation
from .inputs import SchedulingProblem
from .problem import Solution
from .registry import agnostic_throughputs, get_policy, solve
from .solving import hold_level

log = logging.getLogger(__name__)
INF = highspy.kHighsInf
# warm max-min policies: name -> (type-blind, second phase)
WARM = {"las": (False, False), "las_agnostic": (True, False), "las_pareto": (False, True),
        "las_pareto_agnostic": (True, True)}


class PolicySession:
    """A policy solved repeatedly on a cluster whose job set changes a little each time."""

    def __init__(self, policy: str, capacity, warm: bool = True):
        self.spec = get_policy(policy)
        self.capacity = np.asarray(capacity, dtype=float)
        self._warm = WarmMaxMin(self.capacity, *WARM[self.spec.name]) \
            if warm and self.spec.name in WARM else None

    @property
    def name(self) -> str:
        return self.spec.name

    def solve(self, inp: SchedulingProblem, solver: str | None = None) -> Solution:
        if self._warm is not None and inp.combinations is None and getattr(inp, "pairs", None) is None \
                and solver is None:
            start = time.perf_counter()
            x = self._warm.solve(inp.job_ids, inp.throughputs, inp.scale_factors, inp.weights)
            if x is not None:
                return self._solution(inp, x, start)
        return solve(inp, self.spec.name, solver=solver)

    def _solution(self, inp: SchedulingProblem, x: np.ndarray, start: float) -> Solution:
        sf = inp.scale_factors
        alloc = Allocation([(j,) for j in inp.job_ids], list(inp.worker_types), x, sf.astype(float),
                           self.capacity.copy())
        usable = (inp.throughputs > 0) & (sf[:, None] <= self.capacity[None, :])
        T = inp.throughputs
        thr_equal = T @ (self.capacity / self.capacity.sum())
        level = sf * (T * x).sum(axis=1) / (inp.weights * np.maximum(thr_equal, 1e-300))
        objective = float(level.min()) if len(level) else None
        return Solution(alloc, x[usable], objective, "highs-simplex (warm)", time.perf_counter() - start)



class WarmMaxMin:
    """max t  s.t.  c_m . x_m >= t,  sum_j x_mj <= 1,  sum_m sf_m x_mj <= cap_j,  0 <= x <= 1;
    then (`then=True`) max sum_m w_m c_m . x_m  s.t. the same and t >= t* (Objective.then).

    Each phase keeps its own model: between solves only bounds, rows and columns change,
    never costs, so both restart from their previous optimal basis (a single model whose
    costs swap back and forth measured 3x slower per solve)."""

    def __init__(self, capacity: np.ndarray, agnostic: bool, then: bool = True, then_tol: float = 0.0):
        self.cap = np.asarray(capacity, dtype=float)
        self.J = len(self.cap)
        self.agnostic = agnostic
        self.then = then
        self.then_tol = then_tol
        self._build()

    def _model(self, t_cost: float) -> highspy.Highs:
        J = self.J
        h = highspy.Highs()
        h.silent()
        h.setOptionValue("solver", "simplex")
        h.setOptionValue("presolve", "off")
        h.changeObjectiveSense(highspy.ObjSense.kMaximize)
        h.addCol(t_cost, -INF, INF, 0, np.zeros(0, np.int32), np.zeros(0))      # t
        h.addRows(J, np.full(J, -INF), self.cap.copy(), 0, np.zeros(J, np.int32), np.zeros(0, np.int32),
                  np.zeros(0))
        return h

    def _build(self) -> None:
        self.h = self._model(1.0)
        self.h2 = self._model(0.0) if self.then else None   # t only bounded below, by phase 1
        self.models = [self.h] + ([self.h2] if self.then else [])
        self.slot_of: dict = {}
        self.free_slots: list[int] = []
        self.num_slots = 0

    # ----- slots -------------------------------------------------------------------------
    def _cols(self, s: int) -> np.ndarray:
        return np.arange(1 + s * self.J, 1 + (s + 1) * self.J, dtype=np.int32)

    def _rows(self, s: int) -> tuple[int, int]:
        return self.J + 2 * s, self.J + 2 * s + 1      # time row, max-min row

    def _add(self, job, c: np.ndarray, sf: float, usable: np.ndarray, cost: np.ndarray) -> None:
        """Give `job` a slot in both models; `cost` is its columns' second-phase cost."""
        J = self.J
        hi = np.where(usable, 1.0, 0.0)
        reuse = bool(self.free_slots)
        s = self.free_slots.pop() if reuse else self.num_slots
        self.num_slots += 0 if reuse else 1
        cols = self._cols(s)
        tr, mm = self._rows(s)
        for h in self.models:
            if reuse:
                for j in range(J):
                    h.changeCoeff(j, int(cols[j]), float(sf))
                    h.changeCoeff(mm, int(cols[j]), float(c[j]))
                h.changeColsBounds(J, cols, np.zeros(J), hi)
                h.changeRowBounds(mm, 0.0, INF)
            else:
                h.addRows(2, np.array([-INF, 0.0]), np.array([1.0, INF]), 1, np.array([0, 0], np.int32),
                          np.array([0], np.int32), np.array([-1.0]))
                starts = np.arange(0, 3 * J, 3, dtype=np.int32)
                index = np.array([[j, tr, mm] for j in range(J)], dtype=np.int32).ravel()
                value = np.array([[sf, 1.0, c[j]] for j in range(J)], dtype=float).ravel()
                h.addCols(J, np.zeros(J), np.zeros(J), hi, len(index), starts, index, value)
        if self.h2 is not None:
            self.h2.changeColsCost(J, cols, np.asarray(cost, dtype=float))
        self.slot_of[job] = s

    def _remove(self, job) -> None:
        s = self.slot_of.pop(job)
        cols = self._cols(s)
        for h in self.models:
            h.changeColsBounds(self.J, cols, np.zeros(self.J), np.zeros(self.J))
            h.changeRowBounds(self._rows(s)[1], -INF, INF)
        self.free_slots.append(s)

    # ----- solve -------------------------------------------------------------------------
    def solve(self, jobs: list, T: np.ndarray, sf: np.ndarray, w: np.ndarray) -> np.ndarray | None:
        """Allocation (len(jobs), J) for these jobs, or None if HiGHS did not reach optimality."""
        T_pol = agnostic_throughputs(T) if self.agnostic else T
        usable = (T_pol > 0) & (sf[:, None] <= self.cap[None, :])
        thr_equal = T_pol @ (self.cap / self.cap.sum())
        c = T_pol * (sf / (w * np.maximum(thr_equal, 1e-300)))[:, None]
        wanted = set(jobs)
        for job in [j for j in self.slot_of if j not in wanted]:
            self._remove(job)
        for i, job in enumerate(jobs):
            if job not in self.slot_of:
                self._add(job, c[i], float(sf[i]), usable[i], c[i] * w[i])
        values = self._run(self.h, "warm max-min LP")
        if values is None:
            self._build()
            return None
        if self.h2 is not None:
            self.h2.changeColBounds(0, hold_level(float(values[0]), self.then_tol), INF)
            second = self._run(self.h2, "warm second phase")
            if second is None:  # keep the first phase's optimum; start both models afresh next time
                x = self._slots(values, jobs)
                self._build()
                return self._finish(x, usable, T_pol, sf)
            values = second
        return self._finish(self._slots(values, jobs), usable, T_pol, sf)

    @staticmethod
    def _run(h: highspy.Highs, what: str) -> np.ndarray | None:
        h.run()
        if h.getModelStatus() != highspy.HighsModelStatus.kOptimal:
            log.warning("%s ended %s; rebuilding the warm LP from scratch", what,
                        h.modelStatusToString(h.getModelStatus()))
            return None
        return np.asarray(h.getSolution().col_value)

    def _slots(self, values: np.ndarray, jobs: list) -> np.ndarray:
        return values[1:].reshape(self.num_slots, self.J)[[self.slot_of[j] for j in jobs]]

    def _finish(self, x: np.ndarray, usable: np.ndarray, T_pol: np.ndarray, sf: np.ndarray) -> np.ndarray:
        gain = T_pol / np.maximum(np.where(usable, T_pol, 0.0).max(axis=1, keepdims=True), 1e-300)
        x = repair_dense(fill_dense(repair_dense(x, sf, self.cap), usable, gain, sf, self.cap), sf, self.cap)
        if self.agnostic:
            x = repair_dense(spread_dense(x, usable, self.cap), sf, self.cap)
        return x


def repair_dense(x: np.ndarray, sf: np.ndarray, cap: np.ndarray) -> np.ndarray:
    """Clip solver noise: rows to at most 1, types to their capacity."""
    x = np.clip(x, 0.0, 1.0)
    x[x < 1e-9] = 0.0
    x = x / np.maximum(x.sum(axis=1, keepdims=True), 1.0)
    used = sf @ x
    return x * np.where(used > cap, cap / np.maximum(used, 1e-300), 1.0)[None, :]


def fill_dense(x: np.ndarray, usable: np.ndarray, gain: np.ndarray, sf: np.ndarray,
               cap: np.ndarray) -> np.ndarray:
    """Idle GPU time to jobs with idle time: types with most left first, best relative speed first."""
    slack = 1.0 - x.sum(axis=1)
    left = cap - sf @ x
    if left.max(initial=0.0) <= 1e-9 or slack.max(initial=0.0) <= 1e-9:
        return x  # nothing idle: the common case under load
    x = x.copy()
    for j in np.argsort(-left):
        cand = np.flatnonzero(usable[:, j])
        cand = cand[np.argsort(-gain[cand, j], kind="stable")]
        want = np.maximum(slack[cand], 0.0) * sf[cand]
        before = np.cumsum(want) - want
        gpus = np.clip(np.minimum(want, left[j] - before), 0.0, None)
        add = gpus / sf[cand]
        x[cand, j] += add
        slack[cand] -= add
        left[j] -= gpus.sum()
    return x


def spread_dense(x: np.ndarray, usable: np.ndarray, cap: np.ndarray) -> np.ndarray:
    """Type-blind placement: each job's share split over its usable types by GPU count."""
    pool = np.where(usable, cap[None, :], 0.0)
    return x.sum(axis=1, keepdims=True) * pool / np.maximum(pool.sum(axis=1, keepdims=True), 1e-300)
