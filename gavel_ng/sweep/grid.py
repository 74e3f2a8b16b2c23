"""Sweep points and grids: one point is one `gavel-ng simulate` run.

A point's id hashes only the fields that differ from their defaults, so adding a field
(with a default) later keeps the ids of results already on disk: resuming still works.
"""

from __future__ import annotations

import hashlib
import itertools
import json
from dataclasses import asdict, dataclass, fields
from typing import Any

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
    round_seconds: float = 360.0
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
    placement: bool = False
    estimate_throughputs: bool = False
    profile_fraction: float = 0.25
    reference_jobs: int | None = None

    def __post_init__(self) -> None:
        sources = sum(v is not None for v in (self.jobs_per_hour, self.static, self.trace))
        if sources != 1:
            raise InputError("sweep point", self.describe(), "needs exactly one of jobs_per_hour, static, trace")
        if self.throughputs is not None and self.heterogeneity != 1.0:
            raise InputError("heterogeneity", self.heterogeneity,
                             "applies to the built-in profiles only (leave --throughputs out)")
        if self.ledger not in ("decay", "reset"):
            raise InputError("ledger", self.ledger, "must be decay or reset")

    def changed(self) -> dict[str, Any]:
        """Fields whose value differs from the default, in declaration order."""
        return {f.name: getattr(self, f.name) for f in fields(self) if getattr(self, f.name) != f.default}

    @property
    def point_id(self) -> str:
        text = json.dumps(self.changed(), sort_keys=True, default=str)
        return hashlib.sha1(text.encode()).hexdigest()[:16]

    def describe(self) -> str:
        return " ".join(f"{k}={v}" for k, v in self.changed().items())

    def as_row(self) -> dict[str, Any]:
        return asdict(self)


FIELDS: dict[str, Any] = {f.name: f for f in fields(SweepPoint)}


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
    if raw.lower() in ("none", "null", "") and FIELDS[name].default is None:
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
    points, seen = [], set()
    for values in itertools.product(*(axes[n] for n in names)):
        p = SweepPoint(**{**(base or {}), **dict(zip(names, values))})
        if p.point_id not in seen:
            seen.add(p.point_id)
            points.append(p)
    return points
