"""The problem builder: allocation variables, validity constraints, effective throughput.

A policy receives a `Problem`, states an objective over `p.thr` (and the
normalizers), optionally adds constraints, and the builder solves it: linear
objectives go to HiGHS as one sparse LP, anything else through cvxpy.
Rows are job combinations (single jobs, or pairs given as explicit Combinations);
only (row, type) entries that can run are variables, so the LP grows with useful rows.
With `inp.pairs` (space sharing by partner classes, packing.py) a job's rows are
itself alone and "with some job of class d"; the allocation decomposes those into
concrete (job, job) pairs. Columns of one capacity pool (`inp.pools`: a type and its
`_unconsolidated` twin) share that pool's GPUs.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import scipy.sparse as sp

from ..allocation import Allocation
from .affine import Affine
from .constraints import UserRows, compile_constraints
from .inputs import SchedulingProblem

log = logging.getLogger(__name__)


@dataclass
class Objective:
    """What to optimize. `kind` is one of maxmin, max, ratio, cvxpy.

    `then` (maxmin only) is a lexicographic second phase: holding every entry of `expr`
    at least the optimal minimum (less a relative `then_tol`), maximize the total of
    `then` over jobs. A max-min LP fixes only its bottleneck, and the vertex a simplex
    returns may leave every other job at that level too (on slow types, in pairs).
    HiGHS holds the minimum exactly (tol 0: the phase-1 vertex is feasible at it, and any
    slack would let the second phase shave equal jobs unequally for nothing); cvxpy's
    interior-point solvers get at least CVXPY_HOLD_TOL."""

    kind: str
    expr: Affine | None = None
    den: Affine | None = None
    cvx: object = None
    report: Callable[[float], float] = float
    fill: bool = True
    problem: Problem | None = None
    then: Affine | None = None
    then_tol: float = 0.0

    def value(self, x: np.ndarray) -> float:
        """The objective at allocation vector x, in the units the policy reports."""
        if self.kind == "maxmin":
            v = self.expr.value(x)
            return self.report(float(v.min()) if len(v) else 0.0)
        if self.kind == "max":
            return self.report(float(self.expr.value(x).sum()))
        if self.kind == "ratio":
            den = float(self.den.value(x).sum())
            return self.report(float(self.expr.value(x).sum()) / den if den > 0 else 0.0)
        self.problem.cvx_variable.value = x
        return self.report(float(self.cvx.value))


@dataclass
class Solution:
    allocation: Allocation
    x: np.ndarray
    objective: float | None
    solver: str
    solve_seconds: float
    warnings: list[str] = field(default_factory=list)
    ok: bool = True


def _csr(data, indices, row_counts, shape) -> sp.csr_matrix:
    indptr = np.zeros(len(row_counts) + 1, dtype=np.int64)
    np.cumsum(row_counts, out=indptr[1:])
    return sp.csr_matrix((data, indices, indptr), shape=shape)


def _incidence(members, Tk, var_row, var_col, M):
    """(job x variable) incidence and member throughputs, built directly in CSR order."""
    n = len(var_row)
    if members.shape[1] == 1:  # single-job rows: variables already come grouped by job
        counts = np.bincount(members[var_row, 0], minlength=M)
        idx = np.arange(n)
        return _csr(np.ones(n), idx, counts, (M, n)), _csr(Tk[var_row, var_col, 0], idx, counts, (M, n))
    mem_v = members[var_row]
    thr_v = Tk[var_row, var_col]
    keep = mem_v >= 0
    vidx = np.broadcast_to(np.arange(n)[:, None], mem_v.shape)
    rows, cols = mem_v[keep], vidx[keep]
    return (sp.csr_matrix((np.ones(len(rows)), (rows, cols)), shape=(M, n)),
            sp.csr_matrix((thr_v[keep], (rows, cols)), shape=(M, n)))


class Problem:
    """Variables and validity constraints for one scheduling problem."""

    def __init__(self, inp: SchedulingProblem):
        self.input = inp
        T = inp.throughputs
        M, J = T.shape
        cap = inp.capacity
        if inp.pools is None:
            self.col_pool = np.arange(J)
            self.capacity = cap.astype(float)
        else:
            self.col_pool = np.asarray(inp.pools, dtype=int)
            self.capacity = np.zeros(self.col_pool.max() + 1 if J else 0)
            self.capacity[self.col_pool] = cap
        self.extra_rows: list = []   # structural (A, lo, hi) rows, e.g. pair balance
        self.packing = None
        self.constraints: list = []
        self._user_rows: UserRows | None = None
        self._cvx_variable = None
        if inp.pairs is not None:
            from . import packing

            packing.build(self, inp)
            self._finish_layout(T, cap)
            return
        if inp.combinations is None:
            members = np.arange(M)[:, None]
            Tk = T[:, :, None]
        else:
            width = max(len(m) for m in inp.combinations.members)
            members = np.full((len(inp.combinations.members), width), -1)
            for k, mem in enumerate(inp.combinations.members):
                members[k, :len(mem)] = mem
            Tk = inp.combinations.throughputs
        present = members >= 0
        self.members = members
        self.row_partner = np.full(len(members), -1)
        self.row_scale = inp.scale_factors[members[:, 0]]
        usable = np.where(present[:, None, :], Tk > 0, True).all(axis=2)
        usable &= self.row_scale[:, None] <= cap[None, :]
        self.var_row, self.var_col = np.nonzero(usable)
        n = len(self.var_row)
        self.num_vars = n
        self.var_share = np.ones(n)
        self.row_gpus = self.row_scale * (1.0 if inp.counts is None else inp.counts[members[:, 0]])
        self.job_rows, thr = _incidence(members, Tk, self.var_row, self.var_col, M)
        self.thr = Affine(self, thr)
        self._finish_layout(T, cap)

    def _finish_layout(self, T: np.ndarray, cap: np.ndarray) -> None:
        # a class row (see SchedulingProblem.job_classes) uses its GPUs once per member job;
        # a partner variable (packing.py) pays for half of its pair's GPUs
        n = self.num_vars
        self.var_pool = self.col_pool[self.var_col]
        self.var_gpus = self.row_gpus[self.var_row] * self.var_share
        by_pool = np.argsort(self.var_pool, kind="stable")
        P = len(self.capacity)
        self.capacity_rows = _csr(self.var_gpus[by_pool], by_pool, np.bincount(self.var_pool, minlength=P), (P, n))
        self._normalizers(T, cap)

    # ----- normalizers (Gavel §3.1) ----------------------------------------------
    def _normalizers(self, T: np.ndarray, cap: np.ndarray) -> None:
        inp = self.input
        M = inp.total_jobs
        sf = inp.scale_factors
        runnable = (T > 0) & (sf[:, None] <= cap[None, :])
        # one column per capacity pool counts: the job's fastest column of the pool
        primary = self._pool_primary(T) if self.input.pools is not None else np.ones(T.shape, bool)
        if len(T) == 0:
            self.x_equal = self.x_isolated = np.zeros((0, len(cap)))
        else:
            eq = np.where(primary, cap[None, :] / M, 0.0)
            self.x_equal = eq / max(eq.sum(axis=1).max(), 1e-12)
            iso = np.where(runnable & primary, cap[None, :] / (M * sf[:, None]), 0.0)
            self.x_isolated = iso / np.maximum(iso.sum(axis=1, keepdims=True), 1.0)
        self.thr_equal = (T * self.x_equal).sum(axis=1)
        self.thr_isolated = (T * self.x_isolated).sum(axis=1)
        self.thr_fastest = np.where(runnable, T, 0.0).max(axis=1, initial=0.0)

    def _pool_primary(self, T: np.ndarray) -> np.ndarray:
        """(M, J): True at each job's fastest column within every pool (first on ties)."""
        prim = np.zeros(T.shape, bool)
        for pool in np.unique(self.col_pool):
            cols = np.flatnonzero(self.col_pool == pool)
            prim[np.arange(len(T)), cols[np.argmax(T[:, cols], axis=1)]] = True
        return prim

    @property
    def single_var(self) -> np.ndarray:
        """Mask of the variables whose row is one job running alone."""
        if self.members.shape[1] > 1:
            return (self.members[self.var_row, 1:] < 0).all(axis=1)
        return self.row_partner[self.var_row] < 0

    # ----- what policies use ---------------------------------------------------------
    @property
    def num_jobs(self) -> int:
        return self.input.num_jobs

    @property
    def cvx_variable(self):
        if self._cvx_variable is None:
            import cvxpy as cp

            self._cvx_variable = cp.Variable(self.num_vars, name="X")
        return self._cvx_variable

    @property
    def normalized_thr(self) -> Affine:
        """sf_m * thr_m / thr_equal_m: 1.0 is what an equal share of every type gives."""
        return self.thr * (self.input.scale_factors / self.thr_equal)

    def add_constraint(self, constraint) -> None:
        """A linear constraint built from `p.thr` etc., or any cvxpy constraint.

        Whatever is added holds in the returned allocation on every solver path: a
        constraint affine in the allocation becomes LP rows (HiGHS, the leftover fill and
        the second phase see it), any other sends the problem to cvxpy (constraints.py)."""
        self.constraints.append(constraint)
        self._user_rows = None

    @property
    def user_rows(self) -> UserRows:
        """The policy's constraints compiled to LP rows, plus those that are not linear."""
        if self._user_rows is None:   # a cvxpy constraint over x exists only if x was created
            self._user_rows = compile_constraints(self.constraints, self._cvx_variable, self.num_vars)
        return self._user_rows

    def maximize_min(self, expr: Affine, report=float, fill: bool = True, then: Affine | None = None,
                     then_tol: float = 0.0) -> Objective:
        """max_X min_i expr_i; `fill` then spends leftover capacity without lowering the min.

        `then`: a second LP holds every expr_i >= (1 - then_tol) * the optimal minimum and
        maximizes sum_m then_m (each class row counted once per job it stands for)."""
        return Objective("maxmin", expr, report=report, fill=fill, then=then, then_tol=then_tol)

    def minimize_max(self, expr: Affine, report=None) -> Objective:
        return Objective("maxmin", -expr, report=report or (lambda t: -t))

    def maximize(self, expr: Affine) -> Objective:
        return Objective("max", expr)

    def minimize(self, expr: Affine) -> Objective:
        return Objective("max", -expr, report=lambda v: -v)

    def maximize_ratio(self, num: Affine, den: Affine) -> Objective:
        """max sum(num) / sum(den), a linear-fractional program (Charnes-Cooper)."""
        return Objective("ratio", num, den)

    def cost_per_hour(self, prices: np.ndarray) -> Affine:
        """$/h of the allocation: each row pays for its GPUs once, shared or not."""
        coef = prices[self.var_col] * self.row_scale[self.var_row] * self.var_share
        return Affine(self, sp.csr_matrix(coef[None, :]))

    # ----- solving -------------------------------------------------------------------
    def validity_rows(self, user: bool = True) -> tuple[sp.csr_matrix, np.ndarray, np.ndarray]:
        """Rows of `lo <= A x <= hi`: validity, structural extra rows and (with `user`) the
        policy's linear constraints."""
        rows = list(self.extra_rows)
        if user and self.constraints:
            u = self.user_rows
            rows.append((u.A, u.lo, u.hi))
        blocks = [self.job_rows, self.capacity_rows] + [a for a, _, _ in rows]
        lo = [np.full(self.num_jobs, -np.inf), np.full(len(self.capacity), -np.inf)] + [b for _, b, _ in rows]
        hi = [np.ones(self.num_jobs), self.capacity.astype(float)] + [b for _, _, b in rows]
        return sp.vstack(blocks, format="csr"), np.concatenate(lo), np.concatenate(hi)

    def solve(self, objective: Objective, solver: str | None = None) -> Solution:
        from .solving import solve_objective

        return solve_objective(self, objective, solver)

    def allocation(self, x: np.ndarray) -> Allocation:
        if self.packing is not None:
            from .packing import decompose

            return decompose(self, x)
        inp = self.input
        rows_used = self.members.shape[0]
        values = np.zeros((rows_used, len(inp.worker_types)))
        values[self.var_row, self.var_col] = np.clip(x, 0.0, 1.0)
        labels = [tuple(inp.job_ids[m] for m in row if m >= 0) for row in self.members]
        return Allocation(labels, list(inp.worker_types), values, self.row_scale.astype(float),
                          inp.capacity.astype(float), inp.pools)

    def fallback_x(self) -> np.ndarray:
        """The isolated allocation (1/n of every type): always valid."""
        x = np.zeros(self.num_vars)
        is_single = self.single_var
        jobs = self.members[self.var_row[is_single], 0]
        x[is_single] = self.x_isolated[jobs, self.var_col[is_single]]
        return x
