"""The scheduler service of the deployment runtime (Gavel §6): the gRPC server, the cluster's
state (workers, jobs and attempts, measured throughputs) kept in SQLite, and the round
executor that drives the worker daemons. It runs gavel_ng.mechanism's SchedulerLoop, the
loop the simulator runs, with DeployExecutor in place of the simulated clock, and talks to
workers, jobs and clients through gavel_ng.protocol. See docs/deploy.md.
"""

from __future__ import annotations

import importlib

# name -> submodule; loaded on first use, so that reading a state directory
# (`gavel-ng status --state`) does not load the policies and the solver
_EXPORTS = {"ClusterConfig": "config", "SchedulerService": "service", "read_state_dir": "status"}
__all__ = sorted(_EXPORTS)


def __getattr__(name: str):
    if name not in _EXPORTS:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f".{_EXPORTS[name]}", __name__), name)
