"""Vectors of affine expressions in the allocation variables.

Policies write objectives with these the way they would with numpy arrays
(`p.thr / p.thr_equal`); the problem compiles them to a sparse LP for HiGHS, or to
cvxpy via `.cvx` when a policy needs a nonlinear objective.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np
import scipy.sparse as sp

from .csr import csr


class HasVariable(Protocol):
    """What an expression is over: a problem with a cvxpy vector of its allocation variables."""

    @property
    def cvx_variable(self) -> Any: ...


class Affine:
    """A @ x + b, one entry per row of A (typically one per job)."""

    __array_ufunc__ = None  # numpy operands defer to our reflected operators

    def __init__(self, problem: HasVariable, A, b=None):
        self.problem = problem
        self.A = A if type(A) is sp.csr_matrix else sp.csr_matrix(A)   # shared, as csr_matrix(A) shares it
        n = self.A.shape[0]
        if b is None:
            self.b = np.zeros(n)
        else:
            b = np.asarray(b, dtype=float)
            self.b = b.copy() if b.shape == (n,) else np.broadcast_to(b, (n,)).copy()

    def __len__(self) -> int:
        return self.A.shape[0]

    @property
    def shape(self) -> tuple[int]:
        return (len(self),)

    # arithmetic -------------------------------------------------------------
    def _scaled(self, c) -> Affine:
        c = np.asarray(c, dtype=float)
        if c.ndim == 0:
            return Affine(self.problem, self.A * float(c), self.b * float(c))
        # row scaling without a diagonal matmul; the new matrix shares A's (never mutated) index arrays
        A = csr(self.A.data * np.repeat(c, np.diff(self.A.indptr)), self.A.indices, self.A.indptr, self.A.shape)
        return Affine(self.problem, A, self.b * c)

    def __mul__(self, c) -> Affine:
        return self._scaled(c)

    __rmul__ = __mul__

    def __truediv__(self, c) -> Affine:
        return self._scaled(1.0 / np.asarray(c, dtype=float))

    def __neg__(self) -> Affine:
        return self._scaled(-1.0)

    def __add__(self, other) -> Affine:
        if isinstance(other, Affine):
            return Affine(self.problem, self.A + other.A, self.b + other.b)
        return Affine(self.problem, self.A, self.b + np.asarray(other, dtype=float))

    __radd__ = __add__

    def __sub__(self, other) -> Affine:
        return self + (-other)

    def __rsub__(self, other) -> Affine:
        return (-self) + other

    def __getitem__(self, idx) -> Affine:
        return Affine(self.problem, self.A[idx], self.b[idx])

    def sum(self) -> Affine:
        return Affine(self.problem, sp.csr_matrix(self.A.sum(axis=0)), [self.b.sum()])

    # constraints ------------------------------------------------------------
    def __ge__(self, other) -> LinearConstraint:
        return LinearConstraint(self - other, lower=True)

    def __le__(self, other) -> LinearConstraint:
        return LinearConstraint(self - other, lower=False)

    # evaluation -------------------------------------------------------------
    def value(self, x: np.ndarray) -> np.ndarray:
        return self.A @ x + self.b

    @property
    def cvx(self):
        """The same expression over the problem's cvxpy variable."""
        return self.A @ self.problem.cvx_variable + self.b


@dataclass
class LinearConstraint:
    """expr >= 0 (lower=True) or expr <= 0."""

    expr: Affine
    lower: bool

    def bounds(self) -> tuple[np.ndarray, np.ndarray]:
        """Row bounds on A x, i.e. with the constant moved to the right-hand side."""
        rhs = -self.expr.b
        inf = np.full_like(rhs, np.inf)
        return (rhs, inf) if self.lower else (-inf, rhs)

    @property
    def cvx(self):
        e = self.expr.cvx
        return e >= 0 if self.lower else e <= 0
