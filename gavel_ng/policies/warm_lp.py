"""The max-min LP kept alive between solves in HiGHS (`WarmMaxMin`), over dense (job x type) rows.

    max t  s.t.  c_m . x_m >= t,  sum_j x_mj <= 1,  sum_m sf_m x_mj <= cap_j,  0 <= x_mj <= hi_mj;

then (with second-phase costs) max cost . x s.t. the same and t >= t* (Objective.then). Each job
owns a slot (a column per worker type, a time row and a max-min row) holding its coefficients; a
leaving job's columns are fixed at 0 and its max-min row freed, an arriving job takes a free slot,
a job whose coefficients changed has them rewritten, and the dual simplex restarts from the
previous basis. When only arrivals and departures happened since the last optimum, that optimum
is first carried over (arrivals given just enough free capacity to reach its level) and checked
against a duality certificate (certificate.py), kept per slot so that the check costs a few
reductions over the live slots; HiGHS runs only when it fails. The caller (session.py) says what
the rows are: stated afresh on a Problem, or kept per job.
"""

from __future__ import annotations

import logging
from itertools import repeat

import highspy
import numpy as np

from .certificate import bound, certified, job_terms, reach
from .layout import Layout
from .objective import Objective
from .solving import hold_level, then_costs

log = logging.getLogger(__name__)
INF = highspy.kHighsInf
COEF_RTOL = 1e-12   # a live slot's coefficient is rewritten when it changed by more than this, relative


def warm_objective(p: Layout, stated: object) -> Objective | None:
    """`stated` if it is an Objective that WarmMaxMin solves on `p`, else None: a max-min over one
    row per job, each row over that job's own variables, with no constant term, on single-job
    rows (no pairs, combinations or capacity pools' extra rows) and without constraints of the
    policy's own, optionally with a second phase (`Objective.then`)."""
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


def dense_rows(p: Layout, objective: Objective) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
    """A warm objective's (jobs x types) max-min coefficients, variable bounds (1 where a job may
    run) and second-phase costs (None without a second phase)."""
    shape = (p.num_jobs, len(p.input.worker_types))
    A = objective.expr.A
    c = np.zeros(shape)
    c[p.var_row, p.var_col] = np.bincount(A.indices, weights=A.data, minlength=p.num_vars)
    hi = np.zeros(shape)
    hi[p.var_row, p.var_col] = 1.0
    if objective.then is None:
        return c, hi, None
    cost = np.zeros(shape)
    cost[p.var_row, p.var_col] = then_costs(p, objective)
    return c, hi, cost


