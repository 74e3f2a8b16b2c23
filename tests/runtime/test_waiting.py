"""Why a queued job waits, decided in-process with fake registered workers (no processes):
one test per reason, its storage for `status --state`, and what a cancel leaves in status."""

from __future__ import annotations

import time

import numpy as np
import pytest
from service_helpers import adopt, register

from gavel_ng.errors import InputError
from gavel_ng.mechanism import AllocationRows
from gavel_ng.protocol.jobspec import JobSpec
from gavel_ng.rules.model import JobRules
from gavel_ng.runtime.jobs import Attempt, DoneReport
from gavel_ng.runtime.status import read_state_dir
from gavel_ng.runtime.waiting import NEW

JOB = JobSpec("ResNet-18 (batch size 32)", steps=5000, size="tiny")


def decide(svc, alloc: AllocationRows | None = None) -> dict[int, str]:
    """Plan a round as the loop does (the policy's allocation unless given) and publish it; each job's reason."""
    st = svc.state
    active = [m for m, j in st.jobs.items() if j.status == "queued"]
    if alloc is not None:
        adopt(svc, alloc)
    else:
        svc.planner.arrive(active)    # solved at the plan
    svc.executor.publish(svc.planner.plan(time.time()))
    with st.lock:
        return {m: svc.waiting.current(j) for m, j in st.jobs.items()}


def one_type(jobs: list[int], shares: list[float], J: int = 3) -> AllocationRows:
    X = np.zeros((len(jobs), J))
    X[:, 0] = shares
    return AllocationRows([(m,) for m in jobs], X, np.ones(len(jobs)))


def run_attempt(svc, job_id: int, worker: str) -> Attempt:
    """Make the job's attempt 1 live on `worker` GPU 0, as a launch does."""
    st = svc.state
    with st.lock:
        job = st.jobs[job_id]
        now = time.time()
        att = Attempt(job_id, 1, [(worker, 0)], st.workers[worker].gpu_type, True, now, now + 60, 0)
        job.attempts, job.live, job.status = 1, att, "running"
        st.attempt_started(att)
    return att


def test_a_scale_factor_no_worker_type_holds_is_named_with_the_numbers(make_service):
    svc = make_service()
    register(svc, "w1", "v100", 1)
    register(svc, "w2", "k80", 1)
    [m] = svc.state.submit([JobSpec(JOB.job_type, steps=100, scale_factor=4, size="tiny")])
    why = decide(svc)[m]
    assert why == "needs 4 GPUs of one type; the largest worker type it may run on has 1 (v100: 1 x 1 GPU)"
    for k in range(2, 5):                       # a job may span the workers of one type: four 1-GPU v100s do
        register(svc, f"v{k}", "v100", 1)
    assert not decide(svc)[m].startswith("needs")


def test_no_live_worker_of_an_allowed_type(make_service):
    svc = make_service()
    register(svc, "w1", "v100", 2)
    [m] = svc.state.submit([JobSpec(JOB.job_type, steps=100, size="tiny", rules=JobRules(allowed_types=("p100",)))])
    assert decide(svc)[m] == "no live worker of a type it may run on (p100)"
    assert svc.cannot_run(svc.state.jobs[m].spec) == "no live worker of a type it may run on (p100)"


def test_over_its_entitys_quota(make_service):
    svc = make_service(rules={"quotas": {"team": {"v100": 1, "p100": 1, "k80": 1}}}, entities={"team": {}})
    register(svc, "w1", "v100", 2)
    a, b = svc.state.submit([JobSpec(JOB.job_type, steps=100, size="tiny", rules=JobRules(entity="team"))] * 2)
    run_attempt(svc, a, "w1")
    why = decide(svc, one_type([a, b], [1.0, 1.0]))[b]
    assert why.startswith("over its entity's quota: entity 'team' holds 1 of its 1 v100 GPUs") and "1 GPU more" in why


def test_admission_decides_once_at_submission(make_service):
    """A job admission let in at submission is not asked about again: the round loop plans it even when its
    user is over the limit by then (here: a job counted after it was submitted)."""
    svc = make_service(rules={"admission": {"max_jobs_per_user": 1}})
    [m] = svc.state.submit([JobSpec(JOB.job_type, steps=100, size="tiny", rules=JobRules(user="ann"))])
    svc.admission.add(-1, "ann", 1)                 # ann at her limit now
    svc.loop.step()                                 # no worker yet: an idle wait
    assert m in svc.loop.active and m in svc.planner.inner.active   # the loop let it in; the planner has it
    with pytest.raises(InputError, match="max_jobs_per_user.*refused by admission: user 'ann' has 1 active jobs"):
        svc.check_rules([JobSpec(JOB.job_type, steps=100, size="tiny", rules=JobRules(user="ann"))])


