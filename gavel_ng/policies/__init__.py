"""Scheduling policies as optimization problems over effective throughput.

Importing the package registers the built-in policies (builtin.py imports their
modules, each registers itself with `@policy`); the installed packages' policies
(entry points, plugins.py) are loaded when the registry is first looked up.
"""

from . import builtin  # noqa: F401  (registers the built-in policies)
from .affine import Affine, LinearConstraint
from .entities import Entity
from .objective import Objective, Solution
from .plugins import load_entry_points
from .problem import Problem
from .registry import (
    agnostic_throughputs,
    aliases,
    defer_until_lookup,
    get_policy,
    list_policies,
    policy,
    round_policy,
    solve,
)
from .rounds import Entry, RoundContext
from .scheduling_problem import Combinations, SchedulingProblem

defer_until_lookup(load_entry_points)

__all__ = [
    "Affine", "LinearConstraint", "Combinations", "Entity", "SchedulingProblem", "Objective", "Problem",
    "Solution", "agnostic_throughputs", "aliases", "get_policy", "list_policies", "policy", "solve",
    "round_policy", "Entry", "RoundContext",
]
