"""Identities and roles on a scheduler service over loopback gRPC: credentials an admin issues (stored hashed),
what a user, a worker credential and the admin may each do, the actor of every event, and the log lines
refused calls leave (one per kind and address, no tracebacks)."""

from __future__ import annotations

import json
import logging
import sqlite3

import grpc
import pytest

from gavel_ng.protocol.client import SchedulerClient, SchedulerError
from gavel_ng.protocol.protos import gavel_pb2 as pb
from gavel_ng.protocol.rpc import Stub, open_channel
from gavel_ng.runtime.config import ClusterConfig
from gavel_ng.runtime.report import read_audit
from gavel_ng.runtime.service import SchedulerService

R18 = "ResNet-18 (batch size 32)"


@pytest.fixture
def svc(tmp_path):
    s = SchedulerService(ClusterConfig(round_seconds=60.0, entities={"nlp": {"weight": 1}, "vision": {"weight": 1}},
                                       rules={"admission": {"max_jobs_per_user": 3}}),
                         tmp_path / "state", port=0, bind="127.0.0.1")
    s.start()
    yield s
    s.stop(grace=0.1)


def _client(svc, token) -> SchedulerClient:
    return SchedulerClient(f"127.0.0.1:{svc.port}", token=token)


def _stub(svc, token) -> Stub:
    return Stub(open_channel(f"127.0.0.1:{svc.port}", None), "Scheduler", token, timeout=10)


def _users(svc) -> dict[str, str]:
    with _client(svc, svc.secret) as admin:
        _, alice = admin.add_user("alice", entities=["nlp"])
        _, bob = admin.add_user("bob", entities=["nlp"], manages=[])
        _, node = admin.add_user("node", role="worker")
    return {"alice": alice, "bob": bob, "node": node}


def _code(call):
    with pytest.raises(SchedulerError) as err:
        call()
    return err.value.code, err.value.details


def test_credentials_are_stored_hashed_checked_and_revoked_at_once(svc, tmp_path):
    tokens = _users(svc)
    data = b"".join(p.read_bytes() for p in (tmp_path / "state").glob("gavel.sqlite*"))
    assert not any(t.encode() in data for t in tokens.values())       # only their hashes are kept
    with _client(svc, svc.secret) as admin:
        listed = {u.name: u for u in admin.users()}
        assert listed["alice"].entities == ("nlp",) and listed["node"].role == "worker"
        assert _code(lambda: admin.add_user("alice"))[0] == "INVALID_ARGUMENT"              # one credential a name
        assert "account name" in _code(lambda: admin.add_user("Bad Name"))[1]
        assert "not a declared entity" in _code(lambda: admin.add_user("carol", entities=["nope"]))[1]
        assert _code(lambda: admin.add_user("w2", role="worker", entities=["nlp"]))[0] == "INVALID_ARGUMENT"
    with _client(svc, tokens["alice"]) as alice:
        assert alice.status().policy == "las"
        assert _code(alice.users)[0] == "PERMISSION_DENIED"                    # credentials: the admin's only
        with _client(svc, svc.secret) as admin:
            assert admin.revoke("alice").revoked is not None
        assert _code(alice.status)[0] == "UNAUTHENTICATED"                     # at the very next call


