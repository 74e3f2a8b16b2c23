"""The standard gRPC health service on the scheduler and a worker: probes (Kubernetes' native
gRPC probes send no token) may Check it unauthenticated, nothing else is let through, and the
scheduler is NOT_SERVING while its state store cannot be written."""

from __future__ import annotations

import queue
import threading

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc
from test_store_full import fill_up, room

from gavel_ng.protocol.jobspec import JobSpec
from gavel_ng.protocol.protos import gavel_pb2 as pb
from gavel_ng.protocol.rpc import Security, Stub, open_channel
from gavel_ng.runtime.store import StoreError
from gavel_ng.worker.daemon import WorkerDaemon

SERVING, NOT_SERVING = health_pb2.HealthCheckResponse.SERVING, health_pb2.HealthCheckResponse.NOT_SERVING


def _check(port: int, service: str, metadata=()) -> int:
    with grpc.insecure_channel(f"127.0.0.1:{port}") as ch:
        reply = health_pb2_grpc.HealthStub(ch).Check(health_pb2.HealthCheckRequest(service=service), timeout=5,
                                                     metadata=metadata)
    return reply.status


def test_scheduler_and_worker_answer_health_checks_without_a_token(service, tmp_path):
    daemon = WorkerDaemon(f"127.0.0.1:{service.port}", "v100", 1, Security(service.secret), bind="127.0.0.1",
                          advertise="127.0.0.1", work_dir=str(tmp_path / "worker"), standby=0)
    daemon.start()
    try:
        for port, name in ((service.port, "gavel_ng.v1.Scheduler"), (daemon.port, "gavel_ng.v1.Worker")):
            assert _check(port, "") == SERVING
            assert _check(port, name) == SERVING
            with pytest.raises(grpc.RpcError) as err:
                _check(port, "no.such.Service")
            assert err.value.code() == grpc.StatusCode.NOT_FOUND
        # only Check is open: the services themselves, and Watch (which holds a thread), want the token
        with pytest.raises(grpc.RpcError) as err:
            Stub(open_channel(f"127.0.0.1:{daemon.port}", None), "Worker", "").KillJob(pb.KillJobRequest(job_id=1))
        assert err.value.code() == grpc.StatusCode.UNAUTHENTICATED
        with grpc.insecure_channel(f"127.0.0.1:{service.port}") as ch, pytest.raises(grpc.RpcError) as err:
            next(health_pb2_grpc.HealthStub(ch).Watch(health_pb2.HealthCheckRequest(service=""), timeout=5))
        assert err.value.code() == grpc.StatusCode.UNAUTHENTICATED
    finally:
        daemon.stop()


def _statuses(watch, seen: queue.Queue) -> None:
    try:
        for reply in watch:
            seen.put(reply.status)
    except grpc.RpcError:           # cancelled at the end of the test
        pass


def test_the_scheduler_is_not_serving_while_its_store_cannot_be_written(service):
    auth = (("authorization", f"Bearer {service.secret}"),)
    seen: queue.Queue = queue.Queue()
    ch = grpc.insecure_channel(f"127.0.0.1:{service.port}")
    watch = health_pb2_grpc.HealthStub(ch).Watch(health_pb2.HealthCheckRequest(service="gavel_ng.v1.Scheduler"),
                                                 metadata=auth, timeout=60)
    threading.Thread(target=_statuses, args=(watch, seen), daemon=True).start()
    try:
        assert seen.get(timeout=10) == SERVING
        fill_up(service.store)
        with pytest.raises(StoreError):
            service.state.submit([JobSpec("ResNet-18 (batch size 32)", steps=10, size="tiny")])
        assert _check(service.port, "") == NOT_SERVING
        assert _check(service.port, "gavel_ng.v1.Scheduler") == NOT_SERVING
        assert seen.get(timeout=10) == NOT_SERVING
        room(service.store)
        service.state.submit([JobSpec("ResNet-18 (batch size 32)", steps=10, size="tiny")])
        assert _check(service.port, "gavel_ng.v1.Scheduler") == SERVING
        assert seen.get(timeout=10) == SERVING
    finally:
        watch.cancel()
        ch.close()
