"""What a policy sees: a `Problem`, on which it states its objective.

A policy receives a `Problem`, states an objective over `p.thr` (and the
normalizers), optionally adds constraints (`p.add_constraint`), and the builder solves
it: linear objectives go to HiGHS as one sparse LP, anything else through cvxpy
(solving.py). The variables, validity rows, normalizers (`p.thr_equal`,
`p.thr_isolated`, `p.thr_fastest`) and the policy's constraints are the problem's
`Layout` (layout.py), which is all that solving needs; this class adds what policies
write with.
"""

from __future__ import annotations

from functools import cached_property

import numpy as np
import scipy.sparse as sp

from ..input.fields import Fields
from .affine import Affine
from .layout import Layout
from .objective import Objective, Solution
from .solving import solve_objective


class Problem(Layout, Fields):
    """A scheduling problem's layout plus the normalized throughputs and objectives policies use."""

    _FIELDS_LABEL = "p"

    @cached_property
    def normalized_thr(self) -> Affine:
        """sf_m * thr_m / thr_equal_m: 1.0 is what an equal share of every type gives."""
        return self.thr * (self.input.scale_factors / self.thr_equal)

    def maximize_min(self, expr: Affine, report=float, fill: bool = True, then: Affine | None = None,
                     then_tol: float = 0.0) -> Objective:
        """max_X min_i expr_i; `fill` then spends leftover capacity without lowering the min.

        `then`: a second LP holds every expr_i >= (1 - then_tol) * the optimal minimum and
        maximizes sum_m then_m (each class row counted once per job it stands for).

        Where jobs state soft preferences (`input.soft_preferences`), a policy's objective (`fill`)
        gets that second phase over normalized throughput unless it names its own: the max-min
        LP pins only the bottleneck jobs, and the other jobs' types are whatever vertex the
        simplex returns, so without it their preferences would be honoured only by chance."""
        if then is None and fill and self.input.soft_preferences:
            then = self.normalized_thr
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

    @cached_property
    def gpus(self) -> Affine:
        """GPUs the allocation uses of each capacity pool (each worker type; a `_unconsolidated` twin
        draws on its type's): `p.gpus[j] <= 4` caps a type at 4 GPUs."""
        return Affine(self, self.capacity_rows)

    def cost_per_hour(self, prices: np.ndarray) -> Affine:
        """$/h of the allocation: each row pays for its GPUs once, shared or not."""
        coef = prices[self.var_col] * self.row_scale[self.var_row] * self.var_share
        return Affine(self, sp.csr_matrix(coef[None, :]))

    def solve(self, objective: Objective, solver: str | None = None) -> Solution:
        return solve_objective(self, objective, solver)
