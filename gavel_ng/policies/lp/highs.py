"""A thin, reusable LP around highspy.

cvxpy's canonicalization costs more than HiGHS's solve on our LPs, so built-in
linear policies hand HiGHS a sparse matrix directly. The object stays alive so
that iterative policies (bisection, water filling) change bounds or costs and
re-run from the previous basis instead of starting cold.
"""

from __future__ import annotations

import logging
import os
import sys
from dataclasses import dataclass

import highspy
import numpy as np
import scipy.sparse as sp

log = logging.getLogger(__name__)
INF = highspy.kHighsInf
FEASIBLE = int(highspy.kSolutionStatusFeasible)   # info.primal_solution_status of a usable point


def _swallow_banner() -> None:
    """highspy >= 1.15 prints its banner on stdout (the C level) when a process makes its first
    Highs(), before silent() can apply: it would land in `--json` output. Make that first one
    with stdout on /dev/null, once, at import."""
    try:
        sys.stdout.flush()
        saved = os.dup(1)
    except (OSError, ValueError, AttributeError):   # no usable stdout: nothing to protect
        return
    try:
        null = os.open(os.devnull, os.O_WRONLY)
        try:
            os.dup2(null, 1)
            highspy.Highs()
        finally:
            os.dup2(saved, 1)
            os.close(null)
    finally:
        os.close(saved)


_swallow_banner()


@dataclass
class LPResult:
    ok: bool              # solved to optimality (a MIP: within its gap)
    status: str
    x: np.ndarray         # zeros unless `feasible`
    row_duals: np.ndarray
    objective: float
    feasible: bool = False   # x is a feasible point: `ok`, or a MIP stopped early (time limit) with an incumbent


