"""Per-caller caps on calls in flight: a job's third concurrent call is refused at once, and the
iterator's lease client asks again until it gets its lease."""

from __future__ import annotations

import threading
import time

import grpc
import pytest

from gavel_ng.iterator import JobEnv
from gavel_ng.iterator.lease import LeaseClient
from gavel_ng.protocol.client import SchedulerClient
from gavel_ng.protocol.protos import gavel_pb2 as pb
from gavel_ng.protocol.rpc import Stub, job_token, open_channel


def test_a_job_gets_two_calls_in_flight_and_its_iterator_retries(service, tmp_path):
    address = f"127.0.0.1:{service.port}"
    with SchedulerClient(address, token=service.secret) as c:
        [job] = c.submit({"job_type": "ResNet-18 (batch size 32)", "steps": 77, "size": "tiny"})
    token = job_token(service.secret, job, 1)
    stub = Stub(open_channel(address, None), "Scheduler", token, timeout=60)
    env = JobEnv(address, job, 1, token, tmp_path, 5, time.time() + 60, None, None, 0, 1)
    lease = LeaseClient(env)
    held = []
    with service.state.lock:                     # InitJob waits for the lock: these two hold the job's slots
        for _ in range(2):
            t = threading.Thread(target=lambda: held.append(stub.InitJob(pb.InitJobRequest(job_id=job, attempt=1))))
            t.start()
        time.sleep(1.0)
        with pytest.raises(grpc.RpcError) as err:
            stub.InitJob(pb.InitJobRequest(job_id=job, attempt=1), timeout=30)
        assert err.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
        assert "at most 2 job calls in flight per caller" in err.value.details()
        iterator = threading.Thread(target=lease.init, args=(0,))
        iterator.start()                         # refused too while the slots are held: it asks again
        time.sleep(1.0)
    iterator.join(30)
    assert lease.steps_total == 77               # got its lease from the scheduler (not the env's 5)
    lease.close()
