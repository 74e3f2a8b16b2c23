"""Scheduling policies as optimization problems over effective throughput.

Importing the package registers the built-in policies (builtin.py imports their
modules, each registers itself with `@policy`); the installed packages' policies
(entry points, plugins.py) are loaded when the registry is first looked up.
"""

from . import builtin  # noqa: F401  (registers the built-in policies)
from .input.entities import Entity
from .input.scheduling_problem import Combinations, SchedulingProblem
from .lp.affine import Affine, LinearConstraint
from .lp.objective import Objective, Solution
from .lp.pipeline import agnostic_throughputs, solve
from .lp.problem import Problem
from .plugins import load_entry_points
from .registry import REGISTRY, aliases, get_policy, list_policies, policy, round_policy
from .rounds import Entry, RoundContext

REGISTRY.defer(load_entry_points)

__all__ = [
    "Affine", "LinearConstraint", "Combinations", "Entity", "SchedulingProblem", "Objective", "Problem",
    "Solution", "agnostic_throughputs", "aliases", "get_policy", "list_policies", "policy", "solve",
    "round_policy", "Entry", "RoundContext",
]
