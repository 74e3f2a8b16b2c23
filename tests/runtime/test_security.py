"""Tokens, job-scoped tokens, TLS, and validation of submissions: refused with the right status."""

from __future__ import annotations

import shutil
import subprocess

import grpc
import pytest

from gavel_ng.protocol.client import SchedulerClient, SchedulerError
from gavel_ng.protocol.protos import gavel_pb2 as pb
from gavel_ng.protocol.rpc import Security, Stub, job_token, open_channel
from gavel_ng.runtime.config import ClusterConfig
from gavel_ng.runtime.service import SchedulerService

GOOD = {"job_type": "ResNet-18 (batch size 32)", "steps": 10, "size": "tiny"}


def _stub(svc, token):
    return Stub(open_channel(f"127.0.0.1:{svc.port}", None), "Scheduler", token, timeout=5)


@pytest.mark.parametrize("token", ["", "wrong", "job:1:1:0000"])
def test_calls_without_a_valid_token_are_unauthenticated(service, token):
    stub = _stub(service, token)
    for method, req in [("GetStatus", pb.Empty()), ("SubmitJobs", pb.SubmitJobsRequest()),
                        ("RegisterWorker", pb.RegisterWorkerRequest()), ("InitJob", pb.InitJobRequest(job_id=1))]:
        with pytest.raises(grpc.RpcError) as err:
            getattr(stub, method)(req)
        assert err.value.code() == grpc.StatusCode.UNAUTHENTICATED, method
    assert _stub(service, service.secret).GetStatus(pb.Empty()).policy == "las"   # still serving


def test_job_tokens_reach_only_their_own_lease(service):
    with SchedulerClient(f"127.0.0.1:{service.port}", token=service.secret) as c:
        [job] = c.submit(GOOD)
    stub = _stub(service, job_token(service.secret, job, 1))
    with pytest.raises(grpc.RpcError) as err:
        stub.SubmitJobs(pb.SubmitJobsRequest(jobs=[pb.JobSpec(job_type=GOOD["job_type"], steps=1)]))
    assert err.value.code() == grpc.StatusCode.PERMISSION_DENIED     # a valid token, for its own lease calls only
    with pytest.raises(grpc.RpcError) as err:
        stub.InitJob(pb.InitJobRequest(job_id=job + 1, attempt=1))
    assert err.value.code() == grpc.StatusCode.PERMISSION_DENIED
    lease = stub.InitJob(pb.InitJobRequest(job_id=job, attempt=1))
    assert lease.steps_total == 10 and lease.seconds_left == -1      # no such attempt is running


@pytest.mark.parametrize("bad, field", [
    ({**GOOD, "steps": 0}, "jobs[0].steps"),
    ({**GOOD, "job_type": "NoSuchNet (batch size 1)"}, "jobs[0].command"),   # a class of its own needs its argv
    ({**GOOD, "scale_factor": 3}, "jobs[0].scale_factor"),
    ({**GOOD, "weight": -1.0}, "jobs[0].weight"),
    ({**GOOD, "size": "huge"}, "jobs[0].size"),
    ({**GOOD, "env": {"CUDA_VISIBLE_DEVICES": "0"}}, "jobs[0].env"),
])
def test_malformed_submissions_are_invalid_argument_naming_the_field(service, bad, field):
    stub = _stub(service, service.secret)
    spec = pb.JobSpec(job_type=bad["job_type"], steps=bad["steps"], scale_factor=bad.get("scale_factor", 1),
                      weight=bad.get("weight", 0.0), size=bad.get("size", ""), env=bad.get("env", {}))
    with pytest.raises(grpc.RpcError) as err:
        stub.SubmitJobs(pb.SubmitJobsRequest(jobs=[pb.JobSpec(**{**_fields(GOOD)}), spec]))
    assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert field.replace("[0]", "[1]") in err.value.details()
    assert len(stub.ListJobs(pb.ListJobsRequest(include_finished=True)).jobs) == 0    # all or nothing
    with SchedulerClient(f"127.0.0.1:{service.port}", token=service.secret) as c:
        assert c.submit(GOOD)                                                         # still serving


def test_client_raises_scheduler_error(service):
    with SchedulerClient(f"127.0.0.1:{service.port}", token="nope") as c, pytest.raises(SchedulerError) as err:
        c.status()
    assert err.value.code == "UNAUTHENTICATED"


def _fields(d):
    return {"job_type": d["job_type"], "steps": d["steps"], "size": d.get("size", "")}


@pytest.mark.skipif(shutil.which("openssl") is None, reason="openssl not installed")
def test_tls(tmp_path):
    key, cert = tmp_path / "key.pem", tmp_path / "cert.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", str(key), "-out",
                    str(cert), "-days", "1", "-subj", "/CN=localhost", "-addext", "subjectAltName=IP:127.0.0.1"],
                   check=True, capture_output=True)
    config = ClusterConfig(round_seconds=1.0, tls_cert=str(cert), tls_key=str(key))
    svc = SchedulerService(config, tmp_path / "state", port=0, bind="127.0.0.1")
    svc.start()
    try:
        with SchedulerClient(f"127.0.0.1:{svc.port}", token=svc.secret, tls_ca=str(cert)) as c:
            assert c.status().policy == "las"
        plain = Stub(open_channel(f"127.0.0.1:{svc.port}", Security(svc.secret)), "Scheduler", svc.secret, timeout=3)
        with pytest.raises(grpc.RpcError):
            plain.GetStatus(pb.Empty())
    finally:
        svc.stop(grace=0.1)


def test_malformed_adaptive_blocks_and_reports_are_invalid_argument(service):
    stub = _stub(service, service.secret)
    bad = pb.JobSpec(job_type=GOOD["job_type"], steps=10, adaptive='{"init_batch": 64, "max_batch": 32}')
    with pytest.raises(grpc.RpcError) as err:
        stub.SubmitJobs(pb.SubmitJobsRequest(jobs=[bad]))
    assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "jobs.adaptive.max_batch" in err.value.details()
    with SchedulerClient(f"127.0.0.1:{service.port}", token=service.secret) as c:
        [job] = c.submit({**GOOD, "adaptive": {"init_batch": 32, "max_batch": 256}})
        assert c.jobs()[0].adaptive.resizes == 0 and c.jobs()[0].adaptive.batch is None
    report = pb.AdaptiveReport(gpus=1, servers=1, batch=0, local_batch=32, max_local_batch=64)
    with pytest.raises(grpc.RpcError) as err:
        _stub(service, job_token(service.secret, job, 1)).UpdateLease(
            pb.UpdateLeaseRequest(job_id=job, attempt=1, steps=5, report=report))
    assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT and "report.batch" in err.value.details()
