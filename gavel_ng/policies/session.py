"""Solving one policy again and again as jobs come and go.

The simulator re-solves after every arrival or completion, and successive problems
differ by a job or two. A `PolicySession` keeps what can be reused between those solves.

Every solve states the policy's objective on the problem the way `solve` does (on the
type-blind problem for an agnostic variant, `spec.agnostic`) and looks at its shape
(`warm_objective`): a max-min over one row per job, each row over that job's own
variables, with no constant term, on single-job rows (no pairs, combinations, job
classes or capacity pools) and without constraints of the policy's own, optionally with
a second phase (`Objective.then`). Such an objective is solved on one HiGHS model kept
alive between solves (`WarmMaxMin`): each job owns a slot (a column per worker type, a
time row and a max-min row) holding the objective's coefficients for it; a leaving
job's columns are fixed at 0 and its max-min row freed, an arriving job takes a free
slot, a job whose coefficients changed has them rewritten, and the dual simplex
restarts from the previous basis. When only arrivals and departures happened since the
last optimum, that optimum is first carried over (arrivals given just enough free
capacity to reach its level) and checked against a duality certificate in numpy
(certificate.py); HiGHS runs only when the check fails (about 3 % of the solves at 3
jobs/h on 36/36/36). The second phase runs in a twin model kept warm the
same way. The result is finished as `solve` finishes it, with solving.py's repair,
leftover fill and (agnostic variants) spreading over types, and reports the policy's
objective. Any other objective and any warm failure go through `solve`.

At about 60 jobs on three types a warm `las` solve takes about 0.8 ms: 0.3 ms in HiGHS,
about 0.2 ms stating the objective (Problem and policy) and 0.2 ms finishing it; a cold
solve takes about 3 ms.
"""

from __future__ import annotations

import logging
import time
from itertools import repeat

import highspy
import numpy as np

from .certificate import certified, level, reach, upper_bound
from .layout import Layout
from .objective import Objective, Solution
from .problem import Problem
from .registry import agnostic_problem, get_policy, objective_value, solve
from .scheduling_problem import SchedulingProblem
from .solving import fill_leftover, hold_level, repair, spread_over_types, then_costs

log = logging.getLogger(__name__)
INF = highspy.kHighsInf
SOLVER = "highs-simplex (warm)"
COEF_RTOL = 1e-12   # a live slot's coefficient is rewritten when it changed by more than this, relative


class PolicySession:
    """A policy solved repeatedly on a cluster whose job set changes a little each time."""

    def __init__(self, policy: str, capacity, warm: bool = True):
        self.spec = get_policy(policy)
        self.capacity = np.asarray(capacity, dtype=float)
        self._warm = WarmMaxMin(self.capacity) if warm else None

    @property
    def name(self) -> str:
        return self.spec.name

    def solve(self, inp: SchedulingProblem, solver: str | None = None) -> Solution:
        if self._warm is not None and solver is None:
            sol = self._solve_warm(inp)
            if sol is not None:
                return sol
        return solve(inp, self.spec.name, solver=solver)

    def _solve_warm(self, inp: SchedulingProblem) -> Solution | None:
        """The warm solve, or None where the objective has another shape or HiGHS failed."""
        start = time.perf_counter()
        if inp.num_jobs == 0:        # nothing to keep: start afresh with the next jobs
            self._warm.reset()
            return None
        if inp.combinations is not None or inp.pairs is not None or inp.counts is not None or inp.pools is not None:
            return None
        seen = Problem(agnostic_problem(inp) if self.spec.agnostic else inp)
        stated = self.spec.fn(seen)
        if isinstance(stated, Solution):   # the policy solves itself: nothing to keep warm
            self._warm = None
            return None
        objective = warm_objective(seen, stated)
        if objective is None:
            return None
        x = self._warm.solve(inp.job_ids, seen, objective)
        if x is None:
            return None
        # what solve_objective does after its LP (then `finish`), and registry._solve_on after that
        if objective.fill:
            x = fill_leftover(seen, repair(seen, x))
        x = repair(seen, x)
        if not self.spec.agnostic:   # the objective when first read: a simulated round never reads it
            sol = Solution(seen.allocation(x), x, None, SOLVER, time.perf_counter() - start)
            sol.defer_objective(lambda: objective.value(x))
            return sol
        # the blind problem has the real one's variables, so spreading and the allocation need only it
        if self.spec.spread:
            x = spread_over_types(seen, x)
        sol = Solution(seen.allocation(x), x, None, SOLVER, time.perf_counter() - start)
        sol.defer_objective(lambda: objective_value(self.spec, Problem(inp), x))
        return sol


