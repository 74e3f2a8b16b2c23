"""One translation from `gavel-ng simulate`'s settings to a SimConfig, for `simulate` and every sweep point.

A setting is named as its flag (`--max-hours` is `max_hours`): the parsed command line and a
`SweepPoint` carry the same names, so both become a SimConfig here, and a point runs exactly what
`simulate` with the same flags runs. A setting the caller does not carry keeps SimConfig's default.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .engine import SimConfig, parse_window

HOUR = 3600.0


def _rules(path, field):
    from ..rules.model import read_cluster_rules

    return read_cluster_rules(path, field)


def _entities(path, field):
    from ..policies.input.entities import read_entities

    return read_entities(path, field)


# setting -> (SimConfig field, how its value becomes the field's: f(value, field name for errors) or None: as is)
SETTINGS: dict[str, tuple[str, Callable[[Any, str], Any] | None]] = {
    "round_seconds": ("round_seconds", None),
    "window": ("window", lambda v, _: parse_window(v)),
    "min_solve_interval": ("min_solve_interval", None),
    "preemption_overhead": ("preemption_overhead_s", None),
    "start_overhead": ("start_overhead_s", None),
    "ideal": ("ideal", None),
    "gavel_compat": ("gavel_compat", None),
    "cold_solves": ("warm_start", lambda v, _: not v),
    "seed": ("seed", None),
    "max_hours": ("max_sim_seconds", lambda v, _: None if v is None else v * HOUR),
    "max_active_jobs": ("max_active_jobs", None),
    "ledger": ("reset_ledger", lambda v, _: v == "reset"),
    "space_sharing": ("space_sharing", None),
    "placement_sensitive": ("placement_sensitive", None),
    "estimate_throughputs": ("estimate_throughputs", None),
    "profile_fraction": ("profile_fraction", None),
    "reference_jobs": ("reference_jobs", None),
    "realloc_delay": ("realloc_delay", None),
    "rules": ("rules", _rules),
    "entities": ("entities", _entities),
    "no_backfill": ("backfill", lambda v, _: not v),
    "plan_at_boundary": ("plan_ahead", lambda v, _: not v),
    "policy_model": ("policy_model", None),
}


def config_from_settings(settings: object, policy: str, options: dict | None,
                         field: Callable[[str], str] = lambda name: name) -> SimConfig:
    """The SimConfig of `policy` (with its `options`) under `settings`, an object whose attributes are named
    as simulate's flags (argparse's namespace, a SweepPoint); `field(name)` names a setting in errors."""
    kwargs: dict[str, Any] = {}
    for name, (target, convert) in SETTINGS.items():
        if hasattr(settings, name):
            value = getattr(settings, name)
            kwargs[target] = value if convert is None else convert(value, field(name))
    return SimConfig(policy=policy, options=options or {}, **kwargs)


def flag(name: str) -> str:
    """A setting as the command line spells it: `max_hours` -> `--max-hours`."""
    return "--" + name.replace("_", "-")
