"""gavel_ng: heterogeneity-aware scheduling for mixed-GPU deep-learning clusters."""

from .allocation import Allocation, AllocationError
from .cluster import Cluster
from .errors import InputError
from .jobs import Job
from .policies import Entity, Problem, SchedulingProblem, Solution, list_policies, policy, solve
from .throughputs import ThroughputTable

__version__ = "0.1.0"
__all__ = [
    "Allocation", "AllocationError", "Cluster", "Entity", "InputError", "Job", "Problem", "SchedulingProblem",
    "Solution", "ThroughputTable", "list_policies", "policy", "solve",
]
