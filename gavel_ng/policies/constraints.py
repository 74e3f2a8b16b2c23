"""A policy's own constraints, in the form each backend takes.

`p.add_constraint` accepts a `LinearConstraint` (built from `p.thr` and friends) or any
cvxpy constraint. Every constraint that is linear in the allocation, whichever way it
was written, becomes rows `lo <= A x <= hi` so that HiGHS, the leftover fill and the
second phase all see it; only a constraint that is not affine in the allocation
variable (e.g. `cp.log(...) >= ...`, or one over variables of the policy's own) stays a
cvxpy constraint, and its problem is solved through cvxpy. `violations` checks a final
allocation against all of them, so that nothing a policy asked for is lost unnoticed.
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

    @property
    def num_rows(self) -> int:
        return self.A.shape[0]


def compile_constraints(constraints: list, x, n: int) -> UserRows:
    """Rows for every linear constraint (LinearConstraint or affine cvxpy), the rest kept aside."""
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
    return UserRows(sp.vstack(blocks, format="csr"), np.concatenate(lo), np.concatenate(hi), origin, nonlinear)


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