def test_not_allocated_not_placed_and_new(make_service):
    svc = make_service()
    register(svc, "w1", "v100", 1)
    a, b, c = svc.state.submit([JOB] * 3)
    why = decide(svc, one_type([a, b, c], [0.5, 0.5, 0.0]))
    assert why[c].startswith("not allocated by the policy (")
    assert why[c].endswith("it gives the job 0 of every worker type (3 jobs share 1 GPU)")
    placed, waits = (a, b) if why[a].startswith("placed") else (b, a)
    assert why[placed] == "placed for the next round on v100 w1:0; launched when it starts"
    assert why[waits] == "allocated 0.50 of v100 but not placed this round: other jobs' turn on those GPUs " \
                         "(time-sharing by priority)"
    [d] = svc.state.submit([JOB])
    with svc.state.lock:
        assert svc.waiting.current(svc.state.jobs[d]) == NEW


def test_a_fenced_relaunch_and_a_failed_attempt(make_service):
    svc = make_service()
    register(svc, "w1", "v100", 1)
    register(svc, "w2", "v100", 1)
    a, b = svc.state.submit([JOB] * 2)
    run_attempt(svc, a, "w1")
    run_attempt(svc, b, "w2")
    svc.state.worker_lost(svc.state.workers["w1"], "test")      # a's attempt may still run there
    svc.state.report(DoneReport("w2", b, 1, exit_code=1, steps=0, reason="exited"))
    why = decide(svc)
    assert why[a].startswith("relaunch fenced: attempt 1 was lost and may still run; waits until w1 confirm it")
    assert why[b].startswith("attempt 1 failed (1 of 3 failures allowed; exit status 1): relaunched no sooner "
                             "than the next round, nor before "), why[b]


def test_reasons_are_stored_once_and_read_offline(make_service, tmp_path):
    svc = make_service()
    register(svc, "w1", "v100", 1)
    [m] = svc.state.submit([JobSpec(JOB.job_type, steps=100, scale_factor=2, size="tiny")])
    why = decide(svc)[m]
    assert why.startswith("needs 2 GPUs")
    written: list[str] = []
    svc.store._db.set_trace_callback(written.append)
    decide(svc)                                                  # the same reason: not written again
    svc.store._db.set_trace_callback(None)
    assert written and not any("SET reason" in sql for sql in written)
    [d] = svc.state.submit([JobSpec(JOB.job_type, steps=100, scale_factor=3, size="tiny")])
    svc.store._db.set_trace_callback(written.append)
    decide(svc)                                                  # a new one: written
    svc.store._db.set_trace_callback(None)
    assert sum("SET reason" in sql for sql in written) == 1
    [job] = [j for j in read_state_dir(tmp_path / "state", job_limit=10).jobs if j.job_id == m]
    assert job.reason == why
    assert svc.status().jobs[0].reason == why


def test_a_cancel_keeps_progress_and_drops_the_allocation_row(make_service, tmp_path):
    svc = make_service()
    register(svc, "w1", "v100", 1)
    a, b = svc.state.submit([JOB] * 2)
    att = run_attempt(svc, a, "w1")
    with svc.state.lock:
        svc.state.progress(svc.state.jobs[a], att, 991, 10.0)
    decide(svc, one_type([a, b], [0.5, 0.5]))
    assert {tuple(r.jobs) for r in svc.status().allocation} == {(a,), (b,)}
    svc.state.cancel(a)
    for st in (svc.status(), read_state_dir(tmp_path / "state")):
        rows = [tuple(r.jobs) if hasattr(r, "jobs") else r[0] for r in st.allocation]
        assert rows == [(b,)]
        [job] = [j for j in st.jobs if j.job_id == a]
        assert (job.status, job.steps_live) == ("cancelled", 991)


def test_idle_rounds_say_so(make_service):
    svc = make_service()
    [m] = svc.state.submit([JOB])
    decide(svc)
    reply = svc.status()
    assert reply.round_note == "idle: nothing to run (1 queued job cannot run now: see their reasons)"
    assert reply.jobs[0].reason == "no live worker of a type it may run on (v100, p100, k80)"
    assert m == reply.jobs[0].job_id


def test_the_arrivals_backfill_sees_no_rate_on_a_type_the_rules_forbid(make_service):
    svc = make_service()
    register(svc, "w1", "v100", 1)
    [m] = svc.state.submit([JobSpec(JOB.job_type, steps=100, size="tiny", rules=JobRules(allowed_types=("k80",)))])
    view = svc.allocator.believed([m])            # what a mid-round arrival is placed by (runtime.backfill)
    rates = dict(zip(svc.state.worker_types, np.asarray(view.throughputs)[0]))
    assert rates["v100"] == 0 and rates["p100"] == 0 and rates["k80"] > 0
