"""Policies by name. A policy is a function of a Problem that returns its objective.

    @policy("proportional", "maximize sum_m log(thr_m / thr_equal_m)")
    def proportional(p):
        return cp.Maximize(cp.sum(cp.log(p.normalized_thr.cvx)))

Registering `name` also registers `name_agnostic`, which decides as if every worker
type were equally fast for each job, and reports its objective under the true
throughputs so the two variants compare directly.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, replace

import numpy as np

from ..errors import InputError
from .constraints import violations
from .inputs import SchedulingProblem
from .problem import Objective, Problem, Solution

log = logging.getLogger(__name__)
PolicyFn = Callable[[Problem], object]


@dataclass(frozen=True)
class PolicySpec:
    name: str
    fn: PolicyFn
    summary: str
    agnostic: bool = False
    evaluate: Callable[[Problem, np.ndarray], float] | None = None
    spread: bool = True
    symmetric: bool = False
    packed: bool = False  # the space-sharing variant: jobs may share a GPU (needs inp.pairs)


PACKED = "_packed"
PAIR_POLICIES = ("gandiva",)   # policies that pack jobs without being NAME_packed variants
_REGISTRY: dict[str, PolicySpec] = {}
_ALIASES: dict[str, str] = {}


def policy(name: str, summary: str = "", *, aliases: tuple[str, ...] = (),
           agnostic_aliases: tuple[str, ...] = (), evaluate=None, agnostic: bool = True, spread: bool = True,
           symmetric: bool = False):
    """Register `fn(problem) -> Objective | cvxpy objective | Solution` under `name`.

    `spread=False` keeps an agnostic variant's per-type choices instead of spreading
    each job's share over the types in proportion to their GPU counts. `symmetric=True`
    declares that the objective looks only at throughputs, scale factors and weights, so
    identical jobs may be solved as one class (SchedulingProblem.job_classes).
    """

    def register(fn: PolicyFn) -> PolicyFn:
        text = summary or (fn.__doc__ or "").strip().splitlines()[0] if (summary or fn.__doc__) else ""
        _REGISTRY[name] = PolicySpec(name, fn, text, False, evaluate, spread, symmetric)
        for a in aliases:
            _ALIASES[a] = name
        if agnostic:
            _REGISTRY[f"{name}_agnostic"] = PolicySpec(f"{name}_agnostic", fn, f"{text} (heterogeneity-agnostic)",
                                                       True, evaluate, spread, symmetric)
            for a in agnostic_aliases:
                _ALIASES[a] = f"{name}_agnostic"
        return fn

    return register


def get_policy(name: str) -> PolicySpec:
    """A policy by name or alias; `NAME_packed` is NAME's space-sharing variant (spec.packed)."""
    _load_builtins()
    if name.endswith(PACKED) and name not in _REGISTRY and name not in _ALIASES:
        base = get_policy(name[:-len(PACKED)])
        return replace(base, name=base.name + PACKED, summary=f"{base.summary} (space sharing)", packed=True)
    key = _ALIASES.get(name, name)
    if key not in _REGISTRY:
        raise InputError("policy", name, f"unknown policy; known: {', '.join(list_policies())}")
    return _REGISTRY[key]



def space_sharing_name(policy: str, space_sharing: bool) -> str:
    """The policy actually solved: `NAME_packed` when space sharing is on (gandiva packs anyway)."""
    spec = get_policy(policy)
    if space_sharing and not spec.packed and spec.name not in PAIR_POLICIES:
        return spec.name + PACKED
    return spec.name


def needs_pairs(policy: str) -> bool:
    """Whether the policy's input must carry pair throughputs (SchedulingProblem.pairs)."""
    spec = get_policy(policy)
    return spec.packed or spec.name in PAIR_POLICIES

def list_policies(include_aliases: bool = False) -> list[str]:
    _load_builtins()
    names = sorted(_REGISTRY)
    return names + sorted(_ALIASES) if include_aliases else names


def aliases() -> dict[str, str]:
    _load_builtins()
    return dict(_ALIASES)


def agnostic_throughputs(T: np.ndarray) -> np.ndarray:
    """Each job equally fast on every type it can run on (its mean throughput there)."""
    pos = T > 0
    mean = np.where(pos, T, 0.0).sum(axis=1) / np.maximum(pos.sum(axis=1), 1)
    return np.where(pos, mean[:, None], 0.0)


def agnostic_problem(inp: SchedulingProblem) -> SchedulingProblem:
    """What a heterogeneity-agnostic policy sees: every type equally fast for each job, and
    each useful pair equally good on every type (its mean fraction), so that it still packs
    well-matched jobs together; the variable layout is the real problem's."""
    blind = inp.with_throughputs(agnostic_throughputs(inp.throughputs))
    return blind if inp.pairs is None else replace(blind, pairs=inp.pairs.agnostic())


def spread_over_types(p: Problem, x: np.ndarray) -> np.ndarray:
    """Type-blind placement: each row's total share split over its usable types by GPU count.

    A partner row's usable types are the same for every job of its class, so the spread
    keeps pair time balanced; repair rebalances what capacity scaling changes."""
    from .solving import repair

    K = p.members.shape[0]
    share = np.bincount(p.var_row, weights=x, minlength=K)
    cap = p.capacity[p.var_pool]
    pool = np.bincount(p.var_row, weights=cap, minlength=K)
    return repair(p, share[p.var_row] * cap / np.maximum(pool[p.var_row], 1e-300))


