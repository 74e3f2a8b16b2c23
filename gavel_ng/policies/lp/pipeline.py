"""The solve pipeline of an allocation policy: a registered name and a SchedulingProblem in, a Solution out.

`solve` looks the policy up (registry.py), binds its options, and picks the path: a packed policy
without pair throughputs falls back to its base, `partitions > 1` splits the problem (POP,
partition.py), a symmetric policy solves one job per class, an agnostic variant solves a blind
problem and spreads its shares over the types; then the problem's limits (gavel_ng.rules) are
enforced and the policy's own constraints come back as rows over the allocation's entries.
"""

from __future__ import annotations

import logging
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace

import numpy as np

from ...errors import PolicyError
from ...rules.limits import enforce
from ..input.fields import call_policy, defined_at
from ..input.scheduling_problem import SchedulingProblem
from ..registry import PolicySpec, get_policy
from .constraints import violations
from .layout import Vars, map_x
from .objective import Objective, Solution
from .partition import merge, relative_gap, split
from .problem import Problem
from .solving import FormulationError, repair, spread_over_types

log = logging.getLogger(__name__)


def agnostic_throughputs(T: np.ndarray) -> np.ndarray:
    """Each job equally fast on every type it can run on (its mean throughput there)."""
    pos = T > 0
    mean = np.where(pos, T, 0.0).sum(axis=1) / np.maximum(pos.sum(axis=1), 1)
    return np.where(pos, mean[:, None], 0.0)


def agnostic_problem(inp: SchedulingProblem) -> SchedulingProblem:
    """What a heterogeneity-agnostic policy sees: every type equally fast for each job, and
    each useful pair equally good on every type (its mean fraction), so that it still packs
    well-matched jobs together; the variable layout is the real problem's."""
    blind = replace(inp.with_throughputs(agnostic_throughputs(inp.throughputs)), soft_preferences=False)
    return blind if inp.pairs is None else replace(blind, pairs=inp.pairs.agnostic())


def solve(inp: SchedulingProblem, name: str, solver: str | None = None, partitions: int = 1,
          seed: int = 0, options: dict | None = None) -> Solution:
    """Solve a registered policy on a scheduling problem, with its `options` (keyword arguments of the
    policy's function, PolicySpec.bind).

    `partitions=k > 1` splits jobs and GPUs into k random sub-problems solved in parallel
    (POP, SOSP'21) and merges them; see partition.py. Whatever the policy, the allocation
    keeps the problem's limits (quotas, labelled servers: gavel_ng.rules). The constraints the
    policy added come back as rows over the allocation's entries (`Solution.entry_rows`), for the
    mechanism to keep in what runs (a partitioned solve's sub-problems keep their own: none come back)."""
    sol, seen = _solve(inp, name, solver, partitions, seed, options)
    if inp.limits is not None:
        real = Problem(inp)
        x = enforce(real, sol.x)
        if not np.array_equal(x, sol.x):
            sol.x, sol.allocation = x, real.allocation(x)
    if seen is not None and seen.constraints:
        sol.entry_rows = seen.entry_rows(sol.allocation)
    return sol


def _solve(inp: SchedulingProblem, name: str, solver: str | None, partitions: int, seed: int,
           options: dict | None) -> tuple[Solution, Problem | None]:
    """The solution, and the Problem the policy stated its constraints on (None: none to pass on)."""
    spec = get_policy(name).bind(options)   # InputError for a round policy: it has no one-shot allocation
    if spec.packed and inp.pairs is None and inp.combinations is None:
        sol = solve(inp, spec.base, solver, partitions, seed, options)
        sol.warnings.append(f"{name}: the problem has no pair throughputs (build it with space_sharing=True); "
                            "solved without space sharing")
        log.warning(sol.warnings[-1], extra={"kind": "packed policy without pair throughputs"})
        return sol, None
    if partitions > 1:
        return solve_partitioned(inp, name, partitions, solver=solver, seed=seed, options=options), None
    if spec.symmetric and inp.combinations is None and inp.counts is None and inp.num_jobs > 1:
        classes, inverse = inp.job_classes()
        if classes.num_jobs < inp.num_jobs:
            sol, seen = _solve_on(spec, classes, solver)
            if not seen.constraints:
                return _expand(sol, classes, inp, inverse), None
            # constraints of the policy's own may name single jobs: solve every job on its own
    return _solve_on(spec, inp, solver)


def _solve_on(spec: PolicySpec, inp: SchedulingProblem, solver: str | None) -> tuple[Solution, Problem]:
    """The policy on one input, and the Problem it stated its objective on."""
    real = Problem(inp)
    if not spec.agnostic:
        return _run(spec, real, solver), real
    blind = Problem(agnostic_problem(inp))
    sol = _run(spec, blind, solver)
    sol.x = spread_as_declared(spec, real, sol.x, blind)
    sol.allocation = real.allocation(sol.x)
    sol.objective = objective_value(spec, real, sol.x)
    return sol, blind