def warm_objective(p: Layout, stated: object) -> Objective | None:
    """`stated` if it is an Objective that WarmMaxMin solves on `p` (see the module doc), else None."""
    if not isinstance(stated, Objective) or stated.kind != "maxmin":
        return None
    if p.constraints or p.extra_rows or p.packing is not None or p.members.shape[1] != 1:
        return None
    e = stated.expr
    M = p.num_jobs
    if len(e) != M or M == 0 or e.b.any():
        return None
    A = e.A
    if not (p.var_row[A.indices] == np.repeat(np.arange(M), np.diff(A.indptr))).all():
        return None   # a row reaches another job's variables
    return stated


class WarmMaxMin:
    """max t  s.t.  c_m . x_m >= t,  sum_j x_mj <= 1,  sum_m sf_m x_mj <= cap_j,  0 <= x <= 1;
    then (an objective with `then`) max cost . x  s.t. the same and t >= t* (Objective.then).

    `c` and `cost` come from the Objective, per (job, worker type). Each phase keeps its own
    model: between solves only bounds, rows, columns and the changed coefficients change,
    never the costs of a live slot's columns, so both restart from their previous optimal
    basis (a single model whose costs swap back and forth measured 3x slower per solve)."""

    def __init__(self, capacity: np.ndarray):
        self.cap = np.asarray(capacity, dtype=float)
        self.J = len(self.cap)
        self.then = False
        self.reset()

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

    def reset(self, then: bool | None = None) -> None:
        """Empty models (with a second-phase model when `then`)."""
        self.then = self.then if then is None else then
        self.h = self._model(1.0)
        self.h2 = self._model(0.0) if self.then else None   # t only bounded below, by phase 1
        self.models = [self.h] + ([self.h2] if self.then else [])
        self.carried = getattr(self, "carried", 0)   # solves the certificate answered without HiGHS
        self.slot_of: dict = {}
        self.free_slots: list[int] = []
        self.num_slots = 0
        # per slot, what its columns and rows hold now
        self.coef = np.zeros((0, self.J))
        self.hi = np.zeros((0, self.J))
        self.cost = np.zeros((0, self.J))
        self.sf = np.zeros(0)
        # the last optimum, per slot: its x and its time and max-min rows' duals, the capacity rows'
        # duals and the level t; `proven` while they are an optimal pair for the model as it is now
        self.x = np.zeros((0, self.J))
        self.v = np.zeros(0)
        self.w = np.zeros(0)
        self.u = np.zeros(self.J)
        self.t = 0.0
        self.proven = False

    # ----- slots -------------------------------------------------------------------------
    def _cols(self, s: int) -> np.ndarray:
        return np.arange(1 + s * self.J, 1 + (s + 1) * self.J, dtype=np.int32)

    def _rows(self, s: int) -> tuple[int, int]:
        return self.J + 2 * s, self.J + 2 * s + 1      # time row, max-min row

    def _grow(self) -> None:
        n = max(2 * len(self.sf), 16)
        for name in ("coef", "hi", "cost", "x"):
            old = getattr(self, name)
            new = np.zeros((n, self.J))
            new[:len(old)] = old
            setattr(self, name, new)
        for name in ("sf", "v", "w"):
            old = getattr(self, name)
            new = np.zeros(n)
            new[:len(old)] = old
            setattr(self, name, new)

    def _add(self, job, c: np.ndarray, sf: float, hi: np.ndarray, cost: np.ndarray) -> None:
        """Give `job` a slot in both models; `cost` is its columns' second-phase cost."""
        J = self.J
        reuse = bool(self.free_slots)
        s = self.free_slots.pop() if reuse else self.num_slots
        self.num_slots += 0 if reuse else 1
        if s >= len(self.sf):
            self._grow()
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
            self.h2.changeColsCost(J, cols, cost)
        self.slot_of[job] = s
        self.coef[s], self.hi[s], self.cost[s], self.sf[s] = c, hi, cost, sf
        self.x[s], self.v[s], self.w[s] = 0.0, 0.0, 0.0   # no time yet, multipliers 0 (certificate.py)

    def _update(self, s: int, c: np.ndarray, sf: float, hi: np.ndarray, cost: np.ndarray) -> None:
        """Rewrite what changed in a live slot (see _moved)."""
        cols = self._cols(s)
        mm = self._rows(s)[1]
        moved = _moved(c, self.coef[s])
        for h in self.models:
            for j in np.flatnonzero(moved):
                h.changeCoeff(mm, int(cols[j]), float(c[j]))
            if sf != self.sf[s]:
                for j in range(self.J):
                    h.changeCoeff(j, int(cols[j]), float(sf))
            if (hi != self.hi[s]).any():
                h.changeColsBounds(self.J, cols, np.zeros(self.J), hi)
        if self.h2 is not None and _moved(cost, self.cost[s]).any():
            self.h2.changeColsCost(self.J, cols, cost)
            self.cost[s] = cost
        self.coef[s, moved] = c[moved]
        self.hi[s], self.sf[s] = hi, sf

    def _remove(self, job) -> None:
        s = self.slot_of.pop(job)
        cols = self._cols(s)
        for h in self.models:
            h.changeColsBounds(self.J, cols, np.zeros(self.J), np.zeros(self.J))
            h.changeRowBounds(self._rows(s)[1], -INF, INF)
        if abs(self.w[s]) > 1e-9:   # a bottleneck job left: the level rises, no certificate can carry the old one
            self.proven = False
        self.x[s], self.v[s], self.w[s] = 0.0, 0.0, 0.0
        self.free_slots.append(s)

    def _set_capacity(self, cap: np.ndarray) -> None:
        self.proven = False
        for h in self.models:
            h.changeRowsBounds(self.J, np.arange(self.J, dtype=np.int32), np.full(self.J, -INF), cap.copy())
        self.cap = cap.copy()

    # ----- solve -------------------------------------------------------------------------
    def solve(self, jobs: list, p: Layout, objective: Objective) -> np.ndarray | None:
        """x over p's variables for `objective` (see warm_objective), or None if HiGHS did not
        reach optimality; `jobs` name p's jobs across solves."""
        M, J = p.num_jobs, self.J
        cap = p.input.capacity
        if len(cap) != J:
            return None
        then = objective.then is not None
        if then != self.then:
            self.reset(then)
        if not np.array_equal(cap, self.cap):
            self._set_capacity(cap)
        n = p.num_vars
        A = objective.expr.A
        c = np.zeros((M, J))
        c[p.var_row, p.var_col] = np.bincount(A.indices, weights=A.data, minlength=n)
        hi = np.zeros((M, J))
        hi[p.var_row, p.var_col] = 1.0
        cost = np.zeros((M, J))
        if then:
            cost[p.var_row, p.var_col] = then_costs(p, objective)
        sf = p.row_gpus
        wanted = set(jobs)
        for job in [j for j in self.slot_of if j not in wanted]:
            self._remove(job)
        get = self.slot_of.get
        slots = np.fromiter(map(get, jobs, repeat(-1)), np.int64, M)
        live = np.flatnonzero(slots >= 0)
        ls = slots[live]
        changed = _moved(c[live], self.coef[ls]).any(axis=1) | (hi[live] != self.hi[ls]).any(axis=1) \
            | (sf[live] != self.sf[ls])
        if then:
            changed |= _moved(cost[live], self.cost[ls]).any(axis=1)
        if changed.any():
            self.proven = False
        for i in live[changed]:
            self._update(int(slots[i]), c[i], float(sf[i]), hi[i], cost[i])
        new = np.flatnonzero(slots < 0)
        for i in new:
            self._add(jobs[i], c[i], float(sf[i]), hi[i], cost[i])
            slots[i] = self.slot_of[jobs[i]]
        if not then and self.proven and self._carry_over(slots, slots[new]):
            self.carried += 1
            return self._x(slots, p)
        values = self._run(self.h, "warm max-min LP")
        if values is None:
            self.reset()
            return None
        self._keep(values, then)
        if then:
            self.h2.changeColBounds(0, hold_level(float(values[0]), objective.then_tol), INF)
            second = self._run(self.h2, "warm second phase")
            if second is not None:
                self.x[:self.num_slots] = second[1:].reshape(self.num_slots, J)
            else:  # keep the first phase's optimum; start both models afresh next time
                x = self._x(slots, p)
                self.reset()
                return x
        return self._x(slots, p)

    def _keep(self, values: np.ndarray, then: bool) -> None:
        """Remember a run's optimum (x and duals) for the next solve's certificate (certificate.py)."""
        S, J = self.num_slots, self.J
        self.x[:S] = values[1:].reshape(S, J)
        self.t = float(values[0])
        self.proven = not then   # a second phase moves x off the first phase's certificate
        if self.proven:
            duals = np.asarray(self.h.getSolution().row_dual)
            self.u = duals[:J].copy()
            self.v[:S] = duals[J::2]
            self.w[:S] = duals[J + 1::2]

    def _carry_over(self, slots: np.ndarray, new: np.ndarray) -> bool:
        """The last optimum, without the jobs that left and with the arriving ones given just enough
        free capacity to reach its level, if the certificate proves it optimal (certificate.py);
        else False, and HiGHS runs. Only arrivals and departures happened since it was proven."""
        used = self.sf[slots] @ self.x[slots]     # arriving slots hold no time yet
        for s in new.tolist():
            xs = reach(self.coef[s], self.hi[s], float(self.sf[s]), self.cap - used, self.t)
            if xs is None:
                return False
            self.x[s] = xs
            used += self.sf[s] * xs
        c = self.coef[slots]
        bound = upper_bound(c, self.hi[slots], self.sf[slots], self.cap, self.u, self.v[slots], self.w[slots])
        if not certified(level(c, self.x[slots]), bound):
            return False
        self.t = bound
        return True

    @staticmethod
    def _run(h: highspy.Highs, what: str) -> np.ndarray | None:
        h.run()
        if h.getModelStatus() != highspy.HighsModelStatus.kOptimal:
            log.warning("%s ended %s; rebuilding the warm LP from scratch", what,
                        h.modelStatusToString(h.getModelStatus()))
            return None
        return np.asarray(h.getSolution().col_value)

    def _x(self, slots: np.ndarray, p: Layout) -> np.ndarray:
        """p's variables from the slots' x."""
        return self.x[slots[p.var_row], p.var_col]


def _moved(new: np.ndarray, old: np.ndarray) -> np.ndarray:
    """Where coefficients really changed: more than COEF_RTOL relative. The same objective
    stated on another job set may differ in the last bits (a normalizer summed in another
    order); rewriting those would cost the warm basis for nothing (and only move the LP
    by rounding)."""
    return np.abs(new - old) > COEF_RTOL * np.maximum(np.abs(new), np.abs(old))
