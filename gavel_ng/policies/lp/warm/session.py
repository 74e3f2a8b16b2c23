"""Solving one policy again and again as jobs come and go.

The simulator re-solves after every arrival or completion, and successive problems
differ by a job or two. A `PolicySession` keeps what can be reused between those solves.

An objective of the warm shape (warm_lp.warm_objective: a max-min over one row per job, each
over that job's own variables, optionally with a second phase) is solved on one HiGHS model
kept alive between solves (warm_lp.WarmMaxMin), whose certificate answers most solves without
running HiGHS at all. What remains is Python around it, and the session keeps that small in
one of two ways:

- a policy declared `per_job` (its row for a job depends on that job alone: las, las_pareto)
  is stated once per kind of job, on that job alone, and its rows are kept (`JobRows`): a
  solve looks its jobs up, and finishes on a `JobGrid` (the variables, without a Problem);
- any other policy is stated on the whole problem at every solve (on the type-blind problem
  for an agnostic variant) and its shape checked there.

Both finish as `solve` does: solving.py's repair, leftover fill and (agnostic variants)
spreading over types; the objective is computed when first read. Any other objective and any
warm failure go through `solve`.

Measured in the simulation at 3 jobs/h on 36/36/36 (experiments/README.md, "Simulator speed"),
CPU per solve: about 0.19 ms on kept rows, against 0.30 ms stating the whole problem each time;
about 0.13 ms since the warm LP writes HiGHS only before its runs and the leftover fill sorts
only a pool that runs out.
"""

from __future__ import annotations

import logging
import time

import numpy as np

from ...input.fields import call_policy
from ...input.scheduling_problem import SchedulingProblem
from ...registry import get_policy
from ..layout import Vars
from ..objective import Solution
from ..pipeline import agnostic_problem, objective_value, solve, spread_as_declared
from ..problem import Problem
from ..solving import fill_leftover, repair
from .warm_lp import WarmMaxMin, dense_rows, warm_objective

__all__ = ["PolicySession", "JobRows", "JobGrid", "warm_objective", "SOLVER"]

log = logging.getLogger(__name__)
SOLVER = "highs-simplex (warm)"


