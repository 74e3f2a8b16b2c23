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
have a one-shot form (`solve`, in pipeline.py: the registry holds names, not solving).

The registry is one object, `REGISTRY` (a `Registry`): a name is registered once; registering a
taken name again is an error unless the registration says `replace=True` (a plugin that means to
stand in for a built-in policy).
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace

from ..errors import InputError

log = logging.getLogger(__name__)
# of a Problem (policies.lp.problem, a layer above the names: the registry knows no LP)
PolicyFn = Callable[..., object]


ALLOCATION, ROUND = "allocation", "round"    # the two kinds of policy (module docstring)
FIXED, ADAPTIVE, BOTH = "fixed", "adaptive", "both"   # how a round policy runs adaptive jobs (round_policy)


@dataclass(frozen=True)
class PolicySpec:
    name: str
    fn: PolicyFn
    summary: str
    agnostic: bool = False
    evaluate: Callable[..., float] | None = None   # (Problem, x) -> the objective at x
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
        if self.is_round:   # (the one-shot solve and every allocation path come through here)
            raise InputError("policy", self.name, "is a round policy: it decides round by round, with no one-shot "
                                                  "allocation to solve (simulate it, or run it on a cluster)")
        if not options:
            return self
        self.check_options(options)
        from functools import partial

        return replace(self, fn=partial(self.fn, **options))

    def round_terms(self) -> tuple[str, float] | None:
        """What a round policy declares of how it runs: how it runs adaptive jobs (FIXED, ADAPTIVE, BOTH) and
        how often it decides unless told (seconds); None for an allocation policy, which declares neither."""
        return (self.jobs, self.round_seconds) if self.is_round else None

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


@dataclass
class Registry:
    """Policy names -> PolicySpec, aliases -> names, and which plugin registered which names.

    `add` refuses a name (or alias) already taken unless `replace=True`; `kept()` undoes everything
    registered inside it (tests; a plugin that fails halfway is undone with `state`/`restore`)."""

    specs: dict[str, PolicySpec] = field(default_factory=dict)
    aliases: dict[str, str] = field(default_factory=dict)
    plugins: dict[tuple[str, ...], tuple[str, ...]] = field(default_factory=dict)   # plugin identity -> names
    deferred: list[Callable[[], object]] = field(default_factory=list)

    def add(self, spec: PolicySpec, aliases: tuple[str, ...] = (), replace: bool = False) -> None:
        """Register `spec` under its name and `aliases`; ValueError for a name taken, unless `replace`."""
        for name in (spec.name, *aliases):
            taken = name in self.specs or name in self.aliases
            if taken and not replace:
                raise ValueError(f"policy {name!r} is registered already (by {self._origin(name)}); "
                                 "register under another name, or say replace=True to stand in for it")
        self.specs[spec.name] = spec
        self.aliases.pop(spec.name, None)
        for a in aliases:
            self.specs.pop(a, None)
            self.aliases[a] = spec.name

    def _origin(self, name: str) -> str:
        spec = self.specs.get(self.aliases.get(name, name))
        return getattr(spec.fn, "__module__", None) or "?" if spec is not None else "?"

    def get(self, name: str) -> PolicySpec:
        """A policy by name or alias; `NAME_packed` is NAME's space-sharing variant (spec.packed)."""
        self.load_deferred()
        if name.endswith(PACKED) and name not in self.specs and name not in self.aliases:
            base = self.get(name[:-len(PACKED)])
            if base.is_round:
                raise InputError("policy", name, f"{base.name} is a round policy: it has no space-sharing variant")
            return replace(base, name=base.name + PACKED, summary=f"{base.summary} (space sharing)", packed=True,
                           base=base.name)
        name = self.aliases.get(name, name)
        if name not in self.specs:
            raise InputError("policy", name, f"unknown policy; known: {', '.join(self.names())}")
        return self.specs[name]

    def names(self, include_aliases: bool = False) -> list[str]:
        self.load_deferred()
        names = sorted(self.specs)
        return names + sorted(self.aliases) if include_aliases else names

    def state(self) -> tuple[dict, dict, dict]:
        """What `restore` returns to (the registry without the deferred loaders)."""
        return dict(self.specs), dict(self.aliases), dict(self.plugins)

    def restore(self, state: tuple[dict, dict, dict]) -> None:
        for live, saved in zip((self.specs, self.aliases, self.plugins), state):
            live.clear()
            live.update(saved)

    @contextlib.contextmanager
    def kept(self) -> Iterator[Registry]:
        """Everything registered inside leaves at its end (the deferred loaders run first, so they stay)."""
        self.load_deferred()
        saved = self.state()
        try:
            yield self
        finally:
            self.restore(saved)

    def since(self, state: tuple[dict, dict, dict]) -> tuple[str, ...]:
        """The names and aliases registered (or replaced) after `state` was taken."""
        specs, aliases, _ = state
        names = [n for n, s in self.specs.items() if specs.get(n) is not s]
        names += [a for a, t in self.aliases.items() if aliases.get(a) != t]
        return tuple(dict.fromkeys(names))

    def defined_in(self, module: str) -> tuple[str, ...]:
        """The names whose policy function or class is defined in `module` (or a module under it)."""
        return tuple(n for n, s in self.specs.items()
                     if getattr(s.fn, "__module__", None) == module or
                     str(getattr(s.fn, "__module__", "")).startswith(module + "."))

    def defer(self, loader: Callable[[], object]) -> None:
        """Run `loader` (once) before the registry is next looked up."""
        self.deferred.append(loader)

    def load_deferred(self) -> None:
        """Run the deferred loaders (the installed packages' policies), once per process."""
        while self.deferred:
            self.deferred.pop(0)()


