"""Sweep points and grids: one point is one `gavel-ng simulate` run.

A point's id hashes only the fields that differ from their defaults, so adding a field
(with a default) later keeps the ids of results already on disk: resuming still works.

Every point runs the one simulator, whatever its policy or source: a Gavel trace
(generated, or a file), a drawn workload (`workload`: pollux or one of Sia's mixes) or a
Pollux CSV as `trace` (the file's content tells, as in `simulate`). Only fields that apply
to one kind of source are checked against it (`jobs`, `hours`: a drawn workload; a value
equal to the workload's own size counts as unset in the point id, so both spellings share it).
"""

from __future__ import annotations

import hashlib
import itertools
import json
from dataclasses import asdict, dataclass, fields, replace
from typing import Any

from ..elastic.profile_sets import check_profiles
from ..errors import InputError

DEFAULT_CLUSTER = "v100=36,p100=36,k80=36"


@dataclass(frozen=True)
class SweepPoint:
    """Every `gavel-ng simulate` setting a sweep can vary (names match the CLI flags)."""

    policy: str = "las"
    cluster: str = DEFAULT_CLUSTER
    gpus_per_server: int = 4
    jobs_per_hour: float | None = None   # continuous trace (Poisson arrivals)
    static: int | None = None            # static trace of N jobs at t=0
    trace: str | None = None             # a Gavel trace file
    multi_gpu: bool = False
    priorities: bool = False
    slos: bool = False
    window: str | None = None            # "START:END" job ids; None: simulate's default
    seed: int = 0
    round_seconds: float | None = None   # None: the policy's declared interval (360 s for allocation policies)
    throughputs: str | None = None       # gavel-osdi20, a .json or a .csv table; None: built-in profiles
    heterogeneity: float = 1.0           # exponent on speedups over V100 (built-in profiles only)
    ideal: bool = False
    gavel_compat: bool = False
    min_solve_interval: float = 0.0
    preemption_overhead: float = 0.0
    ledger: str = "decay"
    max_hours: float | None = None
    max_active_jobs: int = 4000
    # simulator features landing with space sharing and the estimator (used when SimConfig has them)
    space_sharing: bool = False
    placement_sensitive: bool = False
    estimate_throughputs: bool = False
    profile_fraction: float = 0.25
    reference_jobs: int | None = None
    # constraints and entities (gavel_ng.rules): JSON files, as `simulate --rules/--entities`
    rules: str | None = None
    entities: str | None = None
    # Pollux workloads (gavel_ng.elastic; `simulate --workload` and its flags)
    workload: str | None = None          # pollux, sia-philly, sia-helios, sia-newtrace: `jobs` jobs in `hours` hours
    jobs: int | None = None              # None: the workload's own (160; 960 for sia-newtrace)
    hours: float | None = None           # None: the workload's own (8; 48 for sia-newtrace)
    realloc_delay: float = 30.0          # seconds an adaptive job loses at each change of configuration
    elastic_profiles: str = "modeled"    # a Pollux workload's profile set (`simulate --elastic-profiles`)
    policy_options: str | None = None    # the policy's options as a JSON object (`simulate --policy-option`)

    def __post_init__(self) -> None:
        sources = sum(v is not None for v in (self.jobs_per_hour, self.static, self.trace, self.workload))
        if sources != 1:
            raise InputError("sweep point", self.describe(),
                             "needs exactly one of jobs_per_hour, static, trace, workload")
        self._check_source()
        if self.throughputs is not None and self.heterogeneity != 1.0:
            raise InputError("heterogeneity", self.heterogeneity,
                             "applies to the built-in profiles only (leave --throughputs out)")
        if self.ledger not in ("decay", "reset"):
            raise InputError("ledger", self.ledger, "must be decay or reset")
        if self.round_seconds is not None and not self.round_seconds > 0:
            raise InputError("round_seconds", self.round_seconds, "must be positive (none: the policy's own)")
        if not self.realloc_delay >= 0:
            raise InputError("realloc_delay", self.realloc_delay, "must be a number of seconds >= 0")
        check_profiles(self.elastic_profiles, "elastic_profiles")
        if isinstance(self.policy_options, dict):   # a --grid file's JSON object as it is
            object.__setattr__(self, "policy_options", json.dumps(self.policy_options))
        if self.policy_options is not None:
            # one spelling per set of options, so that equal options give equal point ids
            options = self.options
            object.__setattr__(self, "policy_options", json.dumps(options, sort_keys=True) if options else None)

    def _check_source(self) -> None:
        """Fields of a drawn Pollux workload set on another source are errors, not silently ignored."""
        if self.workload is None:
            for name in WORKLOAD_ONLY:
                if name in self.changed():
                    raise InputError(name, getattr(self, name), "applies to a drawn workload only")
            return
        from ..elastic.sia_workloads import WORKLOAD_NAMES

        if self.workload not in WORKLOAD_NAMES:
            raise InputError("workload", self.workload, f"must be one of {', '.join(WORKLOAD_NAMES)}")
        if self.jobs is not None and self.jobs < 1:
            raise InputError("jobs", self.jobs, "must be at least 1")
        if self.hours is not None and not self.hours > 0:
            raise InputError("hours", self.hours, "must be positive")
        if self.heterogeneity != 1.0:
            raise InputError("heterogeneity", self.heterogeneity, "applies to Gavel traces' built-in profiles "
                             "(a Pollux workload's fixed jobs follow the performance model)")

    @property
    def options(self) -> dict:
        """`policy_options` as a dict (SimConfig.options)."""
        if self.policy_options is None:
            return {}
        try:
            data = json.loads(self.policy_options)
        except json.JSONDecodeError as exc:
            raise InputError("policy_options", self.policy_options, f"not JSON ({exc.msg})") from None
        if not isinstance(data, dict):
            raise InputError("policy_options", self.policy_options, 'must be a JSON object, e.g. {"p": -1}')
        return data

    def changed(self) -> dict[str, Any]:
        """Fields whose value differs from the default, in declaration order; a drawn workload's
        `jobs` and `hours` also count as default when they equal the workload's own size."""
        out = {f.name: getattr(self, f.name) for f in fields(self) if getattr(self, f.name) != f.default}
        from ..elastic.sia_workloads import WORKLOAD_NAMES, workload_size

        if self.workload in WORKLOAD_NAMES:
            for name, own in zip(("jobs", "hours"), workload_size(self.workload)):
                if out.get(name) == own:
                    del out[name]
        return out

    @property
    def point_id(self) -> str:
        text = json.dumps(self.changed(), sort_keys=True, default=str)
        return hashlib.sha1(text.encode()).hexdigest()[:16]

    def describe(self, keys: list[str] | None = None) -> str:
        """`key=value` of the fields changed from their defaults, or of `keys` (shown_fields)."""
        if keys is None:
            return " ".join(f"{k}={v}" for k, v in self.changed().items())
        return " ".join(f"{k}={getattr(self, k)}" for k in keys)

    def as_row(self) -> dict[str, Any]:
        return asdict(self)


