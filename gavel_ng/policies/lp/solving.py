"""Turn an Objective over a Problem into a valid allocation.

Linear objectives are compiled to one sparse LP for HiGHS (dual simplex unless
told otherwise: it measured fastest on these max-min LPs, see solver_bench/);
cvxpy objectives go through cvxpy (Clarabel by default). A solver's failure never escapes:
the solution carries a warning and a valid fallback allocation (`Solution.ok` False). What is not
the solver's failure but the formulation's does: constraints that admit no allocation at all
raise `FormulationError` (the registry names the policy, errors.PolicyError): constraints that admit
no allocation at all, a cvxpy objective or constraint that is not DCP.
"""

from __future__ import annotations

import logging
import time

import numpy as np
import scipy.sparse as sp

from ...errors import InputError
from ...rules.limits import enforce
from . import packing
from .affine import LinearConstraint
from .constraints import CONIC_TOL, ROW_TOL, describe, violations
from .highs import INF, LinearProgram
from .layout import Layout, Vars
from .objective import Objective, Solution

log = logging.getLogger(__name__)
CVXPY_HOLD_TOL = 1e-6   # an interior-point optimum is accurate to about this, relative
LP_SOLVERS = {"highs": "simplex", "highs-simplex": "simplex", "highs-ipm": "ipm", "highs-pdlp": "pdlp",
              "highs-ipm-interior": "ipm-interior"}   # no crossover: a point inside the optimal face


class FormulationError(Exception):
    """What the policy stated cannot be solved by any solver: its own constraints admit no allocation
    (validity alone always admits X = 0), or a cvxpy objective or constraint breaks the DCP rules."""


def solve_objective(p: Layout, objective: Objective, solver: str | None = None) -> Solution:
    start = time.perf_counter()
    if p.num_vars == 0:
        x = np.zeros(0)
        return Solution(p.allocation(x), x, None, "none", time.perf_counter() - start)
    nonlinear = p.user_rows.nonlinear if p.constraints else []
    if nonlinear and objective.kind == "ratio":
        raise InputError("constraint", describe(nonlinear[0]), "a ratio objective (maximize_ratio) is solved as "
                         "one LP and takes only constraints linear in the allocation (e.g. built from p.thr)")
    cvxpy_path = objective.kind == "cvxpy" or bool(nonlinear) or (solver is not None and solver not in LP_SOLVERS)
    if cvxpy_path:
        check_dcp(objective, nonlinear)
    try:
        if cvxpy_path:
            x, name, status = _solve_cvxpy(p, objective, None if solver in LP_SOLVERS else solver)
        else:
            x, name, status = _solve_lp(p, objective, LP_SOLVERS[solver or "highs"])
    except Exception as exc:  # a solver crash must not take the scheduler down: `finish` falls back and says why
        log.debug("solver raised", exc_info=True)
        x, name, status = None, solver or ("clarabel" if cvxpy_path else "highs"), f"{type(exc).__name__}: {exc}"
    return finish(p, objective, x, name, status, start)


def finish(p: Layout, objective: Objective | None, x, name: str, status: str, start: float) -> Solution:
    """Repair rounding noise, or fall back to a valid allocation with a warning; say so if the
    result misses any constraint the policy added."""
    warnings: list[str] = []
    ok = x is not None and np.isfinite(x).all()
    if not ok:
        x = None
        if p.constraints:
            x, verdict = feasible_point(p)
            # HiGHS on the linear rows alone, else (a constraint it cannot state) the solver's own verdict
            if x is None and str(verdict if verdict is not None else status).lower().startswith("infeasible"):
                raise FormulationError(f"the {len(p.constraints)} constraint(s) it adds admit no allocation "
                                       f"(solver {name}: {status})")
        what = "an allocation that meets the policy's constraints" if x is not None else \
            "the isolated allocation (1/n of each type)"
        warnings.append(f"solver {name} failed ({status}); using {what}")
        log.warning(warnings[-1], extra={"kind": "solver failed; using a fallback allocation"})
        x = p.fallback_x() if x is None else x
    x = repair(p, x)
    if p.constraints:
        for miss in violations(p, x, ROW_TOL if name.startswith("highs") else CONIC_TOL):
            warnings.append(f"allocation misses a policy constraint: {miss}")
            log.warning(warnings[-1], extra={"kind": "allocation misses a policy constraint"})
    value = objective.value(x) if objective is not None else None
    return Solution(p.allocation(x), x, value, name, time.perf_counter() - start, warnings, ok)