# The one registry of this process: the package's __init__ imports the built-in policies (each registers
# itself) and defers the installed packages' entry points (plugins.py) to the first lookup.
REGISTRY = Registry()


def policy(name: str, summary: str = "", *, aliases: tuple[str, ...] = (),
           agnostic_aliases: tuple[str, ...] = (), evaluate=None, agnostic: bool = True, spread: bool = True,
           symmetric: bool = False, pairs: bool = False, idle_aware: bool = False, entities: bool = False,
           per_job: bool = False, mechanism: str | None = None, replace: bool = False):
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
    runtime run its allocation under that preset. `replace=True` stands in for a policy registered
    under `name` (and its variant) already; without it a taken name is an error (Registry.add).
    """

    def register(fn: PolicyFn) -> PolicyFn:
        text = summary or (fn.__doc__ or "").strip().splitlines()[0] if (summary or fn.__doc__) else ""
        REGISTRY.add(PolicySpec(name, fn, text, False, evaluate, spread, symmetric, pairs=pairs,
                                idle_aware=idle_aware, entities=entities, per_job=per_job, mechanism=mechanism),
                     aliases, replace)
        if agnostic:
            REGISTRY.add(PolicySpec(name + AGNOSTIC, fn, f"{text} (heterogeneity-agnostic)", True, evaluate, spread,
                                    symmetric, pairs=pairs, base=name, idle_aware=idle_aware, entities=entities,
                                    per_job=per_job, mechanism=mechanism), agnostic_aliases, replace)
        return fn

    return register


def round_policy(name: str, summary: str = "", *, jobs: str = BOTH, round_seconds: float = 60.0,
                 type_aware: bool = True, aliases: tuple[str, ...] = (), gpu_counts: Callable | None = None,
                 replace: bool = False):
    """Register a round policy (policies.rounds): `fn(ctx)` returning a column per job or a list of
    `Entry`, or a class built with the policy's options whose `decide(ctx)` does.

    `jobs` says how it runs adaptive jobs (those that declare a goodput model: a Pollux workload,
    a job spec's `adaptive` block): BOTH: adaptive jobs adapt, the others run at their GPU count;
    FIXED: every job runs at its tuned GPU count and batch; ADAPTIVE: it needs every job adaptive.
    `round_seconds` is how often it decides by default; `type_aware=False` declares a policy blind
    to the worker type (shown as heterogeneity-agnostic). `gpu_counts(topology)`, when given, declares
    the policy's own configuration set: one list of GPU counts per worker type, from which the planner
    builds `ctx.columns` instead of its global counts (Sia's follow each type's server size). `replace`:
    as for `policy`."""
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
        REGISTRY.add(PolicySpec(name, fn, text, not type_aware, kind=ROUND, jobs=jobs,
                                round_seconds=float(round_seconds), gpu_counts=gpu_counts), aliases, replace)
        return fn

    return register


def get_policy(name: str) -> PolicySpec:
    """A policy by name or alias; `NAME_packed` is NAME's space-sharing variant (spec.packed)."""
    return REGISTRY.get(name)


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
    return REGISTRY.names(include_aliases)


def aliases() -> dict[str, str]:
    REGISTRY.load_deferred()
    return dict(REGISTRY.aliases)
