"""Mid-round backfill on loopback: a short job's GPU runs the waiting job within the same round."""

from __future__ import annotations

import pytest
from loopback_cluster import wait_for

ROUND = 20.0     # long enough that the short job (a process start and a few steps) ends early on a busy machine
JOBS = [
    {"job_type": "ResNet-18 (batch size 32)", "steps": 5, "size": "tiny", "name": "short"},
    {"job_type": "ResNet-18 (batch size 32)", "steps": 5000, "size": "tiny", "name": "long"},
]


@pytest.mark.slow
def test_a_finished_jobs_gpu_runs_the_waiting_job_in_the_same_round(cluster_factory):
    """One GPU, two jobs with equal shares: the short one (submitted first) runs first and the long one
    waits. When the short one finishes, the long one is launched on its GPU before the round ends."""
    cl = cluster_factory(round_seconds=ROUND)
    cl.start(("w-v100", "v100", 1))
    with cl.client() as c:
        short, long = c.submit(JOBS)
        launch = wait_for(lambda: [e for e in cl.events("launch") if e["job_id"] == long], 120,
                          "the long job was never launched")[0]
    [end] = [e for e in cl.events("end") if e["job_id"] == short]
    [first] = [e for e in cl.events("launch") if e["job_id"] == short]
    rounds = {e["round_no"]: e for e in cl.events("round")}
    r = first["round_no"]
    assert end["status"] == "done" and end["round"] == r, end
    assert long not in map(int, rounds[r]["plan"]), "the long job was planned, not backfilled"
    [bf] = [e for e in cl.events("backfill") if e["job_id"] == long]
    assert bf["round_no"] == r and launch["round_no"] == r
    assert launch["placement"] == first["placement"]
    assert end["ts"] <= bf["ts"] <= launch["ts"] < rounds[r]["start"] + ROUND


@pytest.mark.slow
def test_without_backfill_the_waiting_job_starts_next_round(cluster_factory):
    cl = cluster_factory(round_seconds=ROUND, backfill=False)
    cl.start(("w-v100", "v100", 1))
    with cl.client() as c:
        short, long = c.submit(JOBS)
        launch = wait_for(lambda: [e for e in cl.events("launch") if e["job_id"] == long], 120,
                          "the long job was never launched")[0]
    [first] = [e for e in cl.events("launch") if e["job_id"] == short]
    assert launch["round_no"] == first["round_no"] + 1 and not cl.events("backfill")