def check_dcp(objective: Objective, constraints: list) -> None:
    """FormulationError when a cvxpy objective or constraint breaks the DCP rules, which no solver takes
    (cvxpy would raise DCPError at solve time, where it would read as a solver failure)."""
    if objective.kind == "cvxpy" and not objective.cvx.is_dcp():
        raise FormulationError(f"its objective {type(objective.cvx).__name__}(...) is not DCP: Maximize takes a "
                               "concave expression, Minimize a convex one (cvxpy's disciplined convex programming)")
    for c in constraints:
        if not c.is_dcp():
            raise FormulationError(f"its constraint {describe(c)} is not DCP (cvxpy's disciplined convex "
                                   "programming: convex <= concave)")


def repair(p: Vars, x: np.ndarray) -> np.ndarray:
    """Clip solver noise so the allocation passes check() exactly."""
    x = np.minimum(x, 1.0)    # (np.clip costs twice as much on these small vectors)
    x[x < 1e-9] = 0.0         # noise and anything negative
    totals = p.job_time(x)
    if np.count_nonzero(totals > 1.0):   # (scaling by 1 everywhere else would change nothing: skipped)
        job_scale = 1.0 / np.maximum(totals, 1.0)
        var_scale = np.ones(p.num_vars)
        for i in range(p.members.shape[1]):
            mem = p.members[p.var_row, i]
            has = mem >= 0
            var_scale[has] = np.minimum(var_scale[has], job_scale[mem[has]])
        x = x * var_scale
    used = p.pool_use(x)
    cap = p.capacity
    if np.count_nonzero(used > cap):
        type_scale = np.where(used > cap, cap / np.maximum(used, 1e-300), 1.0)
        x = x * type_scale[p.var_pool]
    if p.limit_block is not None:   # quotas and labelled servers (gavel_ng.rules)
        x = enforce(p, x)
    if p.packing is not None:  # partner time must stay balanced between classes
        x = packing.rebalance(p, x)
    return x


def spread_over_types(p: Vars, x: np.ndarray) -> np.ndarray:
    """Type-blind spreading: each row's total share split over its usable types by GPU count.

    A partner row's usable types are the same for every job of its class, so the spread
    keeps pair time balanced; repair rebalances what capacity scaling changes."""
    K = p.members.shape[0]
    share = np.bincount(p.var_row, weights=x, minlength=K)
    cap = p.capacity[p.var_pool]
    pool = np.bincount(p.var_row, weights=cap, minlength=K)
    return repair(p, share[p.var_row] * cap / np.maximum(pool[p.var_row], 1e-300))


def fill_leftover(p: Vars, x: np.ndarray) -> np.ndarray:
    """Give idle GPU time to jobs with idle time: pools with the most room first, in each the jobs
    fastest-relative there first (`p.fill_gains()`, ties in variable order).

    Only ever adds time, so a max-min optimum stays optimal; a greedy pass costs far
    less than a second LP (measured in solver_bench/). Constraints of the policy's own
    are rows the greedy pass cannot see, so then the fill is that second LP.

    A pool with room for every job's idle time gives each all of it, whatever their order: the
    gains are read (and sorted) only for a pool that runs out. In the simulation that is almost
    never (experiments/README.md, "Simulator speed"), which saves most of the pass.
    """
    if (p.constraints and p.user_rows.num_rows) or p.limit_block is not None:
        return _fill_lp(p, x)
    x = x.copy()
    slack = 1.0 - p.job_time(x)
    np.maximum(slack, 0.0, out=slack)
    left = (p.capacity - p.pool_use(x)).tolist()
    # partner time stays as solved (it must balance between classes): single-job variables only
    cand = p.single_var.nonzero()[0]
    pool = p.var_pool[cand]
    by_pool = cand[pool.argsort(kind="stable")]    # variable order within a pool
    ends = np.bincount(pool, minlength=len(left)).cumsum().tolist()
    job_of = p.members[:, 0]
    gain = None
    for j in sorted(range(len(left)), key=left.__getitem__, reverse=True):   # (stable: ties in pool order)
        room = left[j]
        if room <= 0 or not np.count_nonzero(slack):
            break   # every later pool has no room either, or no job has time left: nothing would move
        part = by_pool[ends[j - 1] if j else 0:ends[j]]
        jc = job_of[p.var_row[part]]
        idle = slack[jc]
        use = p.var_gpus[part]
        if idle @ use <= room:   # room for all of it
            x[part] += idle
            slack[jc] = 0.0
            continue
        gain = p.fill_gains() if gain is None else gain
        o = (-gain[part]).argsort(kind="stable")
        part, jc, use = part[o], jc[o], use[o]
        want = idle[o] * use                                  # GPUs each would use
        gpus = np.minimum(want, room - want.cumsum() + want)  # what is left when its turn comes
        np.maximum(gpus, 0.0, out=gpus)
        add = gpus / use
        x[part] += add
        np.subtract.at(slack, jc, add)   # (a job may have two variables in a pool: its twin column)
        np.maximum(slack, 0.0, out=slack)
    return x