class PolicySession:
    """A policy solved repeatedly on a cluster whose job set changes a little each time."""

    def __init__(self, policy: str, capacity, warm: bool = True, options: dict | None = None):
        self.spec = get_policy(policy).bind(options)
        self.options = dict(options or {})
        self.capacity = np.asarray(capacity, dtype=float)
        self._warm = WarmMaxMin(self.capacity) if warm else None
        self._rows = JobRows(self.spec) if warm and self.spec.per_job else None

    @property
    def name(self) -> str:
        return self.spec.name

    @property
    def is_warm(self) -> bool:
        """Whether solves start from the last one (False from the start, or once a problem showed that
        the policy is not of the warm shape)."""
        return self._warm is not None

    @property
    def carried(self) -> int:
        """Solves the certificate answered without running HiGHS (warm_lp.WarmMaxMin.carried)."""
        return self._warm.carried if self._warm is not None else 0

    @property
    def rows_stated(self) -> int | None:
        """Per-job rows the policy was asked to state (each kind of job once, JobRows); None: not kept per job."""
        return self._rows.stated if self._rows is not None else None

    def solve(self, inp: SchedulingProblem, solver: str | None = None) -> Solution:
        if self._warm is not None and solver is None:
            sol = self._solve_warm(inp)
            if sol is not None:
                return sol
        return solve(inp, self.spec.name, solver=solver, options=self.options)

    def _solve_warm(self, inp: SchedulingProblem) -> Solution | None:
        """The warm solve, or None where the objective has another shape or HiGHS failed."""
        start = time.perf_counter()
        if inp.num_jobs == 0:        # nothing to keep: start afresh with the next jobs
            self._warm.reset()
            return None
        if inp.combinations is not None or inp.pairs is not None or inp.counts is not None or inp.pools is not None:
            return None
        if self._rows is not None and inp.limits is None:
            slots = self._warm.lookup(inp.job_ids)
            kinds = self._rows.kinds(inp, self._warm.tags(slots))
            if kinds is not None:
                return self._solve_kept(inp, kinds, slots, start)
            self._rows = None   # not of the warm shape after all: state whole problems from now on
        seen = Problem(agnostic_problem(inp) if self.spec.agnostic else inp)
        stated = call_policy(self.spec.name, self.spec.fn, seen)
        if isinstance(stated, Solution):   # the policy solves itself: nothing to keep warm
            self._warm = None
            return None
        objective = warm_objective(seen, stated)
        if objective is None:
            return None
        c, hi, cost = dense_rows(seen, objective)
        X = self._warm.solve(inp.job_ids, c, hi, seen.row_gpus, inp.capacity, cost, objective.then_tol)
        if X is None:
            return None
        x = X[seen.var_row, seen.var_col]
        return self._finish(inp, seen, x, objective.fill, False, objective.value, start)

    def _solve_kept(self, inp: SchedulingProblem, kinds: np.ndarray, slots: np.ndarray,
                    start: float) -> Solution | None:
        """The warm solve on the kept rows of a `per_job` policy (JobRows), each row tagged with its kind."""
        rows = self._rows
        c = rows.c    # (the tables as they are now: a later context states new ones)
        X = self._warm.solve(inp.job_ids, c, rows.hi, inp.scale_factors, inp.capacity,
                             rows.cost if rows.then else None, rows.then_tol, kinds + rows.first, slots, kinds)
        if X is None:
            return None
        grid = JobGrid(inp, rows.usable, rows.gain, kinds)
        x = X.ravel().take(grid.flat)
        report = rows.report

        def value(x: np.ndarray) -> float:   # objective.value on the kept rows
            cv = c.take(kinds, 0).ravel().take(grid.flat)
            return report(float(np.bincount(grid.var_row, weights=cv * x, minlength=inp.num_jobs).min()))

        return self._finish(inp, grid, x, rows.fill, True, value, start)

    def _finish(self, inp: SchedulingProblem, p: Vars, x: np.ndarray, fill: bool, kept: bool,
                value, start: float) -> Solution:
        """What solve_objective does after its LP (then `finish`), and pipeline.spread_as_declared after
        that, as a cold solve does. On kept rows x is the warm LP's, within its bounds: the fill takes it as
        it is (a job or type over by HiGHS's tolerance gets nothing more) and the repair after it clips. The
        warm shapes state no constraints (warm_objective), so spreading checks none; the blind problem has
        the real one's variables, so spreading and the allocation need only `p`."""
        if fill:
            x = fill_leftover(p, x if kept else repair(p, x))
        x = spread_as_declared(self.spec, p, repair(p, x))
        sol = Solution(p.allocation(x), x, None, SOLVER, time.perf_counter() - start)
        if self.spec.agnostic:   # the objective when first read: a simulated round never reads it
            sol.defer_objective(lambda: objective_value(self.spec, Problem(inp), x))
        else:
            sol.defer_objective(lambda: value(x))
        return sol


class JobGrid(Vars):
    """The variables of single-job rows on plain columns, in a Layout's order (row-major over
    jobs and types): what finishing a kept-rows solve needs, without a Problem. `usable` and
    `gain` (kinds x types) say where each kind of job may run and its fill gains there; `kinds`
    (M,) each job's kind."""

    def __init__(self, inp: SchedulingProblem, usable: np.ndarray, gain: np.ndarray, kinds: np.ndarray):
        J = usable.shape[1]
        self.input = inp
        self.flat = usable.take(kinds, 0).ravel().nonzero()[0]   # each variable's place in an (M, J) array
        self.var_row = self.flat // J
        self.var_col = self.flat - J * self.var_row
        self.var_job = self.var_row
        self.var_pool = self.var_col
        self.num_vars = len(self.flat)
        self.row_scale = inp.scale_factors
        self.var_gpus = self.row_scale.take(self.var_row)
        self.capacity = inp.capacity
        self.members = np.arange(inp.num_jobs)[:, None]
        self._gain, self._kinds = gain, kinds

    @property
    def row_partner(self) -> np.ndarray:
        return np.full(self.num_jobs, -1)

    @property
    def single_var(self) -> np.ndarray:
        return self.var_row >= 0   # every variable is its job's alone (True everywhere, in one ufunc call)

    def fill_gains(self) -> np.ndarray:
        return self._gain.take(self._kinds, 0).ravel().take(self.flat)


