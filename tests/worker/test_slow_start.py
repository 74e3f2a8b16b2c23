"""A job slower to start than a round: the scheduler keeps it while the next plan keeps its GPUs.

Before InitJob a job cannot ask for its renewal. A job whose start (a container pull, an import, a
dataset opened) outlasts its lease used to be killed at the lease's end and relaunched on the same
GPU, round after round, never reaching its first step; a loaded 2-core machine did that to paced jobs
for minutes. Now the scheduler renews an attempt that has not started when the next round's plan keeps
it where it is, so it is launched once and runs to the end."""

from __future__ import annotations

import sys

JOB_TYPE = "ResNet-18 (batch size 32)"
STARTUP_S = 8.0     # more than a 3 s lease plus the 3 s grace: without the renewal it is killed first


def test_a_job_slower_to_start_than_a_round_is_launched_once(cluster_factory):
    cl = cluster_factory(round_seconds=3.0, worker_types=["v100"])
    cl.start(("w", "v100", 1))
    paced = f"{sys.executable} -m gavel_ng.worker.paced_job --table gavel-osdi20 --job-type '{JOB_TYPE}'"
    spec = {"job_type": JOB_TYPE, "steps": 60, "name": "slow",
            "command": ["sh", "-c", f"sleep {STARTUP_S}; exec {paced}"]}
    with cl.client() as c:
        [job_id] = c.submit([spec])
        [job] = c.wait([job_id], timeout=120)
    assert job.status == "done" and job.steps_done == 60, job
    launches = [e for e in cl.events("launch") if e["job_id"] == job_id]
    assert len(launches) == 1, launches
    ends = [e for e in cl.events("end") if e["job_id"] == job_id]
    assert [e["reason"] for e in ends] == ["exited"], ends
    assert any(e["job_id"] == job_id for e in cl.events("renew"))
