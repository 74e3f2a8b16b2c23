"""A policy's own constraints, in the form each backend takes.

`p.add_constraint` accepts a `LinearConstraint` (built from `p.thr` and friends) or any
cvxpy constraint. Every constraint that is linear in the allocation, whichever way it
was written, becomes rows `lo <= A x <= hi` so that HiGHS, the leftover fill and the
second phase all see it; only a constraint that is not affine in the allocation
variable (e.g. `cp.log(...) >= ...`, or one over variables of the policy's own) stays a
cvxpy constraint, and its problem is solved through cvxpy. `violations` checks a final
allocation against all of them, so that nothing a policy asked for is lost unnoticed.

The rows also go past the solve, to the schedule that runs (docs/policies.md, "What holds"):
`entry_rows` writes them over the allocation's (row, column) entries for the mechanism. A
*packing* side of a row (a bound above on coefficients that are all >= 0, or below on ones that
are all <= 0) is kept in every round there, like a capacity (gavel_ng.mechanism.limits). An
entry that alone breaks one cannot run in a round that keeps it; so where its row (its job)
has another column that fits, the LP gives it no time (`UserRows.alone_over`), and the job runs
where it fits in every round. That is done only where every constraint of the policy holds with
no time at all (x = 0: budgets, caps, quotas), so that it can never leave the LP without a
solution. Elsewhere, and where no column fits (a cap below what the job does on any type), the
entry stays, and the mechanism runs it only on what the row left unused before.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

from .affine import LinearConstraint

ROW_TOL = 1e-6     # relative: a row may miss its bound by this much times max(1, |bound|)
CONIC_TOL = 1e-5   # the same for interior-point (cvxpy) solutions, accurate to about this


@dataclass
class UserRows:
    """The policy's constraints split by what a backend can take."""

    A: sp.csr_matrix          # linear rows, lo <= A x <= hi
    lo: np.ndarray
    hi: np.ndarray
    origin: list[int]         # per row: index of the constraint in p.constraints it came from
    nonlinear: list           # cvxpy constraints that are not affine in x
    alone_over: np.ndarray | None = None   # (n,) bool: the variable alone breaks a packing side; None: none does

    @property
    def num_rows(self) -> int:
        return self.A.shape[0]


@dataclass
class EntryRows:
    """The policy's linear constraints over its allocation's entries, `lo <= C y <= hi`, where y is
    the allocation's values row-major (row k, column j at k * J + j): what the mechanism checks on
    the entries that run (gavel_ng.mechanism.limits). `names[r]`: the constraint row r came from."""

    C: sp.csr_matrix
    lo: np.ndarray
    hi: np.ndarray
    names: list[str]


def compile_constraints(constraints: list, x, n: int, var_row: np.ndarray | None = None) -> UserRows:
    """Rows for every linear constraint (LinearConstraint or affine cvxpy), the rest kept aside.
    `var_row`: each variable's LP row (its job, or combination), for `UserRows.alone_over`."""
    blocks, lo, hi, origin, nonlinear = [], [], [], [], []
    for i, c in enumerate(constraints):
        rows = _linear_rows(c, x, n)
        if rows is None:
            nonlinear.append(c)
            continue
        blocks.append(rows[0])
        lo.append(rows[1])
        hi.append(rows[2])
        origin.extend([i] * rows[0].shape[0])
    if not blocks:
        return UserRows(sp.csr_matrix((0, n)), np.zeros(0), np.zeros(0), [], nonlinear)
    A, lo, hi = sp.vstack(blocks, format="csr"), np.concatenate(lo), np.concatenate(hi)
    origin_holds = not nonlinear and not (lo > ROW_TOL).any() and not (hi < -ROW_TOL).any()   # x = 0 is feasible
    alone = _alone_over(A, lo, hi, var_row) if var_row is not None and origin_holds else None
    return UserRows(A, lo, hi, origin, nonlinear, alone)