def test_users_submit_as_themselves_into_granted_entities_and_cancel_their_own(svc):
    tokens = _users(svc)
    with _client(svc, tokens["alice"]) as alice, _client(svc, tokens["bob"]) as bob:
        [mine] = alice.submit({"job_type": R18, "steps": 10, "size": "tiny", "env": {"SECRET": "s3"}})
        job = alice.jobs(ids=[mine])[0]
        assert (job.user, job.entity) == ("alice", "nlp")                        # filled in: authenticated facts
        code, details = _code(lambda: bob.submit({"job_type": R18, "steps": 10, "user": "alice"}))
        assert code == "PERMISSION_DENIED" and "jobs[0].user: 'alice' is not you (bob)" in details
        code, details = _code(lambda: bob.submit({"job_type": R18, "steps": 10, "entity": "vision"}))
        assert code == "PERMISSION_DENIED" and "'vision' is not granted to bob (granted: nlp;" in details
        code, details = _code(lambda: bob.cancel(mine))
        assert code == "PERMISSION_DENIED" and f"job {mine} belongs to alice" in details
        seen = _stub(svc, tokens["bob"]).ListJobs(pb.ListJobsRequest(job_ids=[mine])).jobs[0]
        assert seen.spec.job_type == R18 and not seen.spec.env and not seen.spec.command  # others' jobs: no secrets
        own = _stub(svc, tokens["alice"]).ListJobs(pb.ListJobsRequest(job_ids=[mine])).jobs[0]
        assert own.spec.env == {"SECRET": "s3"}
        # the same idempotency key from two users: two submissions, not one user's ids for the other
        [b1] = bob.submit({"job_type": R18, "steps": 10, "size": "tiny"}, key="nightly")
        [a1] = alice.submit({"job_type": R18, "steps": 10, "size": "tiny"}, key="nightly")
        assert a1 != b1
        with _client(svc, svc.secret) as admin:
            admin.grant("bob", manages=["nlp"])                                     # bob manages alice's entity
        assert bob.cancel(mine) == "cancelled"
        seen = _stub(svc, tokens["bob"]).ListJobs(pb.ListJobsRequest(job_ids=[mine], include_finished=True)).jobs[0]
        assert seen.spec.env == {"SECRET": "s3"}
    audit = [(e.action, e.job_id, e.actor) for e in read_audit(svc.state_dir)]
    assert ("submit", mine, "user:alice") in audit and ("cancelled", mine, "user:bob") in audit
    assert ("user_grant", None, "admin") in audit and ("user_add", None, "admin") in audit
    db = sqlite3.connect(f"file:{svc.state_dir / 'gavel.sqlite'}?mode=ro", uri=True)
    try:
        assert db.execute("SELECT COUNT(*) FROM events WHERE actor IS NULL OR actor = ''").fetchone()[0] == 0
    finally:
        db.close()


def test_a_worker_credential_speaks_for_its_own_workers_only(svc):
    tokens = _users(svc)
    with _client(svc, svc.secret) as admin:
        _, other = admin.add_user("node2", role="worker")
    node, node2, bob = (_stub(svc, t) for t in (tokens["node"], other, tokens["bob"]))
    reg = pb.RegisterWorkerRequest(worker_id="w1", address="127.0.0.1:1", gpu_type="v100", gpus=1, call_token="t")
    assert node.RegisterWorker(reg).lease_key                                   # registered; it checks lease files

    def code(call):
        with pytest.raises(grpc.RpcError) as err:
            call()
        return err.value.code()

    assert code(lambda: bob.RegisterWorker(reg)) == grpc.StatusCode.PERMISSION_DENIED          # a user is no worker
    assert code(lambda: node2.RegisterWorker(reg)) == grpc.StatusCode.PERMISSION_DENIED        # not its worker
    assert code(lambda: node2.Heartbeat(pb.HeartbeatRequest(worker_id="w1", call_token="t"))) \
        == grpc.StatusCode.PERMISSION_DENIED
    assert code(lambda: node2.Heartbeat(pb.HeartbeatRequest(worker_id="w9"))) == grpc.StatusCode.NOT_FOUND
    # the same credential, but not the daemon that registered w1 (it does not know w1's token)
    assert code(lambda: node.Heartbeat(pb.HeartbeatRequest(worker_id="w1"))) == grpc.StatusCode.PERMISSION_DENIED
    assert code(lambda: node.ReportDone(pb.DoneReport(worker_id="w1", job_id=1, attempt=1, steps=-1))) \
        == grpc.StatusCode.PERMISSION_DENIED
    hijack = pb.RegisterWorkerRequest(worker_id="w1", address="127.0.0.1:1", gpu_type="v100", gpus=1,
                                      call_token="mine now")
    assert code(lambda: node.RegisterWorker(hijack)) == grpc.StatusCode.ALREADY_EXISTS     # nor take its id over
    assert node.RegisterWorker(reg).lease_key                                  # its own daemon again: welcome
    assert code(lambda: node.SubmitJobs(pb.SubmitJobsRequest(jobs=[pb.JobSpec(job_type=R18, steps=1)]))) \
        == grpc.StatusCode.PERMISSION_DENIED
    assert code(lambda: node.GetStatus(pb.StatusRequest())) == grpc.StatusCode.PERMISSION_DENIED
    node.Heartbeat(pb.HeartbeatRequest(worker_id="w1", call_token="t"))