class JobRows:
    """A `per_job` policy's rows, stated once per kind of job and kept.

    The policy declares that a job's max-min row (and second-phase term) depends only on its
    throughputs, scale factor and weight, within one capacity: so a kind of job (those three) is
    stated once, on a problem of that job alone, and every job of that kind gets its row. A job
    whose throughputs, scale factor or weight changed since the last solve is looked up again.
    The jobs' kinds at the last solve are the warm LP's tags for their rows (WarmMaxMin.solve).
    A change of capacity, worker types or stated preferences starts afresh."""

    def __init__(self, spec):
        self.spec = spec
        self.context: tuple | None = None
        self.stated = 0   # statements made (one per kind of job and context)
        self.first = 0    # the number of this context's first kind: kinds are never numbered twice
        self._clear(0)

    def _clear(self, J: int) -> None:
        self.kind_of: dict[tuple, int] = {}   # (throughputs' bytes, scale factor, weight) -> kind
        self.sig = np.zeros((0, J + 2))       # per kind: its throughputs, scale factor and weight
        self.row = np.dtype((np.void, self.sig.itemsize * (J + 2)))
        # per kind: max-min coefficients, bounds, second-phase costs, leftover-fill gains
        self.c, self.hi, self.cost, self.gain = (np.zeros((0, J)) for _ in range(4))
        self.usable = np.zeros((0, J), bool)   # hi > 0
        self.form: tuple | None = None       # (fill, then, then_tol): the same for every statement
        self.fill, self.then, self.then_tol, self.report = True, False, 0.0, float

    def kinds(self, inp: SchedulingProblem, last: np.ndarray) -> np.ndarray | None:
        """Each job's kind, stating the kinds not seen yet; None where a statement is not of the
        warm shape (then every solve states the whole problem). `last`: each job's kind at the
        last solve as numbered across contexts (from 0; the warm LP keeps them as its rows' tags),
        -1 for a job new since."""
        context = (inp.capacity.tobytes(), tuple(inp.worker_types), inp.soft_preferences)
        if context != self.context:
            self.first += len(self.sig)
            self._clear(len(inp.worker_types))
            self.context = context
        T, sf, w = inp.throughputs, inp.scale_factors, inp.weights
        kinds = last - self.first   # (kinds of an earlier context come out negative: new here)
        if len(self.sig):   # a job whose throughputs, scale factor or weight changed is looked up again
            J = T.shape[1]
            sig = np.empty((len(T), J + 2))
            sig[:, :J], sig[:, J], sig[:, J + 1] = T, sf, w
            row = self.row   # a row's bytes as one item: one comparison per job
            kinds[sig.view(row).ravel() != self.sig.view(row).ravel().take(np.maximum(kinds, 0))] = -1
        for i in (kinds < 0).nonzero()[0].tolist():
            key = (T[i].tobytes(), float(sf[i]), float(w[i]))
            kind = self.kind_of.get(key)
            if kind is None:
                kind = self._state(inp, i, key)
                if kind is None:
                    return None
            kinds[i] = kind
        return kinds

    def _state(self, inp: SchedulingProblem, i: int, key: tuple) -> int | None:
        """State the policy on job i alone and keep its row as a new kind."""
        one = inp.subset([i])
        seen = Problem(agnostic_problem(one) if self.spec.agnostic else one)
        objective = warm_objective(seen, call_policy(self.spec.name, self.spec.fn, seen))
        if objective is None:
            return None
        form = (objective.fill, objective.then is not None, objective.then_tol)
        if self.form is None:
            self.form, self.report = form, objective.report
            self.fill, self.then, self.then_tol = form
        elif form != self.form:   # against the declaration: state whole problems instead
            log.warning("policy %s is declared per_job, but its objective's form changed between jobs",
                        self.spec.name)
            return None
        c, hi, cost = dense_rows(seen, objective)
        gain = np.zeros_like(c)
        gain[seen.var_row, seen.var_col] = seen.fill_gains()
        kind = len(self.sig)
        self.kind_of[key] = kind
        self.sig = np.vstack([self.sig, np.r_[inp.throughputs[i], inp.scale_factors[i], inp.weights[i]]])
        self.c, self.hi, self.gain = np.vstack([self.c, c]), np.vstack([self.hi, hi]), np.vstack([self.gain, gain])
        self.usable = np.vstack([self.usable, hi > 0])
        self.cost = np.vstack([self.cost, cost if cost is not None else np.zeros_like(c)])
        self.stated += 1
        return kind
