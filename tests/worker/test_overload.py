"""One job flooding the scheduler with lease renewals must not starve the workers' heartbeats.

A renewal used to wait for the next round's plan, holding a handler thread meanwhile; a job
firing 100 at once held every thread, heartbeats queued past the worker timeout and healthy
workers were declared dead. Renewals now answer at once, and calls are capped per caller
(protocol/limits.py; the cap itself is tested in tests/runtime/test_call_limits.py): how many
of the flood's calls the cap refuses depends on how many overlap, so this test only asks that
every call was answered, served or refused as busy, and that no worker was lost.
"""

from __future__ import annotations

import sys
import threading
import time

import grpc
from loopback_cluster import wait_for

from gavel_ng.protocol.protos import gavel_pb2 as pb
from gavel_ng.protocol.rpc import Stub, job_token, open_channel

SLEEPER = {"job_type": "ResNet-18 (batch size 32)", "steps": 1000, "name": "sleeper",
           "command": [sys.executable, "-c", "import time; time.sleep(300)"]}


def test_a_job_flooding_update_lease_does_not_starve_heartbeats(cluster_factory):
    cl = cluster_factory(round_seconds=60.0, heartbeat_seconds=0.3, worker_timeout_seconds=2.0)
    cl.start(("w-v100", "v100", 1), ("w-k80", "k80", 1))
    with cl.client() as c:
        [job] = c.submit(SLEEPER)
        launch = wait_for(lambda: next((e for e in cl.events("launch") if e["job_id"] == job), None), 60,
                          "the job was not launched")
    channel = open_channel(f"127.0.0.1:{cl.port}", None)
    stub = Stub(channel, "Scheduler", job_token(cl.token, job, launch["attempt"]), timeout=30)
    codes: dict[str, int] = {}
    lock = threading.Lock()
    stop = time.monotonic() + 10.0

    def flood():
        while time.monotonic() < stop:      # bounded: 10 s of renewals, each as soon as the last returned
            try:
                stub.UpdateLease(pb.UpdateLeaseRequest(job_id=job, attempt=launch["attempt"], steps=1))
                code = "OK"
            except grpc.RpcError as exc:
                code = exc.code().name
            with lock:
                codes[code] = codes.get(code, 0) + 1

    threads = [threading.Thread(target=flood, daemon=True) for _ in range(100)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    channel.close()
    print("UpdateLease answers during the flood:", codes)
    assert not cl.events("worker_down"), cl.events("worker_down")
    assert set(codes) <= {"OK", "RESOURCE_EXHAUSTED"} and sum(codes.values()) > 100, codes
    with cl.client() as c:
        assert sum(w.alive for w in c.status().workers) == 2
        assert next(j for j in c.jobs(ids=[job])).status == "running"