def solve(inp: SchedulingProblem, name: str, solver: str | None = None, partitions: int = 1,
          seed: int = 0) -> Solution:
    """Solve a registered policy on a scheduling problem.

    `partitions=k > 1` splits jobs and GPUs into k random sub-problems solved in parallel
    (POP, SOSP'21) and merges them; see partition.py."""
    spec = get_policy(name)
    if spec.packed and inp.pairs is None and inp.combinations is None:
        sol = solve(inp, name[:-len(PACKED)], solver, partitions, seed)
        sol.warnings.append(f"{name}: the problem has no pair throughputs (build it with space_sharing=True); "
                            "solved without space sharing")
        log.warning(sol.warnings[-1], extra={"kind": "packed policy without pair throughputs"})
        return sol
    if partitions > 1:
        from .partition import solve_partitioned

        return solve_partitioned(inp, name, partitions, solver=solver, seed=seed)
    if spec.symmetric and inp.combinations is None and inp.counts is None and inp.num_jobs > 1:
        classes, inverse = inp.job_classes()
        if classes.num_jobs < inp.num_jobs:
            sol, seen = _solve_on(spec, classes, solver)
            if not seen.constraints:
                return _expand(sol, classes, inp, inverse)
            # constraints of the policy's own may name single jobs: solve every job on its own
    return _solve_on(spec, inp, solver)[0]


def _solve_on(spec: PolicySpec, inp: SchedulingProblem, solver: str | None) -> tuple[Solution, Problem]:
    """The policy on one input, and the Problem it stated its objective on."""
    real = Problem(inp)
    if not spec.agnostic:
        return _run(spec, real, solver), real
    blind = Problem(agnostic_problem(inp))
    sol = _run(spec, blind, solver)
    if spec.spread:
        spread = spread_over_types(real, sol.x)
        # spreading is placement, not policy: keep the solver's types if it would break a
        # constraint the policy stated (over what it sees, so checked there)
        if not blind.constraints or violations(blind, sol.x) or not violations(blind, spread):
            sol.x = spread
    sol.allocation = real.allocation(sol.x)
    sol.objective = objective_value(spec, real, sol.x)
    return sol, blind


def var_keys(p: Problem, job_map: np.ndarray | None = None) -> np.ndarray:
    """One integer per variable naming (job, partner class or none, column), so that the
    variables of two problems over the same columns and pair classes can be matched."""
    C = 0 if p.input.pairs is None else p.input.pairs.num_classes
    J = len(p.input.worker_types)
    job = p.members[p.var_row, 0]
    if job_map is not None:
        job = job_map[job]
    return (job.astype(np.int64) * (C + 1) + p.row_partner[p.var_row] + 1) * J + p.var_col


def map_x(src: Problem, x: np.ndarray, dst: Problem, dst_to_src_job: np.ndarray | None = None,
          out: np.ndarray | None = None) -> np.ndarray:
    """Copy x from src's variables onto dst's matching ones (by job, partner class, column)."""
    skeys = var_keys(src)
    order = np.argsort(skeys)
    dkeys = var_keys(dst, dst_to_src_job)
    pos = np.clip(np.searchsorted(skeys[order], dkeys), 0, max(len(skeys) - 1, 0))
    hit = (skeys[order][pos] == dkeys) if len(skeys) else np.zeros(len(dkeys), bool)
    out = np.zeros(dst.num_vars) if out is None else out
    out[hit] = x[order[pos[hit]]]
    return out


def _expand(sol: Solution, classes: SchedulingProblem, inp: SchedulingProblem, inverse: np.ndarray) -> Solution:
    """Give every job its class's allocation (class totals then split into concrete pairs)."""
    real = Problem(inp)
    sol.x = map_x(Problem(classes), sol.x, real, inverse)
    sol.allocation = real.allocation(sol.x)
    return sol


def _run(spec: PolicySpec, p: Problem, solver: str | None) -> Solution:
    out = spec.fn(p)
    if isinstance(out, Solution):
        if out.objective is None and spec.evaluate is not None:
            out.objective = spec.evaluate(p, out.x)
        return out
    return p.solve(as_objective(p, out), solver)


def as_objective(p: Problem, out: object) -> Objective:
    if isinstance(out, Objective):
        return out
    import cvxpy as cp

    if isinstance(out, (cp.Maximize, cp.Minimize)):
        return Objective("cvxpy", cvx=out, problem=p)
    raise TypeError(f"a policy must return an objective, got {type(out).__name__}")


def objective_value(spec: PolicySpec, p: Problem, x: np.ndarray) -> float | None:
    """The policy's objective at x under p's throughputs."""
    if spec.evaluate is not None:
        return spec.evaluate(p, x)
    out = spec.fn(p)
    if isinstance(out, Solution):
        return None
    return as_objective(p, out).value(x)


_loaded = False


def _load_builtins() -> None:
    """The built-in policies, then those of installed packages (entry points of the group
    `gavel_ng.policies`, see plugins.py), once per process."""
    global _loaded
    if not _loaded:
        _loaded = True
        from . import builtin  # noqa: F401  (registers the built-in policies)
        from .plugins import load_entry_points

        load_entry_points()
