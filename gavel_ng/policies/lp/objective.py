"""What a policy asks for (`Objective`) and what solving it gives (`Solution`)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from ...allocation import Allocation
from .affine import Affine
from .constraints import EntryRows
from .layout import Layout


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
    problem: Layout | None = None
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
    """A policy's allocation. `objective` may be evaluated when first read (`defer_objective`)."""

    allocation: Allocation
    x: np.ndarray
    objective: float | None
    solver: str
    solve_seconds: float
    warnings: list[str] = field(default_factory=list)
    ok: bool = True
    entry_rows: EntryRows | None = None   # the policy's linear constraints over the allocation's entries
    slo_dropped: list = field(default_factory=list)   # job ids whose SLO the policy dropped (cost policies)

    def defer_objective(self, evaluate: Callable[[], float | None]) -> None:
        """Compute the objective on first read: an agnostic variant reports it under the true
        throughputs, which takes a second Problem that a simulation's round never reads."""
        self.__dict__["_pending"] = evaluate


def _objective(sol: Solution) -> float | None:
    pending = sol.__dict__.pop("_pending", None)
    if pending is not None:
        sol.__dict__["_objective"] = pending()
    return sol.__dict__["_objective"]


def _set_objective(sol: Solution, value: float | None) -> None:
    sol.__dict__.pop("_pending", None)
    sol.__dict__["_objective"] = value


Solution.objective = property(_objective, _set_objective)   # the dataclass's __init__ goes through the setter
