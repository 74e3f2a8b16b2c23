"""Failures on loopback: a worker killed with SIGKILL mid-round, then a scheduler stopped and restarted."""

from __future__ import annotations

import signal

from loopback_cluster import check_training, wait_for, worker_name

# three jobs on two GPUs: whatever the policy, jobs are time-sliced, so they checkpoint and
# move; each takes 10-20 s of training on an idle 2-core machine, several rounds of 6 s
JOBS = [
    {"job_type": "ResNet-18 (batch size 32)", "steps": 2000, "size": "tiny", "name": "a"},
    {"job_type": "Recommendation (batch size 512)", "steps": 6000, "size": "tiny", "name": "b"},
    {"job_type": "LM (batch size 20)", "steps": 10000, "size": "tiny", "name": "c"},
]


def _running_with_checkpoint(cl, c, worker_id):
    """A job running on worker_id that has already committed a checkpoint."""
    for j in c.jobs():
        if j.status == "running" and worker_id in j.placement and j.steps_done > 0:
            return j
    return None


def test_worker_kill9_and_scheduler_restart_lose_nothing(cluster_factory):
    # with heartbeats answered by a process of their own (runtime.front): a restart starts another
    cl = cluster_factory(round_seconds=6.0, heartbeat_port=0)
    cl.start(("w-v100", "v100", 1), ("w-k80", "k80", 1))
    with cl.client() as c:
        ids = c.submit(JOBS)

        # 1. kill -9 a worker while it runs a job that has a checkpoint
        def victim():
            for w in c.status().workers:
                job = _running_with_checkpoint(cl, c, w.worker_id)
                if job is not None:
                    return w, job
            return None

        w, job = wait_for(victim, 180, "no job with a checkpoint ever ran")
        name = worker_name(cl, w.worker_id)
        cl.workers[name].send_signal(signal.SIGKILL)
        cl.workers[name].wait(10)
        lost_at = job.steps_done
        wait_for(lambda: any(e["kind"] == "worker_down" for e in cl.events()), 30, "worker not declared dead")
        wait_for(lambda: any(e["kind"] == "launch" and e["job_id"] == job.job_id and
                             w.worker_id not in str(e["placement"]) for e in cl.events("launch")
                             if e["ts"] > cl.events("worker_down")[0]["ts"]), 60, "job not relaunched elsewhere")
        assert any(e["kind"] == "lost" and e["job_id"] == job.job_id for e in cl.events())
        cl.start_worker("w-p100", "p100", 1)             # a replacement joins the running cluster

        # 2. stop the scheduler mid-run and start it again on the same state
        wait_for(lambda: any(j.status == "running" for j in c.jobs()), 30, "nothing running")
    cl.stop_process(cl.scheduler)
    cl.start_scheduler()
    with cl.client() as c:
        jobs = c.wait(ids, timeout=400)
    for j, spec in zip(jobs, JOBS):
        assert j.status == "done" and j.steps_done == spec["steps"], j
        check_training(cl, j.job_id, spec["steps"])
    assert cl.events("restart"), "the second scheduler did not restore its state"
    loads = [e for e in cl.train_log(job.job_id) if e.get("event") == "load"]
    assert any(e["step"] >= lost_at for e in loads), "the job did not resume from its last checkpoint"