def packing_sides(A: sp.csr_matrix, lo: np.ndarray, hi: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per row: whether its upper side (hi finite, every coefficient >= 0) and its lower side (lo
    finite, every coefficient <= 0) are packing, i.e. bound what running entries use up."""
    A = sp.csr_matrix(A)
    rows = np.repeat(np.arange(A.shape[0]), np.diff(A.indptr))
    neg = np.bincount(rows, weights=A.data < 0, minlength=A.shape[0]) > 0
    pos = np.bincount(rows, weights=A.data > 0, minlength=A.shape[0]) > 0
    return np.isfinite(hi) & ~neg, np.isfinite(lo) & ~pos


def _alone_over(A: sp.csr_matrix, lo: np.ndarray, hi: np.ndarray, var_row: np.ndarray) -> np.ndarray | None:
    """Variables that break a packing side at x_v = 1 with every other at 0 (the entry running a round
    alone already uses more than the bound allows, so no round that keeps it can run the entry),
    where their LP row has another variable that breaks none: there the job can run within it."""
    up, down = packing_sides(A, lo, hi)
    if not (up.any() or down.any()):
        return None
    coo = A.tocoo()
    limit_up = np.where(up, hi, np.inf)[coo.row]
    limit_down = np.where(down, lo, -np.inf)[coo.row]
    over = (coo.data > limit_up + _slack(limit_up)) | (coo.data < limit_down - _slack(limit_down))
    out = np.zeros(A.shape[1], bool)
    out[coo.col[over]] = True
    if not out.any():
        return None
    fits_somewhere = np.bincount(var_row, weights=~out, minlength=int(var_row.max()) + 1) > 0
    out &= fits_somewhere[var_row]
    return out if out.any() else None


def _slack(bound: np.ndarray) -> np.ndarray:
    """The LP's own tolerance on a bound (ROW_TOL, relative to max(1, |bound|)); inf stays inf."""
    with np.errstate(invalid="ignore"):
        return np.where(np.isfinite(bound), ROW_TOL * np.maximum(1.0, np.abs(bound)), 0.0)


def _linear_rows(c, x, n: int):
    if isinstance(c, LinearConstraint):
        a, b = c.bounds()
        return sp.csr_matrix(c.expr.A), a, b
    return _affine_cvxpy_rows(c, x, n)


def _affine_cvxpy_rows(c, x, n: int):
    """(A, lo, hi) of a cvxpy constraint affine in x alone, or None.

    cvxpy keeps `lhs <= rhs` as expr = lhs - rhs <= 0 (and == 0, >= 0 for its other forms);
    an affine expression's gradient is its coefficient matrix, its value at 0 its constant."""
    from cvxpy.constraints import Equality, Inequality, NonNeg, NonPos, Zero

    sense = {Inequality: "le", NonPos: "le", NonNeg: "ge", Equality: "eq", Zero: "eq"}.get(type(c))
    if sense is None or x is None:
        return None
    expr = c.expr if hasattr(c, "expr") else c.args[0]
    variables = expr.variables()
    if not expr.is_affine() or any(v is not x for v in variables):
        return None
    saved = x.value
    x.value = np.zeros(n)
    try:
        const = np.atleast_1d(np.asarray(expr.value, dtype=float)).ravel()
        grad = expr.grad.get(x) if variables else None
    finally:
        x.value = saved
    k = len(const)
    A = sp.csr_matrix((k, n)) if grad is None else sp.csr_matrix(sp.csc_matrix(grad).T)
    rhs = -const
    inf = np.full(k, np.inf)
    if sense == "le":
        return A, -inf, rhs
    if sense == "ge":
        return A, rhs, inf
    return A, rhs, rhs.copy()


def violations(p, x: np.ndarray, tol: float = ROW_TOL) -> list[str]:
    """One line per policy constraint that x misses by more than `tol`, relative (empty: all hold)."""
    rows = p.user_rows
    out: list[str] = []
    if rows.num_rows:
        ax = rows.A @ x
        below, above = rows.lo - ax, ax - rows.hi
        over = np.maximum(below, above)
        bound = np.where(below > above, rows.lo, rows.hi)   # the side that is missed (finite there)
        scale = np.maximum(1.0, np.abs(np.where(np.isfinite(bound), bound, 0.0)))
        bad = np.flatnonzero(over > tol * scale)
        for i in dict.fromkeys(np.asarray(rows.origin)[bad].tolist()):
            worst = float(over[bad][np.asarray(rows.origin)[bad] == i].max())
            out.append(f"constraint {i} ({describe(p.constraints[i])}) missed by {worst:.3g}")
    if rows.nonlinear:
        var = p.cvx_variable
        saved = var.value
        var.value = np.asarray(x, dtype=float)
        try:
            for c in rows.nonlinear:
                miss = float(np.max(np.atleast_1d(c.violation()), initial=0.0))
                scale = max([1.0] + [float(np.max(np.abs(a.value), initial=0.0)) for a in c.args])
                if miss > tol * scale:
                    out.append(f"constraint {p.constraints.index(c)} ({describe(c)}) missed by {miss:.3g}")
        finally:
            var.value = saved
    return out


def describe(c) -> str:
    """A short name for a constraint in messages."""
    if isinstance(c, LinearConstraint):
        return f"{len(c.expr)} linear row(s), {'>=' if c.lower else '<='} 0"
    text = str(c)
    return text if len(text) <= 80 else text[:77] + "..."
