"""Fake workers for in-process scheduler services (the make_service fixture is in conftest.py)."""

from __future__ import annotations

from gavel_ng.protocol.protos import gavel_pb2 as pb
from gavel_ng.runtime.service import SchedulerService


def register(svc: SchedulerService, worker_id: str, gpu_type: str, gpus: int) -> None:
    """A worker that registers but is never called (no RunJob reaches it)."""
    req = pb.RegisterWorkerRequest(worker_id=worker_id, address=f"{worker_id}:1", gpu_type=gpu_type, gpus=gpus)
    svc.state.register(req, lambda address: (None, None))
