"""Mid-round backfill at a round's start (runtime.backfill): the GPUs of the last round's attempts, whose
leases ended at the boundary and which are still exiting, are free for the choice, as they are in the
simulator. Counted as held, an arrival placed in the first tick of a round went to slower GPUs than the
simulator gave it (issue 41's drift test: a 2-GPU job on K80s instead of P100s, 10 s later to finish)."""

from __future__ import annotations

import time

from service_helpers import register

from gavel_ng.protocol.jobspec import JobSpec
from gavel_ng.runtime.jobs import Attempt

JOB = JobSpec("ResNet-18 (batch size 32)", steps=100_000, size="tiny")


def _round(svc, ids):
    """Round r: plan the known jobs and begin the round (the executor's own steps, run by hand)."""
    planner, ex, live = svc.planner, svc.executor, svc.executor.backfill
    planner.arrive(ids)
    plan = planner.plan(time.time())
    live.publish(plan)
    live.begin()
    now = time.time()
    with svc.state.cv:
        ex.current = ex._resolve(plan)
        ex.round_start, ex.round_end = now, now + ex.L
    return now


def _leaving(svc, job_id: int, worker: str, gpu: int, lease_end: float) -> None:
    """The job's last-round attempt, still live on `worker`'s GPU (its worker has not reported its end)."""
    with svc.state.cv:
        svc.state.jobs[job_id].live = Attempt(job_id, 1, [(worker, gpu)], "p100", False, lease_end - 60.0,
                                              lease_end, 0)


def _one_job_round(make_service):
    """One V100, two P100s, two K80s; job a planned (it moves up to the V100); (service, a, round start)."""
    svc = make_service(round_seconds=60.0)
    register(svc, "w-v100", "v100", 1)
    register(svc, "w-p100", "p100", 2)
    register(svc, "w-k80", "k80", 2)
    [a] = svc.state.submit([JOB])
    return svc, a, _round(svc, [a])


def test_an_arrival_at_a_rounds_start_gets_the_gpus_the_last_round_is_leaving(make_service):
    svc, a, start = _one_job_round(make_service)   # a moves up to the V100 ...
    ex = svc.executor
    assert ex.current[a].worker_type == "v100"
    _leaving(svc, a, "w-p100", 0, lease_end=start)  # ... from P100 0, its lease over at the boundary
    [b] = svc.state.submit([JobSpec(JOB.job_type, steps=100_000, size="tiny", scale_factor=2)])
    ex.backfill.arrive(time.time())
    assert ex.current[b].worker_type == "p100"     # before the fix: k80 (P100 0 counted as held)
    assert sorted(g for _, g in ex.current[b].placement) == [0, 1]
    assert list(svc.executor.backfill.entries)     # chosen as a mid-round backfill


def test_an_attempt_whose_lease_runs_on_keeps_its_gpus(make_service):
    svc, a, start = _one_job_round(make_service)
    _leaving(svc, a, "w-p100", 0, lease_end=start + 30.0)   # not over: P100 0 is held
    [b] = svc.state.submit([JobSpec(JOB.job_type, steps=100_000, size="tiny", scale_factor=2)])
    ex = svc.executor
    ex.backfill.arrive(time.time())
    assert ex.current[b].worker_type == "k80"