FIELDS: dict[str, Any] = {f.name: f for f in fields(SweepPoint)}


def shown_fields(points: list[SweepPoint]) -> list[str]:
    """What names a point among `points`: its policy, every field the grid varies (a default value
    included: `policy=las` of a grid over las and fifo) and every field set away from its default."""
    varies = {name for name in FIELDS if len({repr(getattr(p, name)) for p in points}) > 1}
    changed = {name for p in points for name in p.changed()}
    return [name for name in FIELDS if name == "policy" or name in varies or name in changed]
WORKLOAD_ONLY = ("jobs", "hours")   # what only a drawn Pollux workload has


def field_type(name: str) -> str:
    """'float', 'int', 'bool' or 'str' (optional fields by their inner type)."""
    t = str(FIELDS[name].type)
    for k in ("float", "int", "bool"):
        if t.startswith(k):
            return k
    return "str"


def parse_value(name: str, text: str) -> Any:
    """One CLI value for field `name`; 'none' clears an optional field."""
    if name not in FIELDS:
        raise InputError("sweep axis", name, f"unknown; known: {', '.join(FIELDS)}")
    kind, raw = field_type(name), text.strip()
    if raw.lower() in ("none", "null", "") and (FIELDS[name].default is None or "None" in str(FIELDS[name].type)):
        return None
    try:
        if kind == "float":
            return float(raw)
        if kind == "int":
            return int(raw)
        if kind == "bool":
            if raw.lower() in ("1", "true", "yes", "on"):
                return True
            if raw.lower() in ("0", "false", "no", "off"):
                return False
            raise ValueError
    except ValueError:
        raise InputError(f"--{name.replace('_', '-')}", raw, f"expected a {kind}") from None
    return raw


def expand(axes: dict[str, list[Any]], base: dict[str, Any] | None = None) -> list[SweepPoint]:
    """The cartesian product of the axes (first axis outermost), over `base` settings."""
    for name in list(axes) + list(base or {}):
        if name not in FIELDS:
            raise InputError("sweep axis", name, f"unknown; known: {', '.join(FIELDS)}")
    names = list(axes)
    built = [SweepPoint(**{**(base or {}), **dict(zip(names, values))})
             for values in itertools.product(*(axes[n] for n in names))]
    points, seen = [], set()
    for p in _own_options(built):
        if p.point_id not in seen:
            seen.add(p.point_id)
            points.append(p)
    return points


def _own_options(points: list[SweepPoint]) -> list[SweepPoint]:
    """Each point with only its policy's options, as `simulate --policy A,B` gives them
    (registry.options_per_policy over the grid's policies): `sia.p` reaches sia's points only, a
    plain key the points whose policy takes it. A point's id then says what it actually ran with."""
    if not any(p.policy_options for p in points):
        return points
    from ..policies.registry import options_per_policy

    policies = list(dict.fromkeys(p.policy for p in points))
    out = []
    for p in points:
        if p.policy_options:
            own = options_per_policy(policies, p.options, "policy_options")[p.policy]
            p = replace(p, policy_options=json.dumps(own, sort_keys=True) if own else None)
        out.append(p)
    return out

