"""Fake workers for in-process scheduler services (the make_service fixture is in conftest.py)."""

from __future__ import annotations

import threading
import time

from gavel_ng.protocol.protos import gavel_pb2 as pb
from gavel_ng.protocol.rpc import SCHEDULER, Security, make_server, token_authenticator
from gavel_ng.runtime.service import SchedulerService


def register(svc: SchedulerService, worker_id: str, gpu_type: str, gpus: int) -> None:
    """A worker that registers but is never called (no RunJob reaches it)."""
    req = pb.RegisterWorkerRequest(worker_id=worker_id, address=f"{worker_id}:1", gpu_type=gpu_type, gpus=gpus)
    svc.state.register(req, lambda address: (None, None))


class FakeWorker:
    """A Worker service that accepts every RunJob and runs nothing."""

    def __init__(self):
        self.runs: list[tuple[int, int]] = []
        self.kills: list[tuple[int, int]] = []
        self.lock = threading.Lock()

    def RunJob(self, req, context):
        with self.lock:
            self.runs.append((req.job_id, req.attempt))
        return pb.Empty()

    def KillJob(self, req, context):
        with self.lock:
            self.kills.append((req.job_id, req.attempt))
        return pb.Empty()

    def serve(self, secret: str):
        """(server, address) of this service on loopback (a real gRPC server)."""
        return serve_worker(self, secret)


def adopt(svc: SchedulerService, alloc) -> None:
    """An allocation given instead of solved (mechanism.AllocationRows): what the mechanism plans from and
    status shows next, as a solve leaves them."""
    svc.planner.mech.reset(alloc)
    svc.planner.save_allocation(alloc)


def serve_worker(service, secret: str, max_workers: int = 4):
    """(server, address): a Worker service on loopback that takes the scheduler's calls (the cluster token:
    what a worker that registered without a call token of its own expects)."""
    server, port = make_server("127.0.0.1", 0, {"Worker": service}, Security(secret), max_workers=max_workers,
                               authenticate=token_authenticator(secret, SCHEDULER))
    return server, f"127.0.0.1:{port}"


def wait_for(cond, what: str, timeout: float = 60.0) -> None:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if cond():
            return
        time.sleep(0.05)
    raise AssertionError(what)
