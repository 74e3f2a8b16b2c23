"""gavel_ng: heterogeneity-aware scheduling for mixed-GPU deep-learning clusters.

The public names below are imported on first use (PEP 562), so that what runs inside a
training job or on a worker (gavel_ng.iterator, gavel_ng.worker, gavel_ng.protocol) does
not load the policies and their solvers by importing the package.
"""

from importlib import import_module

__version__ = "0.1.0"
_WHERE = {
    "Allocation": ".allocation", "AllocationError": ".allocation", "Cluster": ".cluster", "InputError": ".errors",
    "Job": ".jobs", "ThroughputTable": ".throughputs", "Entity": ".policies", "Problem": ".policies",
    "SchedulingProblem": ".policies", "Solution": ".policies", "list_policies": ".policies", "policy": ".policies",
    "solve": ".policies", "round_policy": ".policies", "RoundContext": ".policies",
}
__all__ = sorted(_WHERE)


def __getattr__(name: str):
    if name not in _WHERE:
        raise AttributeError(f"module 'gavel_ng' has no attribute {name!r}")
    value = getattr(import_module(_WHERE[name], __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *_WHERE])
