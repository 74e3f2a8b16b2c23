"""Scheduling policies as optimization problems over effective throughput.

Importing the package registers the built-in policies (builtin.py imports their
modules, each registers itself with `@policy`); the installed packages' policies
(entry points, plugins.py) are loaded when the registry is first looked up.
"""

from . import builtin  # noqa: F401  (registers the built-in policies)
from .affine import Affine, LinearConstraint
from .entities import Entity
from .objective import Objective, Solution
from .pipeline import agnostic_throughputs, solve
from .plugins import load_entry_points
from .problem import Problem
from .registry import REGISTRY, aliases, get_policy, list_policies, policy, round_policy
from .rounds import Entry, RoundContext
from .scheduling_problem import Combinations, SchedulingProblem

REGISTRY.defer(load_entry_points)

__all__ = [
    "Affine", "LinearConstraint", "Combinations", "Entity", "SchedulingProblem", "Objective", "Problem",
    "Solution", "agnostic_throughputs", "aliases", "get_policy", "list_policies", "policy", "solve",
    "round_policy", "Entry", "RoundContext",
]
