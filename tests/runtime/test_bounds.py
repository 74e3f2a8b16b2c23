"""Bounds on what a submission may hold: sizes per job field, jobs per call, unfinished jobs
(max_unfinished_jobs), and idempotency keys. Each refusal names the field and the limit; nothing is stored."""

from __future__ import annotations

import grpc
import pytest

from gavel_ng.protocol.client import SchedulerClient
from gavel_ng.protocol.jobspec import JobSpec
from gavel_ng.protocol.protos import gavel_pb2 as pb
from gavel_ng.protocol.rpc import Stub, open_channel
from gavel_ng.runtime.config import ClusterConfig
from gavel_ng.runtime.records import StateReader
from gavel_ng.runtime.service import SchedulerService

GOOD = pb.JobSpec(job_type="ResNet-18 (batch size 32)", steps=10, size="tiny")


def _start(tmp_path, **config):
    svc = SchedulerService(ClusterConfig(round_seconds=1.0, **config), tmp_path / "state", port=0, bind="127.0.0.1")
    svc.start()
    return svc


@pytest.fixture
def service(tmp_path):
    svc = _start(tmp_path)
    yield svc
    svc.stop(grace=0.1)


@pytest.fixture
def small_queue(tmp_path):
    svc = _start(tmp_path, max_unfinished_jobs=30)
    yield svc
    svc.stop(grace=0.1)


def _stub(svc):
    return Stub(open_channel(f"127.0.0.1:{svc.port}", None), "Scheduler", svc.secret, timeout=30)


def _refused(svc, req, code=grpc.StatusCode.INVALID_ARGUMENT) -> str:
    stub = _stub(svc)
    with pytest.raises(grpc.RpcError) as err:
        stub.SubmitJobs(req)
    assert err.value.code() == code, err.value.details()
    assert len(stub.ListJobs(pb.ListJobsRequest(include_finished=True)).jobs) == 0    # nothing stored
    return err.value.details()


def _with(**fields) -> pb.JobSpec:
    spec = pb.JobSpec()
    spec.CopyFrom(GOOD)
    for key, value in fields.items():
        if key == "env":
            spec.env.update(value)
        elif key == "command":
            spec.command.extend(value)
        else:
            setattr(spec, key, value)
    return spec


@pytest.mark.parametrize("fields, field, limit", [
    ({"env": {"BIG": "x" * (3 << 20)}}, "jobs[1].env", "16384 bytes"),
    ({"env": {f"V{i}": "1" for i in range(65)}}, "jobs[1].env", "64 variables"),
    ({"command": ["python", "x" * 20000]}, "jobs[1].command", "16384 bytes"),
    ({"command": ["echo"] * 257}, "jobs[1].command", "256 arguments"),
    ({"working_dir": "/" + "d" * 5000}, "jobs[1].working_dir", "4096 characters"),
    ({"job_type": "ResNet-18 (batch size 32)" + " " * 300}, "jobs[1].job_type", "200 characters"),
    ({"rules": '{"labels": ["' + "l" * 20000 + '"]}'}, "jobs.rules", "16384 bytes"),
])
def test_oversize_fields_are_refused_naming_field_and_limit(service, fields, field, limit):
    details = _refused(service, pb.SubmitJobsRequest(jobs=[GOOD, _with(**fields)]))
    assert details.startswith(field) and limit in details, details


def test_job_file_sizes_are_checked_before_sending():
    from gavel_ng.errors import InputError

    with pytest.raises(InputError) as err:
        JobSpec.from_dict({"job_type": "LM (batch size 20)", "steps": 5, "env": {"A": "x" * 20000}}, "jobs[3]")
    assert err.value.field == "jobs[3].env" and "16384 bytes" in str(err.value)


def test_jobs_per_call_are_bounded(service):
    details = _refused(service, pb.SubmitJobsRequest(jobs=[GOOD] * 10_001))
    assert details.startswith("jobs=") and "at most 10000 per SubmitJobs call" in details


def test_max_unfinished_jobs_refuses_with_resource_exhausted(small_queue):
    service = small_queue
    stub = _stub(service)
    ids = stub.SubmitJobs(pb.SubmitJobsRequest(jobs=[GOOD] * 25)).job_ids
    with pytest.raises(grpc.RpcError) as err:
        stub.SubmitJobs(pb.SubmitJobsRequest(jobs=[GOOD] * 6))
    assert err.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
    assert "cluster-config.max_unfinished_jobs=30" in err.value.details() and "25 unfinished" in err.value.details()
    assert len(stub.ListJobs(pb.ListJobsRequest(include_finished=True)).jobs) == 25   # nothing added
    with SchedulerClient(f"127.0.0.1:{service.port}", token=service.secret) as c:
        c.cancel(ids[0])
        assert len(c.submit([JobSpec.from_proto(GOOD)] * 6)) == 6           # room again once one ended


def test_max_unfinished_jobs_in_the_config_file_is_checked(tmp_path):
    from gavel_ng.errors import InputError

    path = tmp_path / "cluster.json"
    path.write_text('{"max_unfinished_jobs": 0}')
    with pytest.raises(InputError) as err:
        ClusterConfig.load(path)
    assert err.value.field == "cluster-config.max_unfinished_jobs"
    assert ClusterConfig().max_unfinished_jobs == 100_000


def test_an_idempotency_key_returns_the_first_ids_and_binds_the_jobs(service):
    stub = _stub(service)
    first = stub.SubmitJobs(pb.SubmitJobsRequest(jobs=[GOOD] * 3, idempotency_key="k1")).job_ids
    again = stub.SubmitJobs(pb.SubmitJobsRequest(jobs=[GOOD] * 3, idempotency_key="k1")).job_ids
    assert list(again) == list(first)
    with pytest.raises(grpc.RpcError) as err:
        stub.SubmitJobs(pb.SubmitJobsRequest(jobs=[GOOD] * 2, idempotency_key="k1"))
    assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert err.value.details().startswith("idempotency_key='k1'")
    assert len(stub.ListJobs(pb.ListJobsRequest(include_finished=True)).jobs) == 3
    with StateReader(service.state_dir) as rd:
        assert sorted(e["job_id"] for e in rd.events("submit")) == sorted(first)   # one event per job