class WarmMaxMin:
    """The LP above on HiGHS models kept between solves (see the module doc).

    Each phase keeps its own model: between solves only bounds, rows, columns and the changed
    coefficients change, never the costs of a live slot's columns, so both restart from their
    previous optimal basis (a single model whose costs swap back and forth measured 3x slower
    per solve)."""

    def __init__(self, capacity: np.ndarray):
        self.cap = np.asarray(capacity, dtype=float)
        self.J = len(self.cap)
        self.then = False
        self.carried = 0   # solves the certificate answered without HiGHS
        self.runs = 0      # solves that ran HiGHS
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
        self.slot_of: dict = {}
        self.free_slots: list[int] = []
        self.num_slots = 0
        # per slot, what its columns and rows hold now
        self.coef = np.zeros((0, self.J))
        self.hi = np.zeros((0, self.J))
        self.cost = np.zeros((0, self.J))
        self.sf = np.zeros(0)
        # the last optimum, per slot: its x and its time and max-min rows' duals, the capacity rows'
        # duals and the level t; `proven` while they are an optimal pair for the model as it is now.
        # `term` and `lev`: each slot's part of the certificate's bound and its c . x (certificate.py)
        self.x = np.zeros((0, self.J))
        self.v = np.zeros(0)
        self.w = np.zeros(0)
        self.term = np.zeros(0)
        self.lev = np.zeros(0)
        self.tag = np.zeros(0, np.int64)   # what each slot's row is, as the caller named it (-1: unnamed)
        self.u = np.zeros(self.J)
        self.cap_u = 0.0
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
        for name in ("sf", "v", "w", "term", "lev", "tag"):
            old = getattr(self, name)
            new = np.zeros(n, old.dtype)
            new[:len(old)] = old
            setattr(self, name, new)

    def _add(self, job, c: np.ndarray, sf: float, hi: np.ndarray, cost: np.ndarray | None, tag: int) -> int:
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
            if reuse:   # the slot's columns as its last job left them: rewrite what differs
                for j in np.flatnonzero(c != self.coef[s]).tolist():
                    h.changeCoeff(mm, int(cols[j]), float(c[j]))
                if sf != self.sf[s]:
                    for j in range(J):
                        h.changeCoeff(j, int(cols[j]), float(sf))
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
            self.cost[s] = cost
        self.slot_of[job] = s
        self.coef[s], self.hi[s], self.sf[s], self.tag[s] = c, hi, sf, tag
        # no time yet, multipliers 0: no part of the bound (certificate.py)
        self.x[s], self.v[s], self.w[s], self.term[s], self.lev[s] = 0.0, 0.0, 0.0, 0.0, 0.0
        return s

    def _update(self, s: int, c: np.ndarray, sf: float, hi: np.ndarray, cost: np.ndarray | None, tag: int) -> None:
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
        self.hi[s], self.sf[s], self.tag[s] = hi, sf, tag

    def _remove(self, job) -> None:
        s = self.slot_of.pop(job)
        cols = self._cols(s)
        for h in self.models:
            h.changeColsBounds(self.J, cols, np.zeros(self.J), np.zeros(self.J))
            h.changeRowBounds(self._rows(s)[1], -INF, INF)
        if self.w[s] > 1e-9:   # a bottleneck job left: the level rises, no certificate can carry the old one
            self.proven = False
        self.x[s], self.v[s], self.w[s], self.term[s], self.lev[s] = 0.0, 0.0, 0.0, 0.0, 0.0
        self.free_slots.append(s)

    def _set_capacity(self, cap: np.ndarray) -> None:
        self.proven = False
        for h in self.models:
            h.changeRowsBounds(self.J, np.arange(self.J, dtype=np.int32), np.full(self.J, -INF), cap.copy())
        self.cap = cap.copy()

    # ----- solve -------------------------------------------------------------------------
    def lookup(self, jobs: list) -> np.ndarray:
        """Each job's slot, -1 for those without one."""
        return np.fromiter(map(self.slot_of.get, jobs, repeat(-1)), np.int64, len(jobs))

    def tags(self, slots: np.ndarray) -> np.ndarray:
        """The tag each slot's row was given (`solve`), -1 where none or no slot."""
        if not len(self.tag):
            return np.full(len(slots), -1)
        return np.where(slots >= 0, self.tag[slots], -1)   # (-1 picks some slot's tag, then dropped)

    def solve(self, jobs: list, c: np.ndarray, hi: np.ndarray, sf: np.ndarray, cap: np.ndarray,
              cost: np.ndarray | None = None, then_tol: float = 0.0, tags: np.ndarray | None = None,
              slots: np.ndarray | None = None) -> np.ndarray | None:
        """The optimal (M, J) x for rows `c`, bounds `hi`, GPUs per job `sf` (M,) and capacity `cap`,
        then (with `cost`) the second phase; None if HiGHS did not reach optimality. `jobs` name
        the rows across solves. `tags` (M,) name the rows: rows of one tag are the same, always,
        so that a live slot whose tag did not change needs no comparison (rows kept per kind of
        job, session.JobRows); without them every row is compared. `slots`: `lookup(jobs)`."""
        M, J = c.shape
        if len(cap) != J:
            return None
        then = cost is not None
        if then != self.then:
            self.reset(then)
            slots = None
        if (cap != self.cap).any():
            self._set_capacity(cap)
        if slots is None:
            slots = self.lookup(jobs)
        live = slots >= 0
        idx = np.flatnonzero(live)
        if len(self.slot_of) > len(idx):   # some jobs left
            wanted = set(jobs)
            for job in [j for j in self.slot_of if j not in wanted]:
                self._remove(job)
        ls = slots[idx]
        if tags is not None:
            upd = idx[tags[idx] != self.tag[ls]]
        else:
            upd = idx[self._changed(ls, c[idx], hi[idx], sf[idx], None if cost is None else cost[idx])]
        if len(upd):
            self.proven = False
        for i in upd.tolist():
            self._update(int(slots[i]), c[i], float(sf[i]), hi[i], None if cost is None else cost[i],
                         -1 if tags is None else int(tags[i]))
        new = np.flatnonzero(~live)
        for i in new.tolist():
            slots[i] = self._add(jobs[i], c[i], float(sf[i]), hi[i], None if cost is None else cost[i],
                                 -1 if tags is None else int(tags[i]))
        if not then and self.proven and self._carry_over(slots, slots[new]):
            self.carried += 1
            return self.x[slots]
        self.runs += 1
        values = self._run(self.h, "warm max-min LP")
        if values is None:
            self.reset()
            return None
        self._keep(values, then)
        if then:
            self.h2.changeColBounds(0, hold_level(float(values[0]), then_tol), INF)
            second = self._run(self.h2, "warm second phase")
            if second is None:   # keep the first phase's optimum; start both models afresh next time
                x = self.x[slots]
                self.reset()
                return x
            self.x[:self.num_slots] = second[1:].reshape(self.num_slots, J)
        return self.x[slots]

    def _changed(self, ls: np.ndarray, c: np.ndarray, hi: np.ndarray, sf: np.ndarray,
                 cost: np.ndarray | None) -> np.ndarray:
        """Which live rows' coefficients, bounds, GPUs or costs differ from what their slots hold
        (rows kept per job come back exactly as they were: one comparison settles them)."""
        differ = (c != self.coef[ls]).any(axis=1) | (hi != self.hi[ls]).any(axis=1) | (sf != self.sf[ls])
        if cost is not None:
            differ |= (cost != self.cost[ls]).any(axis=1)
        if not differ.any():
            return differ
        d = np.flatnonzero(differ)
        ld = ls[d]
        changed = _moved(c[d], self.coef[ld]).any(axis=1) | (hi[d] != self.hi[ld]).any(axis=1) \
            | (sf[d] != self.sf[ld])
        if cost is not None:
            changed |= _moved(cost[d], self.cost[ld]).any(axis=1)
        differ[d] = changed
        return differ

    def _keep(self, values: np.ndarray, then: bool) -> None:
        """Remember a run's optimum (x and duals) for the next solve's certificate (certificate.py)."""
        S, J = self.num_slots, self.J
        self.x[:S] = np.minimum(np.maximum(values[1:].reshape(S, J), 0.0), self.hi[:S])   # (within HiGHS's tolerance)
        self.t = float(values[0])
        self.proven = not then   # a second phase moves x off the first phase's certificate
        if self.proven:
            duals = np.asarray(self.h.getSolution().row_dual)
            self.u = np.abs(duals[:J])
            self.cap_u = float(self.cap @ self.u)
            self.v[:S] = np.abs(duals[J::2])
            self.w[:S] = np.abs(duals[J + 1::2])
            self.term[:S] = job_terms(self.coef[:S], self.hi[:S], self.sf[:S], self.u, self.v[:S], self.w[:S])
            self.lev[:S] = (self.coef[:S] * self.x[:S]).sum(axis=1)

    def _carry_over(self, slots: np.ndarray, new: np.ndarray) -> bool:
        """The last optimum, without the jobs that left and with the arriving ones given just enough
        free capacity to reach its level, if the certificate proves it optimal (certificate.py);
        else False, and HiGHS runs. Only arrivals and departures happened since it was proven."""
        if len(new):
            used = self.sf[slots] @ self.x[slots]     # arriving slots hold no time yet
            for s in new.tolist():
                xs = reach(self.coef[s], self.hi[s], float(self.sf[s]), self.cap - used, self.t)
                if xs is None:
                    return False
                self.x[s] = xs
                self.lev[s] = self.coef[s] @ xs
                used += self.sf[s] * xs
        d = bound(self.cap_u, self.term[slots], self.w[slots])
        if not certified(float(self.lev[slots].min(initial=np.inf)), d):
            return False
        self.t = d
        return True

    @staticmethod
    def _run(h: highspy.Highs, what: str) -> np.ndarray | None:
        h.run()
        if h.getModelStatus() != highspy.HighsModelStatus.kOptimal:
            log.warning("%s ended %s; rebuilding the warm LP from scratch", what,
                        h.modelStatusToString(h.getModelStatus()))
            return None
        return np.asarray(h.getSolution().col_value)


def _moved(new: np.ndarray, old: np.ndarray) -> np.ndarray:
    """Where coefficients really changed: more than COEF_RTOL relative. The same objective
    stated on another job set may differ in the last bits (a normalizer summed in another
    order); rewriting those would cost the warm basis for nothing (and only move the LP
    by rounding)."""
    return np.abs(new - old) > COEF_RTOL * np.maximum(np.abs(new), np.abs(old))