def spread_as_declared(spec: PolicySpec, p: Vars, x: np.ndarray, seen: Problem | None = None) -> np.ndarray:
    """The end of every solve of an agnostic variant, cold or warm (session.py): its shares spread over the
    types in proportion to their GPUs (`spread=True`), as if it could not tell them apart. Spreading is not
    the policy's decision: the solver's types stay where spreading would break a constraint the policy
    stated (over what it sees, `seen`, so checked there)."""
    if not spec.agnostic or not spec.spread:
        return x
    spread = spread_over_types(p, x)
    if seen is None or not seen.constraints or violations(seen, x) or not violations(seen, spread):
        return spread
    return x


def _expand(sol: Solution, classes: SchedulingProblem, inp: SchedulingProblem, inverse: np.ndarray) -> Solution:
    """Give every job its class's allocation (class totals then split into concrete pairs)."""
    real = Problem(inp)
    sol.x = map_x(Problem(classes), sol.x, real, inverse)
    sol.allocation = real.allocation(sol.x)
    return sol


def _run(spec: PolicySpec, p: Problem, solver: str | None) -> Solution:
    """The policy stated and solved on p; what it states wrong (a return value that is no objective, a
    non-DCP objective, constraints that admit no allocation) is a PolicyError naming it, as is an error
    its code raises (fields.call_policy). A solver's own failure is not: it falls back (Solution.ok)."""
    try:
        out = call_policy(spec.name, spec.fn, p)
        if isinstance(out, Solution):
            if out.objective is None and spec.evaluate is not None:
                out.objective = call_policy(spec.name, spec.evaluate, p, out.x)
            return out
        return p.solve(as_objective(p, out, spec), solver)
    except FormulationError as exc:
        raise PolicyError(spec.name, defined_at(spec.fn), str(exc)) from None


def as_objective(p: Problem, out: object, spec: PolicySpec) -> Objective:
    if isinstance(out, Objective):
        return out
    import cvxpy as cp

    if isinstance(out, (cp.Maximize, cp.Minimize)):
        return Objective("cvxpy", cvx=out, problem=p)
    what = "None (a missing return?)" if out is None else type(out).__name__
    raise PolicyError(spec.name, defined_at(spec.fn), f"returned {what}: a policy returns an objective "
                      "(p.maximize_min(...), p.maximize(...), cvxpy Maximize/Minimize) or a Solution")


def objective_value(spec: PolicySpec, p: Problem, x: np.ndarray) -> float | None:
    """The policy's objective at x under p's throughputs."""
    if spec.evaluate is not None:
        return call_policy(spec.name, spec.evaluate, p, x)
    out = call_policy(spec.name, spec.fn, p)
    if isinstance(out, Solution):
        return None
    return as_objective(p, out, spec).value(x)


def solve_partitioned(inp: SchedulingProblem, name: str, k: int, solver: str | None = None, seed: int = 0,
                      compare: bool = False, workers: int | None = None, options: dict | None = None) -> Solution:
    """POP (partition.py): k random sub-problems on 1/k of every pool's GPUs, solved in
    parallel and merged; the objective is evaluated on the full problem. `compare=True`
    also solves the full problem and reports the relative gap (warnings, `partition_gap`)."""
    start = time.perf_counter()
    spec = get_policy(name).bind(options)
    k = int(max(1, min(k, inp.num_jobs)))
    groups = split(inp, k, seed)
    subs = [inp.subset(g, 1.0 / k) for g in groups]
    cap = inp.capacity / k
    fits = ((inp.throughputs > 0) & (inp.scale_factors[:, None] <= cap[None, :])).any(axis=1)
    if k == 1 or not fits.all():
        sol = solve(inp, name, solver, options=options)
        if k > 1:
            sol.warnings.append(f"partitioning into {k} would leave job {inp.job_ids[int(np.argmin(fits))]} no type "
                                "with enough GPUs; solved the whole problem instead")
        return sol
    with ThreadPoolExecutor(max_workers=workers or k) as pool:
        sols = list(pool.map(lambda sub: solve(sub, name, solver, options=options), subs))
    full = Problem(inp)
    x = repair(full, merge(full, groups, [(Problem(sub), sol.x) for sub, sol in zip(subs, sols)]))
    warnings = [w for s in sols for w in s.warnings]
    value = objective_value(spec, full, x)
    sol = Solution(full.allocation(x), x, value, f"{sols[0].solver} x{k} partitions",
                   time.perf_counter() - start, warnings, all(s.ok for s in sols))
    sol.partition_gap = None
    if compare:
        ref = solve(inp, name, solver, options=options)
        sol.partition_gap = relative_gap(value, ref.objective)
        sol.warnings.append(f"partitioned into {k}: objective {value:.6g} vs {ref.objective:.6g} "
                            f"for the full solve (relative gap {sol.partition_gap:.2%})")
    return sol