def test_inputs_that_cannot_run_are_refused_at_submit(svc):
    stub = _stub(svc, svc.secret)         # the scheduler's own check (the client checks the same before sending)
    for job, field in (({"env": {"X": "a\0b"}}, "jobs[0].env.X"), ({"name": "\x1b[2Jred"}, "jobs[0].name"),
                       ({"command": ["python", "a\0"]}, "jobs[0].command[1]")):
        with pytest.raises(grpc.RpcError) as err:
            stub.SubmitJobs(pb.SubmitJobsRequest(jobs=[pb.JobSpec(job_type=R18, steps=10, **job)]))
        assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT, err.value.details()
        assert field in err.value.details() and "U+00" in err.value.details()
    assert svc.status().job_counts == {}


def test_refused_and_malformed_calls_are_one_line_each_with_the_address(svc, caplog):
    chan = grpc.insecure_channel(f"127.0.0.1:{svc.port}")
    raw = chan.unary_unary("/gavel_ng.v1.Scheduler/SubmitJobs", request_serializer=lambda b: b,
                           response_deserializer=lambda b: b)
    codes = set()
    with caplog.at_level(logging.INFO):
        for i in range(50):
            for token, body in ((svc.secret, b"\xff\xff\xff" + bytes([i])), ("wrong", b"")):
                try:
                    raw(body, metadata=(("authorization", f"Bearer {token}"),), timeout=5)
                except grpc.RpcError as exc:
                    codes.add(exc.code())
    chan.close()
    assert codes == {grpc.StatusCode.INVALID_ARGUMENT, grpc.StatusCode.UNAUTHENTICATED}
    lines = [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert len(lines) == 2 and all("127.0.0.1" in r.getMessage() for r in lines), [r.getMessage() for r in lines]
    assert not any(r.exc_info for r in caplog.records)
    assert svc.status().policy == "las"


def test_a_single_token_cluster_still_works_as_admin_only(svc, caplog, tmp_path):
    with _client(svc, svc.secret) as admin:
        [job] = admin.submit({"job_type": R18, "steps": 10, "size": "tiny", "user": "anyone"})
        assert admin.jobs(ids=[job])[0].user == "anyone"          # the admin may say whose job it is
        assert admin.cancel(job) == "cancelled"
    svc.stop(grace=0.1)
    with caplog.at_level(logging.WARNING):
        again = SchedulerService(ClusterConfig(round_seconds=60.0), tmp_path / "state", port=0, bind="127.0.0.1")
    try:
        assert any("single-token cluster" in r.getMessage() for r in caplog.records)
    finally:
        again.stop(grace=0.1)
    svc.stop = lambda grace=0.1: None                               # the fixture's stop: done already


def test_the_job_token_reaches_its_own_lease_only(svc):
    tokens = _users(svc)
    with _client(svc, tokens["alice"]) as alice:
        [job] = alice.submit({"job_type": R18, "steps": 10, "size": "tiny"})
    from gavel_ng.protocol.rpc import job_token

    stub = _stub(svc, job_token(svc.secret, job, 1))
    for call in (lambda: stub.CancelJob(pb.CancelJobRequest(job_id=job)),
                 lambda: stub.ManageUsers(pb.UserRequest(action="list")),
                 lambda: stub.ReportDone(pb.DoneReport(worker_id="w", job_id=job, attempt=1))):
        with pytest.raises(grpc.RpcError) as err:
            call()
        assert err.value.code() == grpc.StatusCode.PERMISSION_DENIED
    assert json.loads(json.dumps(stub.InitJob(pb.InitJobRequest(job_id=job, attempt=1)).stop))   # stale: told stop
