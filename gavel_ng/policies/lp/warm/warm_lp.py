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

from ..layout import Layout
from ..objective import Objective
from ..solving import hold_level, then_costs
from .certificate import bound, certified, job_terms, reach

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
    per solve).

    The slots' arrays say what the models should hold; the models are brought up to date only
    before HiGHS runs (`_flush`): most solves are carried over without a run, and a slot that
    changes several times between runs (a job leaves, another takes its slot) is written once,
    in a few batched calls."""

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
        self.job_at: list = []           # each slot's job, None when free
        self.free_slots: list[int] = []
        self.num_slots = 0
        # per slot, what its columns and rows should hold (a free slot: columns fixed at 0, row freed)
        self.coef = np.zeros((0, self.J))
        self.hi = np.zeros((0, self.J))
        self.cost = np.zeros((0, self.J))
        self.sf = np.zeros(0)
        self.open = np.zeros(0, bool)
        # what the models hold: their number of slots, each one's coefficients and GPUs; and the
        # slots changed since the models were last written
        self.model_slots = 0
        self.model_coef = np.zeros((0, self.J))
        self.model_sf = np.zeros(0)
        self.dirty: dict[int, None] = {}
        # the last optimum, per slot: its x and its time and max-min rows' duals, the capacity rows'
        # duals and the level t; `proven` while they are an optimal pair for the model as it is now.
        # `term` and `lev`: each slot's part of the certificate's bound and its c . x (certificate.py);
        # a free slot holds no time and no multipliers (its term is 0) and has level inf
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

    def _grow(self) -> None:
        n = max(2 * len(self.sf), 16)
        for name in ("coef", "hi", "cost", "x", "model_coef"):
            old = getattr(self, name)
            new = np.zeros((n, self.J))
            new[:len(old)] = old
            setattr(self, name, new)
        for name in ("sf", "v", "w", "term", "lev", "tag", "model_sf", "open"):
            old = getattr(self, name)
            new = np.zeros(n, old.dtype)
            new[:len(old)] = old
            setattr(self, name, new)

    def _add(self, job, c: np.ndarray, sf: float, hi: np.ndarray, cost: np.ndarray | None, tag: int) -> int:
        """Give `job` a slot; `cost` is its columns' second-phase cost."""
        if self.free_slots:
            s = self.free_slots.pop()
            self.job_at[s] = job
        else:
            s = self.num_slots
            self.num_slots += 1
            if s >= len(self.sf):
                self._grow()
            self.job_at.append(job)
        self.slot_of[job] = s
        self.coef[s], self.hi[s], self.sf[s], self.tag[s], self.open[s] = c, hi, sf, tag, True
        if cost is not None:
            self.cost[s] = cost
        # no time yet, multipliers 0: no part of the bound (certificate.py)
        self.x[s], self.v[s], self.w[s], self.term[s], self.lev[s] = 0.0, 0.0, 0.0, 0.0, 0.0
        self.dirty[s] = None
        return s

    def _update(self, s: int, c: np.ndarray, sf: float, hi: np.ndarray, cost: np.ndarray | None, tag: int) -> None:
        """Rewrite what changed in a live slot (see _moved)."""
        moved = _moved(c, self.coef[s])
        self.coef[s, moved] = c[moved]
        if cost is not None and _moved(cost, self.cost[s]).any():
            self.cost[s] = cost
        self.hi[s], self.sf[s], self.tag[s] = hi, sf, tag
        self.dirty[s] = None

    def _remove(self, s: int) -> None:
        del self.slot_of[self.job_at[s]]
        self.job_at[s] = None
        self.open[s] = False
        if self.w[s] > 1e-9:   # a bottleneck job left: the level rises, no certificate can carry the old one
            self.proven = False
        self.x[s], self.v[s], self.w[s], self.term[s], self.lev[s] = 0.0, 0.0, 0.0, 0.0, np.inf
        self.free_slots.append(s)
        self.dirty[s] = None

    def _set_capacity(self, cap: np.ndarray) -> None:
        self.proven = False
        for h in self.models:
            h.changeRowsBounds(self.J, np.arange(self.J, dtype=np.int32), np.full(self.J, -INF), cap.copy())
        self.cap = cap.copy()

    def _flush(self) -> None:
        """Write the changed slots into the models: new slots' rows and columns in one call each,
        every changed slot's bounds in one call, coefficients one by one where they differ."""
        J, S, old = self.J, self.num_slots, self.model_slots
        changed = [s for s in self.dirty if s < old]
        if changed:
            cols = (1 + J * np.array(changed, np.int32)[:, None] + np.arange(J, dtype=np.int32)).ravel()
            upper = (self.hi[changed] * self.open[changed, None]).ravel()
            rows = J + 2 * np.array(changed, np.int32) + 1
            row_lo = np.where(self.open[changed], 0.0, -INF)
            edits = [(s, j) for s in changed for j in (self.coef[s] != self.model_coef[s]).nonzero()[0].tolist()]
            resized = [s for s in changed if self.sf[s] != self.model_sf[s]]
            for h in self.models:
                for s, j in edits:
                    h.changeCoeff(J + 2 * s + 1, 1 + s * J + j, float(self.coef[s, j]))
                for s in resized:
                    for j in range(J):
                        h.changeCoeff(j, 1 + s * J + j, float(self.sf[s]))
                h.changeColsBounds(len(cols), cols, np.zeros(len(cols)), upper)
                h.changeRowsBounds(len(rows), rows, row_lo, np.full(len(rows), INF))
            if self.h2 is not None:
                self.h2.changeColsCost(len(cols), cols, self.cost[changed].ravel())
        if S > old:
            n = S - old
            new = np.arange(old, S)
            row_lo = np.column_stack([np.full(n, -INF), np.where(self.open[new], 0.0, -INF)]).ravel()
            row_hi = np.tile([1.0, INF], n)
            row_starts = np.repeat(np.arange(n, dtype=np.int32), 2)   # one entry (t, -1) per max-min row
            starts = np.arange(0, 3 * J * n, 3, dtype=np.int32)
            index = np.empty((n, J, 3), np.int32)
            index[:, :, 0] = np.arange(J)
            index[:, :, 1] = (J + 2 * new)[:, None]
            index[:, :, 2] = (J + 2 * new + 1)[:, None]
            value = np.empty((n, J, 3))
            value[:, :, 0] = self.sf[new, None]
            value[:, :, 1] = 1.0
            value[:, :, 2] = self.coef[new]
            upper = (self.hi[new] * self.open[new, None]).ravel()
            for h in self.models:
                h.addRows(2 * n, row_lo, row_hi, n, row_starts, np.zeros(n, np.int32), np.full(n, -1.0))
                cost = self.cost[new].ravel() if h is self.h2 else np.zeros(J * n)
                h.addCols(J * n, cost, np.zeros(J * n), upper, 3 * J * n, starts, index.ravel(), value.ravel())
        self.model_coef[:S] = self.coef[:S]
        self.model_sf[:S] = self.sf[:S]
        self.model_slots = S
        self.dirty.clear()

    # ----- solve -------------------------------------------------------------------------
    def lookup(self, jobs: list) -> np.ndarray:
        """Each job's slot, -1 for those without one."""
        return np.fromiter(map(self.slot_of.get, jobs, repeat(-1)), np.int64, len(jobs))

    def tags(self, slots: np.ndarray) -> np.ndarray:
        """The tag each slot's row was given (`solve`), -1 where none or no slot."""
        if not len(self.tag):
            return np.full(len(slots), -1)
        return np.where(slots >= 0, self.tag.take(slots), -1)   # (-1 takes some slot's tag, then dropped)

    def solve(self, jobs: list, c: np.ndarray, hi: np.ndarray, sf: np.ndarray, cap: np.ndarray,
              cost: np.ndarray | None = None, then_tol: float = 0.0, tags: np.ndarray | None = None,
              slots: np.ndarray | None = None, pick: np.ndarray | None = None) -> np.ndarray | None:
        """The optimal (M, J) x for rows `c`, bounds `hi`, GPUs per job `sf` (M,) and capacity `cap`,
        then (with `cost`) the second phase; None if HiGHS did not reach optimality. `jobs` name
        the rows across solves. `tags` (M,) name the rows: rows of one tag are the same, always,
        so that a live slot whose tag did not change needs no comparison (rows kept per kind of
        job, session.JobRows); without them every row is compared. `slots`: `lookup(jobs)`.
        `pick` (M,): `c`, `hi` and `cost` are tables of rows, job i's being row pick[i] (only the
        rows of new and changed jobs are read)."""
        M, J = len(jobs), self.J
        if len(cap) != J or c.shape[1] != J:
            return None
        then = cost is not None
        if then != self.then:
            self.reset(then)
            slots = None
        if cap.tolist() != self.cap.tolist():
            self._set_capacity(cap)
        if slots is None:
            slots = self.lookup(jobs)
        new = (slots < 0).nonzero()[0]
        if len(self.slot_of) > M - len(new):   # some jobs left: their slots are the open ones not looked up
            gone = self.open[:self.num_slots].copy()
            gone[slots[slots >= 0]] = False
            for s in gone.nonzero()[0].tolist():
                self._remove(s)
        if pick is None:
            pick = np.arange(M)
        if tags is not None:   # (a new job's slot -1 reads some slot's tag: skipped below)
            upd = (tags != self.tag.take(slots)).nonzero()[0] if len(self.tag) else new
        else:
            live = (slots >= 0).nonzero()[0]
            upd = live[self._changed(slots[live], c[pick[live]], hi[pick[live]], sf[live],
                                     None if cost is None else cost[pick[live]])]
        for i in upd.tolist():
            s = int(slots[i])
            if s >= 0:
                self.proven = False
                k = pick[i]
                self._update(s, c[k], float(sf[i]), hi[k], None if cost is None else cost[k],
                             -1 if tags is None else int(tags[i]))
        for i in new.tolist():
            k = pick[i]
            slots[i] = self._add(jobs[i], c[k], float(sf[i]), hi[k], None if cost is None else cost[k],
                                 -1 if tags is None else int(tags[i]))
        if not then and self.proven and self._carry_over(new, slots[new]):
            self.carried += 1
            return self.x.take(slots, 0)
        self.runs += 1
        self._flush()
        first = self._run(self.h, "warm max-min LP")
        if first is None:
            self.reset()
            return None
        self._keep(first, then)
        if then:
            self.h2.changeColBounds(0, hold_level(self.t, then_tol), INF)
            second = self._run(self.h2, "warm second phase")
            if second is None:   # keep the first phase's optimum; start both models afresh next time
                x = self.x.take(slots, 0)
                self.reset()
                return x
            self.x[:self.num_slots] = np.asarray(second.col_value)[1:].reshape(self.num_slots, J)
        return self.x.take(slots, 0)

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

    def _keep(self, solution, then: bool) -> None:
        """Remember a run's optimum (x and duals) for the next solve's certificate (certificate.py)."""
        S, J = self.num_slots, self.J
        values = np.asarray(solution.col_value)
        self.x[:S] = np.minimum(np.maximum(values[1:].reshape(S, J), 0.0), self.hi[:S])   # (within HiGHS's tolerance)
        self.x[:S][~self.open[:S]] = 0.0
        self.t = float(values[0])
        self.proven = not then   # a second phase moves x off the first phase's certificate
        if self.proven:
            duals = np.asarray(solution.row_dual)
            self.u = np.abs(duals[:J])
            self.cap_u = float(self.cap @ self.u)
            self.v[:S] = np.abs(duals[J::2])
            self.w[:S] = np.abs(duals[J + 1::2])
            self.term[:S] = job_terms(self.coef[:S], self.hi[:S], self.sf[:S], self.u, self.v[:S], self.w[:S])
            self.lev[:S] = (self.coef[:S] * self.x[:S]).sum(axis=1)
            free = self.free_slots
            self.v[free], self.w[free], self.term[free], self.lev[free] = 0.0, 0.0, 0.0, np.inf

    def _carry_over(self, new: np.ndarray, new_slots: np.ndarray) -> bool:
        """The last optimum, without the jobs that left and with the arriving ones given just enough
        free capacity to reach its level, if the certificate proves it optimal (certificate.py);
        else False, and HiGHS runs. Only arrivals and departures happened since it was proven.
        Free slots hold no time and no part of the bound, so the sums run over every slot."""
        S = self.num_slots
        if len(new):
            used = self.sf[:S] @ self.x[:S]     # arriving slots hold no time yet
            for s in new_slots.tolist():
                xs = reach(self.coef[s], self.hi[s], float(self.sf[s]), self.cap - used, self.t)
                if xs is None:
                    return False
                self.x[s] = xs
                self.lev[s] = self.coef[s] @ xs
                used += self.sf[s] * xs
        d = bound(self.cap_u, self.term[:S], self.w[:S])
        if not certified(float(self.lev[:S].min()) if S else np.inf, d):
            return False
        self.t = d
        return True

    @staticmethod
    def _run(h: highspy.Highs, what: str):
        """The model's solution (HighsSolution) after a run, None unless optimal."""
        h.run()
        if h.getModelStatus() != highspy.HighsModelStatus.kOptimal:
            log.warning("%s ended %s; rebuilding the warm LP from scratch", what,
                        h.modelStatusToString(h.getModelStatus()))
            return None
        return h.getSolution()


def _moved(new: np.ndarray, old: np.ndarray) -> np.ndarray:
    """Where coefficients really changed: more than COEF_RTOL relative. The same objective
    stated on another job set may differ in the last bits (a normalizer summed in another
    order); rewriting those would cost the warm basis for nothing (and only move the LP
    by rounding)."""
    return np.abs(new - old) > COEF_RTOL * np.maximum(np.abs(new), np.abs(old))