class LinearProgram:
    """maximize or minimize c @ x subject to lo <= A x <= hi, col_lo <= x <= col_hi (a scalar bound
    applies to every row or column); with
    `integrality` (one flag per column, true: integer) a mixed-integer program.

    A MIP runs HiGHS's branch and bound: the documented meaning of solver "simplex"/"ipm" on a
    MIP is to drop the integrality (solve the relaxation), so a MIP always runs with "choose";
    `method` and `devex` then only concern LPs. `method="ipm-interior"` runs the interior-point method
    without crossover: on an LP with many optimal vertices (identical jobs) it returns a point inside the
    optimal face, as the interior-point solvers of cvxpy do, where the simplex returns one vertex.
    `mip_gap` is the relative gap at which it stops
    (HiGHS's default 1e-4 otherwise); `time_limit` bounds either kind (a MIP stopped by it still
    returns its incumbent: LPResult.feasible)."""

    def __init__(self, c, A, row_lo, row_hi, col_lo, col_hi, maximize: bool = True,
                 method: str = "simplex", time_limit: float | None = None, devex: bool = True,
                 integrality=None, mip_gap: float | None = None):
        rowwise = sp.isspmatrix_csr(A) or isinstance(A, sp.csr_array)
        A = A if rowwise else sp.csc_matrix(A)
        n = A.shape[1]
        kinds = np.zeros(n, np.int32) if integrality is None else \
            np.ascontiguousarray(np.broadcast_to(np.asarray(integrality, bool), (n,)), dtype=np.int32)
        self.is_mip = bool(kinds.any())
        self.highs = highspy.Highs()
        self.highs.silent()
        interior = method == "ipm-interior"
        self.highs.setOptionValue("solver", "choose" if self.is_mip else "ipm" if interior else method)
        if interior and not self.is_mip:
            self.highs.setOptionValue("run_crossover", "off")
        # presolve costs more than it saves on these sparse, well-scaled LPs (solver_bench/); a MIP keeps
        # HiGHS's (on): without it the configuration programs took 1-5x longer (bench_configurations)
        if not self.is_mip:
            self.highs.setOptionValue("presolve", "off")
        # devex pricing halves a cold dual simplex against steepest edge here; warm-started
        # sequences (water filling) do better with HiGHS's default choice (solver_bench/)
        if devex and not self.is_mip:
            self.highs.setOptionValue("simplex_dual_edge_weight_strategy", 1)
        if time_limit is not None:
            self.highs.setOptionValue("time_limit", float(time_limit))
        if mip_gap is not None:
            self.highs.setOptionValue("mip_rel_gap", float(mip_gap))
        # the arrays overload: filling a HighsLp field by field converts each array element by
        # element (about 1 ms an LP of 3,600 columns, 3x HiGHS's own time to take the arrays).
        # Its integrality argument has one entry per column (0 continuous, 1 integer).
        fmt = highspy.MatrixFormat.kRowwise if rowwise else highspy.MatrixFormat.kColwise
        sense = highspy.ObjSense.kMaximize if maximize else highspy.ObjSense.kMinimize
        status = self.highs.passModel(
            n, A.shape[0], A.nnz, int(fmt.value), int(sense.value), 0.0,
            _floats(c, n), _floats(col_lo, n), _floats(col_hi, n), _broad(row_lo, A.shape[0]),
            _broad(row_hi, A.shape[0]),
            A.indptr.astype(np.int32), A.indices.astype(np.int32), A.data.astype(float), kinds)
        if status == highspy.HighsStatus.kError:   # the model stays empty: run() reports it, callers fall back
            log.warning("HiGHS refused an LP of %d columns and %d rows", n, A.shape[0])
        self.num_col, self.num_row = A.shape[1], A.shape[0]

    def run(self) -> LPResult:
        self.highs.run()
        status = self.highs.getModelStatus()
        ok = status == highspy.HighsModelStatus.kOptimal
        info = self.highs.getInfo()
        # a MIP stopped early (time limit, interrupt) may still hold a feasible incumbent
        feasible = ok or (self.is_mip and info.primal_solution_status == FEASIBLE)
        sol = self.highs.getSolution()
        x = np.asarray(sol.col_value, dtype=float) if feasible else np.zeros(self.num_col)
        # a MIP has no duals
        duals = np.asarray(sol.row_dual, dtype=float) if ok and not self.is_mip else np.zeros(self.num_row)
        obj = info.objective_function_value if feasible else float("nan")
        return LPResult(ok, self.highs.modelStatusToString(status), x, duals, obj, feasible)

    def set_col_bounds(self, cols, lo, hi) -> None:
        cols = np.atleast_1d(np.asarray(cols, dtype=np.int32))
        self.highs.changeColsBounds(len(cols), cols, _broad(lo, len(cols)), _broad(hi, len(cols)))

    def set_row_bounds(self, rows, lo, hi) -> None:
        rows = np.atleast_1d(np.asarray(rows, dtype=np.int32))
        self.highs.changeRowsBounds(len(rows), rows, _broad(lo, len(rows)), _broad(hi, len(rows)))

    def use_primal(self) -> None:
        """Primal simplex from here on: after only costs change, the optimal basis stays primal
        feasible and primal simplex continues from it (the hierarchical policy's water filling). For
        las's second phase it was 1.3-2.5x faster than the dual simplex from the same basis, but
        the dual simplex from the slack basis beats both (`restart_dual`)."""
        self.highs.setOptionValue("simplex_strategy", 4)

    def restart_dual(self) -> None:
        """Forget the basis and run the dual simplex from the slack basis next time. After the costs of
        the columns change, that basis is dual feasible at once (every column is boxed, so each can sit
        at the bound its cost prefers), while the old optimal basis is far from optimal: for a max-min
        objective's second phase (`Objective.then`) at 2,048 jobs the primal simplex from the phase-1
        basis took about 3,000 pivots and 0.1-0.25 s, this about 1,800 in 0.015-0.04 s (solver_bench)."""
        self.highs.clearSolver()
        self.use_dual()

    def use_dual(self) -> None:
        """Dual simplex from here on (HiGHS's default; e.g. after only costs changed on a basis whose
        primal re-solve would take long)."""
        self.highs.setOptionValue("simplex_strategy", 1)

    def set_costs(self, c) -> None:
        c = np.asarray(c, dtype=float)
        self.highs.changeColsCost(len(c), np.arange(len(c), dtype=np.int32), c)

    def add_rows(self, A, lo, hi) -> np.ndarray:
        """Append rows; returns their indices."""
        A = sp.csr_matrix(A)
        first = self.num_row
        self.highs.addRows(A.shape[0], _clip_inf(lo), _clip_inf(hi), A.nnz,
                           A.indptr.astype(np.int32), A.indices.astype(np.int32), A.data.astype(float))
        self.num_row += A.shape[0]
        return np.arange(first, self.num_row)


def _floats(v, n: int) -> np.ndarray:
    """A float vector of length n (a scalar is broadcast)."""
    return np.ascontiguousarray(np.broadcast_to(np.asarray(v, dtype=float), (n,)))


def _clip_inf(v) -> np.ndarray:
    v = np.asarray(v, dtype=float).copy()
    v[v >= 1e30] = INF
    v[v <= -1e30] = -INF
    return v


def _broad(v, n: int) -> np.ndarray:
    return _clip_inf(np.broadcast_to(np.asarray(v, dtype=float), (n,)))
