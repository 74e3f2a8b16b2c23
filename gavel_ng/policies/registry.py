"""Policies by name, of two kinds, in one registry.

An *allocation* policy is a function of a Problem that returns its objective over the
allocation X (time fractions per job and worker type); Gavel's round mechanism carries it out:

    @policy("proportional", "maximize sum_m log(thr_m / thr_equal_m)")
    def proportional(p):
        return cp.Maximize(cp.sum(cp.log(p.normalized_thr.cvx)))

Registering `name` also registers `name_agnostic`, which decides as if every worker
type were equally fast for each job, and reports its objective under the true
throughputs so the two variants compare directly.

A *round* policy decides every round which configuration each job runs on, from a
`RoundContext` (policies.rounds); `@round_policy` registers it with the properties that
decide how it runs (which jobs it runs adaptively, its default round length):

    @round_policy("speedup_sum", "maximize the sum of speedups")
    def speedup_sum(ctx):
        return ctx.assign(ctx.speedups)

Both kinds run by name in `simulate`, `sweep` and on a cluster; only allocation policies
have a one-shot form (`solve`).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace

import numpy as np

from ..errors import InputError, PolicyError
from ..rules.limits import enforce
from .constraints import violations
from .fields import call_policy, defined_at
from .layout import map_x
from .objective import Objective, Solution
from .partition import merge, relative_gap, split
from .problem import Problem
from .scheduling_problem import SchedulingProblem
from .solving import FormulationError, repair, spread_over_types

log = logging.getLogger(__name__)
PolicyFn = Callable[[Problem], object]


ALLOCATION, ROUND = "allocation", "round"    # the two kinds of policy (module docstring)
FIXED, ADAPTIVE, BOTH = "fixed", "adaptive", "both"   # how a round policy runs adaptive jobs (round_policy)


@dataclass(frozen=True)
class PolicySpec:
    name: str
    fn: PolicyFn
    summary: str
    agnostic: bool = False
    evaluate: Callable[[Problem, np.ndarray], float] | None = None
    spread: bool = True
    symmetric: bool = False
    packed: bool = False  # the space-sharing variant NAME_packed: jobs may share a GPU (needs inp.pairs)
    pairs: bool = False   # declared: the policy packs jobs itself from inp.pairs, without a NAME_packed variant
    base: str | None = None   # the registered policy this is a variant of (agnostic or packed), else None
    idle_aware: bool = False  # declared: leaves GPUs idle on purpose, so its shares are wall-clock time
    entities: bool = False    # declared: shares across entities (with none declared, every job is in one)
    per_job: bool = False     # declared: each job's max-min row depends on that job alone (session.JobRows)
    kind: str = ALLOCATION    # ALLOCATION: an objective over X; ROUND: decides each round (policies.rounds)
    jobs: str = FIXED         # round policies: FIXED, ADAPTIVE or BOTH (how it runs adaptive jobs, below)
    round_seconds: float = 360.0   # how often it decides unless told otherwise (Gavel: 360 s; Pollux, Sia: 60 s)
    gpu_counts: Callable | None = None   # round policies: topology -> GPU counts per type (its configurations)
    mechanism: str | None = None   # declared: the round mechanism preset its allocation is meant for (policy())

    @property
    def is_round(self) -> bool:
        return self.kind == ROUND

    def _params(self) -> dict:
        import inspect

        target = self.fn.__init__ if isinstance(self.fn, type) else self.fn
        return dict(inspect.signature(target).parameters)

    def option_names(self) -> list[str] | None:
        """The options it declares: its keyword arguments (a round policy's after `ctx`, an allocation
        policy's after `p`, a class's constructor's); None: it takes any (**kwargs)."""
        params = self._params()
        if any(q.kind == q.VAR_KEYWORD for q in params.values()):
            return None
        names = [n for n, q in params.items() if q.kind in (q.KEYWORD_ONLY, q.POSITIONAL_OR_KEYWORD)
                 and n not in ("self", "ctx")]
        if not self.is_round and not isinstance(self.fn, type):   # the first argument is the Problem
            first = next((n for n, q in params.items() if q.kind != q.KEYWORD_ONLY), None)
            names = [n for n in names if n != first]
        return names

    def check_options(self, options: dict) -> None:
        """InputError naming an option it does not declare, or a value not of its default's shape."""
        params = self._params()
        known = self.option_names()
        unknown = sorted(set(options) - set(known or ()))
        if unknown and known is not None:
            raise InputError(f"{self.name} option", unknown[0],
                             f"unknown; {self.name} takes {', '.join(known) if known else 'no options'}")
        for name, value in options.items():
            _check_option(self.name, name, value, params[name].default if name in params else None)

    def bind(self, options: dict | None) -> PolicySpec:
        """An allocation policy with its `options` given (keyword arguments of its function, checked):
        what every solve of one run states."""
        if self.is_round:
            raise InputError("policy", self.name, "is a round policy: its options go to decider()")
        if not options:
            return self
        self.check_options(options)
        from functools import partial

        return replace(self, fn=partial(self.fn, **options))

    def decider(self, options: dict | None = None) -> Callable:
        """A round policy's `decide(ctx)` for one run, with its `options` (keyword arguments of the
        function, or of the class, which is built here once): InputError naming unknown ones."""
        if not self.is_round:
            raise InputError("policy", self.name, "is an allocation policy: it has no per-round decision")
        options = dict(options or {})
        self.check_options(options)
        if isinstance(self.fn, type):
            return self.fn(**options).decide
        if not options:
            return self.fn
        from functools import partial

        return partial(self.fn, **options)


def options_per_policy(policies: list[str], options: dict, field: str) -> dict[str, dict]:
    """Each policy's options out of one set given to several (`simulate --policy A,B --policy-option`, a
    sweep's policy axis). `NAME.KEY` is policy NAME's only (its listed name or the name it resolves to);
    a plain `KEY` goes to every listed policy that declares it, and is refused only when none does. With
    one policy, a plain key goes to it whatever it is (its own check names what it takes)."""
    specs = {name: get_policy(name) for name in policies}
    out: dict[str, dict] = {name: {} for name in policies}
    for key, value in options.items():
        scope, _, option = key.rpartition(".")
        if scope:
            named = [n for n, spec in specs.items() if scope in (n, spec.name)]
            if not named:
                raise InputError(field, key, f"{scope} is not a policy given here ({', '.join(policies)})")
            for n in named:
                out[n][option] = value
            continue
        takers = [n for n, spec in specs.items() if len(specs) == 1 or spec.option_names() is None
                  or key in spec.option_names()]
        if not takers:
            said = "; ".join(f"{n} takes {', '.join(specs[n].option_names()) or 'no options'}" for n in policies)
            raise InputError(field, key, f"no policy given takes it ({said}); POLICY.{key} gives it to one policy")
        for n in takers:
            out[n][key] = value
    return out


def _check_option(policy: str, name: str, value: object, default: object) -> None:
    """An option's value has the shape of its declared default (a number, a flag, a name), so that a
    wrong one is refused here in one line rather than deep inside the policy's arithmetic."""
    import math

    where = f"{policy} option {name}"
    if value is None:   # null: "none" or "off", which the policy itself accepts or refuses
        return
    if isinstance(default, bool):
        if not isinstance(value, bool):
            raise InputError(where, value, "must be true or false")
    elif isinstance(default, (int, float)):
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
            raise InputError(where, value, "must be a finite number")
        if isinstance(default, int) and not isinstance(value, int) and not float(value).is_integer():
            raise InputError(where, value, "must be an integer")
    elif isinstance(default, str) and not isinstance(value, str):
        raise InputError(where, value, "must be a name")


PACKED = "_packed"
AGNOSTIC = "_agnostic"
_REGISTRY: dict[str, PolicySpec] = {}
_ALIASES: dict[str, str] = {}


def policy(name: str, summary: str = "", *, aliases: tuple[str, ...] = (),
           agnostic_aliases: tuple[str, ...] = (), evaluate=None, agnostic: bool = True, spread: bool = True,
           symmetric: bool = False, pairs: bool = False, idle_aware: bool = False, entities: bool = False,
           per_job: bool = False, mechanism: str | None = None):
    """Register `fn(problem) -> Objective | cvxpy objective | Solution` under `name`.

    `spread=False` keeps an agnostic variant's per-type choices instead of spreading
    each job's share over the types in proportion to their GPU counts. `symmetric=True`
    declares that the objective looks only at throughputs, scale factors and weights, so
    identical jobs may be solved as one class (SchedulingProblem.job_classes).
    `pairs=True` declares that the policy packs jobs on its own from the pair throughputs
    (`p.input.pairs`): its input always carries them, and space sharing needs no
    `NAME_packed` variant of it. `idle_aware=True` declares that the policy may leave GPUs
    idle on purpose (it decides by price): its shares are meant as wall-clock time, and the
    round mechanism delivers them that way (`MechanismConfig.idle_aware`) instead of drifting
    jobs to the types that happen to be busy. `entities=True` declares that the policy shares
    across the declared entities: run without any, it is told (once) that every job is in one.
    `per_job=True` declares a max-min objective (with or without a second phase) whose row for
    each job, and that job's second-phase term, depend only on the job's throughputs, scale factor
    and weight and on the cluster's capacity, never on which other jobs there are: a warm solve
    (session.py) then states each kind of job once and keeps its row. `mechanism=NAME` declares
    that the policy reproduces a baseline that ran under another round mechanism than Gavel's
    (a preset of `MechanismConfig.PRESETS`, e.g. Sia's artifact's Gavel): the simulator and the
    runtime run its allocation under that preset.
    """

    def register(fn: PolicyFn) -> PolicyFn:
        text = summary or (fn.__doc__ or "").strip().splitlines()[0] if (summary or fn.__doc__) else ""
        _REGISTRY[name] = PolicySpec(name, fn, text, False, evaluate, spread, symmetric, pairs=pairs,
                                    idle_aware=idle_aware, entities=entities, per_job=per_job, mechanism=mechanism)
        for a in aliases:
            _ALIASES[a] = name
        if agnostic:
            _REGISTRY[name + AGNOSTIC] = PolicySpec(name + AGNOSTIC, fn, f"{text} (heterogeneity-agnostic)",
                                                    True, evaluate, spread, symmetric, pairs=pairs, base=name,
                                                    idle_aware=idle_aware, entities=entities, per_job=per_job,
                                                    mechanism=mechanism)
            for a in agnostic_aliases:
                _ALIASES[a] = name + AGNOSTIC
        return fn

    return register


def round_policy(name: str, summary: str = "", *, jobs: str = BOTH, round_seconds: float = 60.0,
                 type_aware: bool = True, aliases: tuple[str, ...] = (), gpu_counts: Callable | None = None):
    """Register a round policy (policies.rounds): `fn(ctx)` returning a column per job or a list of
    `Entry`, or a class built with the policy's options whose `decide(ctx)` does.

    `jobs` says how it runs adaptive jobs (those that declare a goodput model: a Pollux workload,
    a job spec's `adaptive` block): BOTH: adaptive jobs adapt, the others run at their GPU count;
    FIXED: every job runs at its tuned GPU count and batch; ADAPTIVE: it needs every job adaptive.
    `round_seconds` is how often it decides by default; `type_aware=False` declares a policy blind
    to the worker type (shown as heterogeneity-agnostic). `gpu_counts(topology)`, when given, declares
    the policy's own configuration set: one list of GPU counts per worker type, from which the planner
    builds `ctx.columns` instead of its global counts (Sia's follow each type's server size)."""
    if gpu_counts is not None and not callable(gpu_counts):
        raise TypeError(f"round policy {name}: gpu_counts must be a function of the topology")
    if jobs not in (FIXED, ADAPTIVE, BOTH):
        raise ValueError(f"round policy {name}: jobs must be {FIXED!r}, {ADAPTIVE!r} or {BOTH!r}, not {jobs!r}")
    if not (isinstance(round_seconds, (int, float)) and round_seconds > 0):
        raise ValueError(f"round policy {name}: round_seconds must be a positive number, not {round_seconds!r}")

    def register(fn):
        decide = getattr(fn, "decide", None) if isinstance(fn, type) else fn
        if not callable(decide):
            raise TypeError(f"round policy {name}: register a function of the context or a class with decide(ctx)")
        text = summary or ((fn.__doc__ or "").strip().splitlines() or [""])[0]
        _REGISTRY[name] = PolicySpec(name, fn, text, not type_aware, kind=ROUND, jobs=jobs,
                                     round_seconds=float(round_seconds), gpu_counts=gpu_counts)
        for a in aliases:
            _ALIASES[a] = name
        return fn

    return register


def get_policy(name: str) -> PolicySpec:
    """A policy by name or alias; `NAME_packed` is NAME's space-sharing variant (spec.packed)."""
    ensure_loaded()
    if name.endswith(PACKED) and name not in _REGISTRY and name not in _ALIASES:
        base = get_policy(name[:-len(PACKED)])
        if base.is_round:
            raise InputError("policy", name, f"{base.name} is a round policy: it has no space-sharing variant")
        return replace(base, name=base.name + PACKED, summary=f"{base.summary} (space sharing)", packed=True,
                       base=base.name)
    name = _ALIASES.get(name, name)
    if name not in _REGISTRY:
        raise InputError("policy", name, f"unknown policy; known: {', '.join(list_policies())}")
    return _REGISTRY[name]


def space_sharing_name(policy: str, space_sharing: bool) -> str:
    """The policy actually solved: `NAME_packed` when space sharing is on (a policy declared
    with `pairs=True`, such as gandiva, packs anyway)."""
    spec = get_policy(policy)
    if space_sharing and spec.is_round:
        raise InputError("--space-sharing", True, f"{spec.name} is a round policy: it gives jobs whole GPUs")
    if space_sharing and not spec.packed and not spec.pairs:
        return spec.name + PACKED
    return spec.name


def needs_pairs(policy: str) -> bool:
    """Whether the policy's input must carry pair throughputs (SchedulingProblem.pairs)."""
    spec = get_policy(policy)
    if spec.is_round:
        return False
    return spec.packed or spec.pairs


def is_agnostic_twin(policy: str, other: str) -> bool:
    """Whether `other` is the heterogeneity-agnostic variant of `policy` (las_agnostic of las)."""
    try:
        mine, theirs = get_policy(policy), get_policy(other)
    except InputError:
        return False
    return theirs.agnostic and not mine.agnostic and not theirs.packed and theirs.base == mine.name


def list_policies(include_aliases: bool = False) -> list[str]:
    ensure_loaded()
    names = sorted(_REGISTRY)
    return names + sorted(_ALIASES) if include_aliases else names


def aliases() -> dict[str, str]:
    ensure_loaded()
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
    spec = get_policy(name)
    if spec.is_round:
        raise InputError("policy", name, "is a round policy: it decides round by round, with no one-shot "
                                         "allocation to solve (simulate it, or run it on a cluster)")
    spec = spec.bind(options)
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
    if spec.spread:
        spread = spread_over_types(real, sol.x)
        # spreading over types is not the policy's decision: keep the solver's types if it would break a
        # constraint the policy stated (over what it sees, so checked there)
        if not blind.constraints or violations(blind, sol.x) or not violations(blind, spread):
            sol.x = spread
    sol.allocation = real.allocation(sol.x)
    sol.objective = objective_value(spec, real, sol.x)
    return sol, blind


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


# Loaders run once, before the first lookup: the package's __init__ adds the installed
# packages' entry points (plugins.py). The built-in policies need none: the package's
# __init__ imports their modules, which register themselves.
_deferred: list[Callable[[], object]] = []


def defer_until_lookup(loader: Callable[[], object]) -> None:
    """Run `loader` (once) before the registry is next looked up."""
    _deferred.append(loader)


def ensure_loaded() -> None:
    """Run the deferred loaders (the installed packages' policies), once per process."""
    while _deferred:
        _deferred.pop(0)()
