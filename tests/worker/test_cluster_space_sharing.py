"""Space sharing and the estimator on a real loopback cluster.

One worker with one GPU and two jobs whose pair beats time slicing: the packed policy
runs them together on that GPU, each as its own attempt; their in-pair rates are measured
and reach both the throughput table and the estimator. One job is of a type the
throughput table has never seen (its own command), which only the estimator accepts.
"""

from __future__ import annotations

import sys
from collections import defaultdict

from loopback_cluster import check_training

CUSTOM = {"job_type": "my ResNet", "steps": 800, "name": "custom",
          "command": [sys.executable, "-m", "gavel_ng.worker.run_job", "--job-type", "ResNet-18 (batch size 32)",
                      "--size", "tiny"]}
KNOWN = {"job_type": "Recommendation (batch size 512)", "steps": 3000, "size": "tiny", "name": "rec"}


def _overlapping(launches: list[dict], ends: dict[tuple[int, int], float]) -> bool:
    """Two attempts of different jobs ran at the same time on the same GPU."""
    spans = defaultdict(list)
    for e in launches:
        end = ends.get((e["job_id"], e["attempt"]), float("inf"))
        for w, g in e["placement"]:
            spans[(w, g)].append((e["ts"], end, e["job_id"]))
    for items in spans.values():
        for a0, a1, ja in items:
            if any(jb != ja and b0 < a1 and a0 < b1 for b0, b1, jb in items):
                return True
    return False


def test_pairs_share_a_gpu_and_the_estimator_learns(cluster_factory):
    cl = cluster_factory(round_seconds=6.0, space_sharing=True, estimator=True)
    cl.start(("w-v100", "v100", 1))
    with cl.client() as c:
        ids = c.submit([CUSTOM, KNOWN])
        jobs = c.wait(ids, timeout=150)
        status = c.status()
    assert status.policy == "las_packed"
    for job, spec in zip(jobs, (CUSTOM, KNOWN)):
        assert job.status == "done" and job.steps_done == spec["steps"], job
        check_training(cl, job.job_id, spec["steps"])
    launches = cl.events("launch")
    assert any(e.get("partner") is not None for e in launches), "the policy never paired the jobs"
    ends = {(e["job_id"], e["attempt"]): e["ts"] for e in cl.events("end")}
    assert _overlapping(launches, ends), "paired jobs never ran at the same time on the GPU"
    measured = cl.events("measure")
    assert any(e.get("partner") is not None for e in measured), "no in-pair rate was measured"
    assert any(e["job_id"] == ids[0] for e in measured), "the new job type was never measured"
    assert any("|with " in k for k in status.throughputs), status.throughputs
