"""A hostile job on a real worker sends impossible progress with its own token: refused, and the cluster
keeps scheduling (a normal job on another worker finishes)."""

from __future__ import annotations

import json
import math
import sqlite3
import sys

from loopback_cluster import wait_for

HOSTILE = '''
import json, os, sys
import grpc
from gavel_ng.protocol.protos import gavel_pb2 as pb
from gavel_ng.protocol.rpc import Stub, open_channel

env = os.environ
stub = Stub(open_channel(env["GAVEL_NG_SCHEDULER"], None), "Scheduler",
            env["GAVEL_NG_JOB_TOKEN"], timeout=30)
job, attempt = int(env["GAVEL_NG_JOB_ID"]), int(env["GAVEL_NG_ATTEMPT"])
codes = []
for steps, secs in [(2**62, 1e-308), (50, float("nan")), (50, 1e-308)]:
    try:
        stub.UpdateLease(pb.UpdateLeaseRequest(job_id=job, attempt=attempt, steps=steps, compute_seconds=secs))
        codes.append("OK")
    except grpc.RpcError as exc:
        codes.append(exc.code().name)
with open(sys.argv[1], "a") as f:
    f.write(json.dumps(codes) + "\\n")
'''


def test_hostile_job_is_refused_and_the_cluster_keeps_scheduling(cluster_factory, tmp_path):
    script, out = tmp_path / "hostile.py", tmp_path / "hostile.out"
    script.write_text(HOSTILE)
    cl = cluster_factory(round_seconds=10.0)
    cl.start(("w-v100", "v100", 1), ("w-p100", "p100", 1))
    with cl.client() as c:
        [bad] = c.submit({"job_type": "ResNet-18 (batch size 32)", "steps": 100, "allowed_types": ["v100"],
                          "command": [sys.executable, str(script), str(out)]})
        wait_for(lambda: out.exists() and out.read_text().strip(), 120, "the hostile job never ran")
        [good] = c.submit({"job_type": "ResNet-18 (batch size 32)", "steps": 60, "size": "tiny",
                           "allowed_types": ["p100"]})
        [job] = c.wait([good], timeout=240)
        c.cancel(bad)
    assert job.status == "done" and job.steps_done == 60, job
    assert json.loads(out.read_text().splitlines()[0]) == ["INVALID_ARGUMENT"] * 3
    db = sqlite3.connect(f"file:{cl.state / 'gavel.sqlite'}?mode=ro", uri=True, timeout=30)
    try:
        rates = [r[0] for r in db.execute("SELECT steps_per_s FROM throughputs")]
    finally:
        db.close()
    assert all(isinstance(v, float) and math.isfinite(v) and v > 0 for v in rates), rates
