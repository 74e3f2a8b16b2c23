"""A paused scheduler (SIGSTOP) is not a failed cluster: no worker declared dead, no attempt lost.

GAVEL_NG_PAUSE_SECONDS sets the pause (default 5 s, over the 2 s worker timeout); the test
prints what the pause cost, which is how the README's figures were measured:

    GAVEL_NG_PAUSE_SECONDS=30 pytest tests/worker/test_pause.py -s -k scheduler_paused
"""

from __future__ import annotations

import os
import signal
import time
from concurrent.futures import ThreadPoolExecutor

from loopback_cluster import check_training, wait_for

from gavel_ng.protocol.protos import gavel_pb2 as pb
from gavel_ng.protocol.rpc import Stub, job_token, open_channel

# one job per GPU, pinned: each is renewed round after round, so a pause finds both mid-lease
# (and a rotating plan's start-ups did not fit in 6 s rounds on a loaded 2-core machine)
JOBS = [
    {"job_type": "LM (batch size 20)", "steps": 4000, "size": "tiny", "name": "lm", "allowed_types": ["v100"]},
    {"job_type": "Recommendation (batch size 512)", "steps": 6000, "size": "tiny", "name": "rec",
     "allowed_types": ["k80"]},
]


def _asked(cl) -> list[dict]:
    """The renewals jobs asked for (not the scheduler's own for an attempt still starting)."""
    return [e for e in cl.events("renew") if e.get("by") != "scheduler"]


def _killed_renewed(cl) -> list[dict]:
    """Renewed attempts the worker killed before the job reached its lease end (rank 0 logs
    'stopping at step' when it does; a job slow to exit after that is killed rightly). Renewals
    the job asked for: one the scheduler made for an attempt still starting (`by: scheduler`)
    reaches the worker only by heartbeat, so a pause through its old end costs that attempt."""
    renewed = {(e["job_id"], e["attempt"]) for e in _asked(cl)}
    out = []
    for e in cl.events("end"):
        if "killed-lease" in e["reason"] and (e["job_id"], e["attempt"]) in renewed:
            text = cl.rank_logs(e["job_id"]).get(f"attempt{e['attempt']}-rank0.log", "")
            if "stopping at step" not in text:
                out.append(e)
    return out


def test_scheduler_paused_past_worker_timeout_loses_nothing(cluster_factory):
    pause = float(os.environ.get("GAVEL_NG_PAUSE_SECONDS", "5"))
    # heartbeats answered by the scheduler's heartbeat port (runtime.front), which keeps running while the
    # scheduler is stopped: it answers from its copy for 5 s, then leaves them to the stopped scheduler
    cl = cluster_factory(round_seconds=6.0, heartbeat_seconds=0.5, worker_timeout_seconds=2.0, heartbeat_port=0)
    cl.start(("w-v100", "v100", 1), ("w-k80", "k80", 1))
    with cl.client() as c:
        ids = c.submit(JOBS)
        wait_for(lambda: len({e["job_id"] for e in _asked(cl)}) == 2, 180, "no job was renewed")
        assert all("heartbeats go to the scheduler's heartbeat port" in (cl.root / f"{name}.log").read_text()
                   for name in cl.workers)
        # stop it just after a renewal: the workers then hold the old lease end
        seen = len(_asked(cl))
        wait_for(lambda: len(_asked(cl)) > seen, 60, "no renewal", poll=0.05)
        before = {j.job_id: max(j.steps_live, j.steps_done) for j in c.jobs() if j.status == "running"}
        live = {(e["job_id"], e["attempt"]) for e in cl.events("launch")} - {
            (e["job_id"], e["attempt"]) for e in cl.events("end")}
        paused_at = time.time()
        cl.scheduler.send_signal(signal.SIGSTOP)
        try:
            time.sleep(pause)
        finally:
            cl.scheduler.send_signal(signal.SIGCONT)
        resumed_at = time.time()
        jobs = c.wait(ids, timeout=400)
    # steps trained before the pause that a later attempt trained again (at least: progress is
    # known only as of each job's last renewal request)
    relaunch = {}
    for e in cl.events("launch"):
        if e["ts"] > paused_at and e["job_id"] in before:
            relaunch.setdefault(e["job_id"], e["steps"])
    lost_steps = sum(max(0, before[m] - relaunch.get(m, before[m])) for m in before)
    # what a pause costs otherwise: attempts that stopped at their lease end while it lasted (their
    # GPUs idle until the scheduler runs again), and how soon after it resumed it launched again
    stopped = [e for e in cl.events("end") if (e["job_id"], e["attempt"]) in live and e["status"] != "done"]
    relaunched = [e["ts"] - resumed_at for e in cl.events("launch") if e["ts"] > paused_at]
    down, lost = cl.events("worker_down"), cl.events("lost")
    print(f"\npause {pause:g}s: worker_down {len(down)}, lost attempts {len(lost)}, steps lost >= {lost_steps}, "
          f"killed at a renewed lease end {len(_killed_renewed(cl))}, stall events "
          f"{[e['seconds'] for e in cl.events('stall')]}, attempts stopped at their lease end {len(stopped)}, "
          f"relaunched {min(relaunched, default=float('nan')):.2f}s after resuming")
    assert not down and not lost, (down, lost)
    assert not _killed_renewed(cl)
    for j, spec in zip(jobs, JOBS):
        assert j.status == "done" and j.steps_done == spec["steps"], j
        check_training(cl, j.job_id, spec["steps"])


