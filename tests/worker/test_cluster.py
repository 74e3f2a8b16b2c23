"""End to end on loopback: scheduler, three workers (v100, p100, k80 on this CPU), tiny real jobs."""

from __future__ import annotations

import re

from loopback_cluster import check_training

# long enough for about ten 6 s rounds, so that some job is preempted (a restore); with 60-150
# steps a quiet machine finished every job within two rounds. `rec` alone may use the K80 and the
# others may not, so it holds that GPU round after round (a renewal) whatever the measured rates
# make of the rest of the plan, which rotates (it once rotated every job every round: no renewal)
OFF_K80 = ["v100", "p100"]
JOBS = [
    {"job_type": "ResNet-18 (batch size 32)", "steps": 400, "size": "tiny", "name": "r18",
     "allowed_types": OFF_K80},
    {"job_type": "LM (batch size 20)", "steps": 2500, "size": "tiny", "name": "lm", "allowed_types": OFF_K80},
    {"job_type": "Recommendation (batch size 512)", "steps": 4000, "size": "tiny", "name": "rec",
     "allowed_types": ["k80"]},
    {"job_type": "ResNet-18 (batch size 16)", "steps": 400, "size": "tiny", "scale_factor": 2, "name": "r18x2",
     "allowed_types": OFF_K80},
]


def test_four_jobs_on_three_workers_finish_exactly(cluster_factory):
    cl = cluster_factory(round_seconds=6.0)
    cl.start(("w-v100", "v100", 2), ("w-p100", "p100", 1), ("w-k80", "k80", 1))
    with cl.client() as c:
        ids = c.submit(JOBS)
        jobs = c.wait(ids, timeout=300)     # passes in ~60 s; the margin is for a loaded machine
        status = c.status()
    for job, spec in zip(jobs, JOBS):
        assert job.status == "done" and job.steps_done == spec["steps"], job
        check_training(cl, job.job_id, spec["steps"])
    renewed = {e["job_id"] for e in cl.events("renew") if e.get("by") != "scheduler"}   # the job asked
    assert status.renewals > 0 and ids[2] in renewed, "rec's K80 lease was never renewed"
    assert any(len(cl.train_log(i)) and any(e.get("event") == "load" for e in cl.train_log(i)) for i in ids), \
        "no job was ever preempted and restored"
    # every rank of the 2-GPU job stopped at the same step in every attempt
    logs = cl.rank_logs(ids[3])
    for name, text in logs.items():
        if "rank0" in name:
            other = logs.get(name.replace("rank0", "rank1"), "")
            stops = re.findall(r"stopping at step (\d+)", text)
            assert stops == re.findall(r"stopping at step (\d+)", other), (name, stops)
    assert status.throughputs, "no throughput was measured"
