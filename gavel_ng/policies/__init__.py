"""Scheduling policies as optimization problems over effective throughput."""

from .affine import Affine, LinearConstraint
from .inputs import Combinations, Entity, SchedulingProblem
from .problem import Objective, Problem, Solution
from .registry import agnostic_throughputs, aliases, get_policy, list_policies, policy, solve

__all__ = [
    "Affine", "LinearConstraint", "Combinations", "Entity", "SchedulingProblem", "Objective", "Problem",
    "Solution", "agnostic_throughputs", "aliases", "get_policy", "list_policies", "policy", "solve",
]
