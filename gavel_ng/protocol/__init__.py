"""The wire protocol of the deployment runtime, shared by the scheduler service, the worker
daemons, job processes and clients: gavel.proto and its message stubs (protos/), the gRPC
plumbing with tokens, TLS and authentication (rpc.py), the job spec as submitted and
launched (jobspec.py) and the Python client of the scheduler (client.py).
"""

from __future__ import annotations

import importlib

# name -> submodule; loaded on first use, so that importing the package (e.g. to run
# protos.generate) loads neither grpc nor the message stubs
_EXPORTS = {"ClusterStatus": "client", "JobStatus": "client", "SchedulerClient": "client",
            "SchedulerError": "client", "WorkerStatus": "client", "JobSpec": "jobspec"}
__all__ = sorted(_EXPORTS)


def __getattr__(name: str):
    if name not in _EXPORTS:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f".{_EXPORTS[name]}", __name__), name)