def _fill_lp(p: Layout, x: np.ndarray) -> np.ndarray:
    """The leftover fill as an LP over every row: single-job variables may only grow from x
    (so no job loses throughput), partner variables stay as solved; on failure x as it is."""
    A, lo, hi = p.validity_rows()
    single = p.single_var
    lp = LinearProgram(np.where(single, p.fill_gains(), 0.0), A, lo, hi, x, np.where(single, 1.0, x), True,
                       "simplex")
    res = lp.run()
    return res.x if res.ok else x


def feasible_point(p: Layout) -> tuple[np.ndarray | None, str | None]:
    """Any allocation meeting validity and the policy's linear constraints (None: there is none, or
    some constraint is not linear), and HiGHS's status of the search (None: a constraint is not linear)."""
    if p.user_rows.nonlinear:
        return None, None
    A, lo, hi = p.validity_rows()
    res = LinearProgram(np.zeros(p.num_vars), A, lo, hi, np.zeros(p.num_vars), np.ones(p.num_vars), True,
                        "simplex").run()
    return (res.x if res.ok else None), res.status


def widen(A: sp.csr_matrix, extra: int) -> sp.csr_matrix:
    """The same rows with `extra` empty columns on the right."""
    return sp.csr_matrix((A.data, A.indices, A.indptr), shape=(A.shape[0], A.shape[1] + extra))


def with_column(A: sp.csr_matrix, value: float) -> sp.csr_matrix:
    """Append one column holding `value` in every row (the epigraph variable)."""
    A = sp.csr_matrix(A)
    n, k = A.shape[1], A.shape[0]
    ends = A.indptr[1:]
    data = np.insert(A.data, ends, value)
    indices = np.insert(A.indices, ends, n)
    return sp.csr_matrix((data, indices, A.indptr + np.arange(k + 1)), shape=(k, n + 1))


def _solve_lp(p: Layout, objective: Objective, method: str):
    A, lo, hi = p.validity_rows()
    n = p.num_vars
    if objective.kind == "maxmin":
        e = objective.expr
        k = len(e)
        full = sp.vstack([widen(A, 1), with_column(e.A, -1.0)], format="csr")
        c = np.zeros(n + 1)
        c[-1] = 1.0
        lp = LinearProgram(c, full, np.concatenate([lo, -e.b]), np.concatenate([hi, np.full(k, np.inf)]),
                           np.r_[np.zeros(n), -np.inf], np.r_[np.ones(n), np.inf], True, method)
        res = lp.run()
        if not res.ok:
            return None, f"highs-{method}", res.status
        x = res.x[:n]
        if objective.then is not None:
            x = _then_maximize(p, objective, lp, res.x)
        if objective.fill:
            x = fill_leftover(p, repair(p, x))
        return x, f"highs-{method}", "optimal"
    if objective.kind == "max":
        c = np.asarray(objective.expr.A.sum(axis=0)).ravel()
        lp = LinearProgram(c, A, lo, hi, np.zeros(n), np.ones(n), True, method)
        res = lp.run()
        return (res.x if res.ok else None), f"highs-{method}", res.status
    if objective.kind == "ratio":
        return _solve_ratio(p, objective, A, lo, hi, method)
    raise ValueError(f"unknown objective kind {objective.kind}")


def hold_level(t: float, tol: float) -> float:
    """The lowest level a second phase may leave the max-min objective at."""
    return t - tol * abs(t)


def then_costs(p: Layout, objective: Objective) -> np.ndarray:
    """Per-variable cost of the second phase: sum over jobs of `then`, a class row once per job."""
    A = objective.then.A
    data = A.data if p.input.counts is None else A.data * np.repeat(p.input.counts, np.diff(A.indptr))
    return np.bincount(A.indices, weights=data, minlength=A.shape[1])   # A.T @ weights, without a transpose


def _then_maximize(p: Layout, objective: Objective, lp: LinearProgram, first: np.ndarray) -> np.ndarray:
    """Second phase on the phase-1 model: bound the epigraph variable below, swap the costs and
    solve by the dual simplex from the slack basis (`restart_dual`: the phase-1 basis, though
    primal feasible, is thousands of primal pivots from the new optimum at scale)."""
    n = p.num_vars
    lp.set_col_bounds([n], hold_level(float(first[n]), objective.then_tol), INF)
    lp.set_costs(np.r_[then_costs(p, objective), 0.0])
    lp.restart_dual()
    res = lp.run()
    if not res.ok:
        log.warning("second phase of a max-min objective: %s; keeping the first phase's allocation", res.status)
        return first[:n]
    return res.x[:n]