def test_renewed_lease_outlives_the_deadline_the_worker_was_given(cluster_factory):
    """Heartbeats 30 s apart never tell the worker of a renewal in time: the job's lease file must."""
    cl = cluster_factory(round_seconds=6.0, heartbeat_seconds=30.0, worker_timeout_seconds=120.0)
    cl.start(("w-k80", "k80", 1))
    spec = {"job_type": "Recommendation (batch size 512)", "steps": 8000, "size": "tiny", "name": "long"}
    with cl.client() as c:
        (job_id,) = c.submit([spec])
        (job,) = c.wait([job_id], timeout=300)
    renewed = [e for e in _asked(cl) if e["job_id"] == job_id]
    ends = [(e["attempt"], e["reason"]) for e in cl.events("end")]
    print(f"\nrenewals {len(renewed)}, attempt ends {ends}")
    assert renewed, "the job was never renewed: nothing tested"
    assert not _killed_renewed(cl), ends
    assert job.status == "done" and job.steps_done == spec["steps"], job
    check_training(cl, job_id, spec["steps"])


def test_renewals_waiting_for_a_plan_leave_heartbeats_served(cluster_factory):
    """100 renewals asked long before the next round's plan exists (more than the scheduler's 64
    handler threads) are answered at once, so heartbeats go on being served."""
    cl = cluster_factory(round_seconds=6.0, heartbeat_seconds=0.3, worker_timeout_seconds=2.0)
    cl.start(("w-k80", "k80", 1))
    spec = {"job_type": "Recommendation (batch size 512)", "steps": 20000, "size": "tiny", "name": "rec"}
    with cl.client() as c:
        (job_id,) = c.submit([spec])
    wait_for(lambda: cl.events("renew"), 120, "the job was never renewed")
    attempt = cl.events("renew")[-1]["attempt"]
    rounds = len(cl.events("round"))
    wait_for(lambda: len(cl.events("round")) > rounds, 30, "no next round", poll=0.05)
    # the lease now ends with this round, whose successor is planned only ~4 s from now
    channel = open_channel(f"127.0.0.1:{cl.port}", None)
    stub = Stub(channel, "Scheduler", job_token(cl.token, job_id, attempt), timeout=30.0)
    req = pb.UpdateLeaseRequest(job_id=job_id, attempt=attempt, steps=0, compute_seconds=0.0)
    try:
        with ThreadPoolExecutor(100) as pool:
            replies = list(pool.map(lambda _: stub.UpdateLease(req), range(100)))
    finally:
        channel.close()
    time.sleep(1.0)                          # a starved heartbeat would show by now
    waited = [r for r in replies if not r.renewed and r.renew_in > 0.5]
    print(f"\n100 renewals: {sum(r.renewed for r in replies)} renewed, {len(waited)} told to wait over 0.5 s")
    assert not cl.events("worker_down") and not cl.events("lost")
    assert not waited