def _solve_ratio(p: Layout, objective: Objective, A, lo, hi, method: str):
    """Charnes-Cooper: y = s x, s = 1 / den(x); maximize num(y) s.t. den(y) = 1."""
    n = p.num_vars
    rows, rlo, rhi = [], [], []
    for bound, is_upper in ((hi, True), (lo, False)):
        fin = np.isfinite(bound)
        if fin.any():
            rows.append(sp.hstack([A[fin], sp.csr_matrix(-bound[fin][:, None])]))
            rlo.append(np.full(fin.sum(), -np.inf) if is_upper else np.zeros(fin.sum()))
            rhi.append(np.zeros(fin.sum()) if is_upper else np.full(fin.sum(), np.inf))
    rows.append(sp.hstack([sp.identity(n), -np.ones((n, 1))]))  # y <= s  (x <= 1)
    rlo.append(np.full(n, -np.inf))
    rhi.append(np.zeros(n))
    den = objective.den.sum()
    rows.append(sp.hstack([den.A, sp.csr_matrix([[den.b[0]]])]))
    rlo.append(np.ones(1))
    rhi.append(np.ones(1))
    num = objective.expr.sum()
    c = np.r_[np.asarray(num.A.todense()).ravel(), num.b[0]]
    lp = LinearProgram(c, sp.vstack(rows, format="csc"), np.concatenate(rlo), np.concatenate(rhi),
                       np.zeros(n + 1), np.full(n + 1, np.inf), True, method)
    res = lp.run()
    if not res.ok or res.x[-1] <= 1e-12:
        return None, f"highs-{method}", res.status if not res.ok else "zero scale (no cost incurred)"
    return res.x[:n] / res.x[-1], f"highs-{method}", "optimal"


def _solve_cvxpy(p: Layout, objective: Objective, solver: str | None):
    import cvxpy as cp

    x = p.cvx_variable
    cons = [x >= 0, x <= 1, p.job_rows @ x <= 1, p.capacity_rows @ x <= p.capacity]
    for a, lo, hi in p.extra_rows:
        if a.shape[0]:
            eq = lo == hi
            if eq.any():
                cons.append(a[eq] @ x == hi[eq])
            if (~eq).any():
                cons.append(a[~eq] @ x <= hi[~eq])
    for c in p.constraints:
        cons.append(c.cvx if isinstance(c, LinearConstraint) else c)
    alone = p.user_rows.alone_over if p.constraints else None
    if alone is not None:   # entries that alone break a packing side (constraints.py): no time
        cons.append(x[np.flatnonzero(alone)] == 0)
    cvx_obj = objective.cvx if objective.kind == "cvxpy" else _as_cvxpy(objective)
    prob = cp.Problem(cvx_obj, cons)
    name = (solver or "CLARABEL").upper()
    try:
        prob.solve(solver=name)
    except cp.SolverError:
        if solver is not None:
            raise
        # Clarabel gives up on some badly scaled cone problems that SCS still solves; the result
        # is checked against every constraint afterwards (finish), so an inaccurate one is said
        log.info("%s failed; trying SCS", name)
        name = "SCS"
        prob.solve(solver=name, eps=1e-8, max_iters=20000)
    if prob.status not in (cp.OPTIMAL, cp.OPTIMAL_INACCURATE) or x.value is None:
        return None, name.lower(), str(prob.status)
    if objective.kind == "maxmin" and objective.then is not None:
        level = hold_level(float(objective.expr.value(x.value).min()), max(objective.then_tol, CVXPY_HOLD_TOL))
        second = cp.Problem(cp.Maximize(then_costs(p, objective) @ x), cons + [objective.expr.cvx >= level])
        try:
            second.solve(solver=name)
            status = second.status
        except cp.SolverError as exc:   # the held level leaves a thin region interior points may miss
            status = f"{type(exc).__name__}: {exc}"
        if status != cp.OPTIMAL or x.value is None:   # an inaccurate second phase may not hold the level
            log.warning("second phase of a max-min objective: %s; keeping the first phase's allocation", status)
            prob.solve(solver=name)
    return np.asarray(x.value, dtype=float), name.lower(), str(prob.status)


def _as_cvxpy(objective: Objective):
    import cvxpy as cp

    if objective.kind == "maxmin":
        return cp.Maximize(cp.min(objective.expr.cvx))
    if objective.kind == "max":
        return cp.Maximize(cp.sum(objective.expr.cvx))
    raise ValueError("ratio objectives are solved with HiGHS only")
