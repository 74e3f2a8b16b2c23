"""A round's launches (runtime.launcher): recorded in batches, sent concurrently, written off when the job
ended meanwhile. A real scheduler service and real Worker gRPC servers on loopback that accept RunJob and
run nothing; the status of a large round is bounded to the jobs it lists."""

from __future__ import annotations

import time

from service_helpers import FakeWorker, register, wait_for

from gavel_ng.protocol.jobspec import JobSpec
from gavel_ng.runtime.state import Registration

JOB = JobSpec("ResNet-18 (batch size 32)", steps=100_000, size="tiny")


def _serve(service, fakes, gpus: int) -> list:
    """Each fake a real Worker server on loopback, registered as worker wK of `gpus` V100s; their servers."""
    servers = []
    for k, fake in enumerate(fakes):
        server, address = fake.serve(service.secret)
        servers.append(server)
        service.state.register(Registration(f"w{k}", address, "v100", gpus), service.worker_stub)
    return servers


def test_a_rounds_launches_go_out_in_batches_and_each_reaches_its_worker(service):
    fakes = [FakeWorker() for _ in range(4)]
    servers = _serve(service, fakes, 128)
    try:
        ids = service.state.submit([JOB] * 450)
        wait_for(lambda: sum(len(f.runs) for f in fakes) >= 450, "not every job reached a worker")
        runs = [r for f in fakes for r in f.runs]
        assert sorted(runs) == [(m, 1) for m in ids]              # each attempt sent once, to one worker
        with service.state.lock:
            assert all(service.state.jobs[m].status == "running" for m in ids)
        # a batch's event is written once its last RunJob is answered: after the worker took the call
        wait_for(lambda: sum(e["detail"]["launches"] for e in service.store.events("launched")) == 450,
                 "the launch batches were not recorded")
        assert len(service.store.events("launched")) <= 3
        assert len(service.store.events("launch")) == 450 and service.store.get_meta("launches") == "450"
        st = service.status(job_limit=10)                         # a page of the round: its rows only
        assert len(st.jobs) == 10 and st.job_counts["running"] == 450
        assert {m for r in st.allocation for m in r.jobs} <= {j.job_id for j in st.jobs}
        assert sum(len(w.running_jobs) for w in st.workers) == 450
        service.executor.send_kills(service.state.cancel(ids[1])[1])   # a KillJob goes out from the sender too
        wait_for(lambda: (ids[1], 1) in [k for f in fakes for k in f.kills], "the KillJob did not reach the worker")
    finally:
        for server in servers:
            server.stop(0)


def test_a_launch_whose_job_ended_while_it_was_recorded_is_written_off(make_service):
    svc = make_service()
    register(svc, "w1", "v100", 4)
    a, b = svc.state.submit([JOB, JOB])
    svc.planner.arrive([a, b])
    svc.executor._begin_round(svc.executor.publish(svc.planner.plan(time.time())))
    launcher, st = svc.executor.launcher, svc.state
    now = time.time()
    with st.lock:
        picks = launcher._pick(now, 10)
    assert sorted(p.job.job_id for p in picks) == [a, b]
    st.store.add_launches([launcher._row(p, now) for p in picks], st.round_no, len(picks))
    st.cancel(a)                                                  # the client cancelled it meanwhile
    with st.lock:
        launched = launcher._apply(picks, now)
    assert [job.job_id for job, _ in launched] == [b]
    assert st.jobs[a].status == "cancelled" and st.jobs[a].live is None
    rows = {r["job_id"]: r for r in st.store.attempts()}
    assert rows[a]["status"] == "lost" and rows[b]["status"] == "running"
    assert {j.job_id: j.status for j in st.store.load_jobs()} == {a: "cancelled", b: "running"}
    [lost] = st.store.events("lost")
    assert lost["job_id"] == a and lost["detail"]["reason"] == "not started: its job ended"


class Batching(FakeWorker):
    """A worker of this version: RunJobs takes a round's launches in one call; it refuses job `refuse`, as
    the daemon refuses a launch it cannot run."""

    def __init__(self, refuse: int = -1):
        super().__init__()
        self.calls, self.refuse = [], refuse

    def RunJobs(self, req, context):
        from gavel_ng.protocol.protos import gavel_pb2 as pb

        with self.lock:
            self.calls.append(len(req.jobs))
            self.runs += [(r.job_id, r.attempt) for r in req.jobs if r.job_id != self.refuse]
        return pb.BatchReply(refused=["gpus: [5] not distinct GPUs of 0..3" if r.job_id == self.refuse else ""
                                      for r in req.jobs])


def test_a_workers_launches_go_out_in_one_runjobs_call_and_a_refused_one_fails_alone(service):
    """Before RunJobs each launch was its own call: 5,000 at a boundary at 10,000 GPUs (issue 42). The first
    test above covers a worker without it (FakeWorker: UNIMPLEMENTED, then RunJob one by one)."""
    fakes = [Batching(refuse=3), Batching(refuse=3)]
    servers = _serve(service, fakes, 64)
    try:
        ids = service.state.submit([JOB] * 120)
        wait_for(lambda: sum(len(f.runs) for f in fakes) >= 119 and service.state.jobs[3].failures >= 1,
                 "not every job reached a worker")
        runs = [r for f in fakes for r in f.runs]
        assert sorted(r for r in runs if r[1] == 1) == [(m, 1) for m in ids if m != 3]   # each sent once
        batched = [c for f in fakes for c in f.calls if c > 1]   # (job 3's retry is one job: RunJob)
        assert len(batched) <= 4 and sum(batched) == 120
        assert "refused RunJob (INVALID_ARGUMENT)" in service.state.jobs[3].error
        with service.state.lock:
            assert all(service.state.jobs[m].status == "running" for m in ids if m != 3)
    finally:
        for server in servers:
            server.stop(0)


class Refusing(FakeWorker):
    def RunJob(self, req, context):
        import grpc

        context.abort(grpc.StatusCode.INVALID_ARGUMENT, "gpus: [5] not distinct GPUs of 0..3")


def test_a_refused_runjob_ends_its_attempt_as_a_failed_start(service):
    server, address = Refusing().serve(service.secret)
    try:
        service.state.register(Registration("w0", address, "v100", 1), service.worker_stub)
        [m] = service.state.submit([JOB])
        wait_for(lambda: service.state.jobs[m].failures >= 1, "the refusal was not counted as a failure")
        job = service.state.jobs[m]
        assert "refused RunJob (INVALID_ARGUMENT)" in job.error and service.state.workers["w0"].alive
    finally:
        server.stop(0)


def test_a_starting_attempt_the_next_plan_keeps_is_renewed_and_granted(make_service):
    """A job that has not sent InitJob cannot ask for its renewal: the scheduler decides it at the next plan's
    publication and records and grants it without the lock, so the attempt is not left `renewing` (which would
    tell the job, once started, to ask again until its lease ran out)."""
    svc = make_service()
    register(svc, "w1", "v100", 4)
    [a] = svc.state.submit([JOB])
    svc.planner.arrive([a])
    ex, st = svc.executor, svc.state
    ex._begin_round(ex.publish(svc.planner.plan(time.time())))
    now = time.time()
    with st.lock:
        picks = ex.launcher._pick(now, 10)
    st.store.add_launches([ex.launcher._row(p, now) for p in picks], st.round_no, len(picks))
    with st.lock:
        ex.launcher._apply(picks, now)
    att = st.jobs[a].live
    assert att is not None and not att.started and att.lease_end == ex.round_end
    ex.publish(svc.planner.plan(time.time()))                    # the next round keeps it where it is
    assert not att.renewing and att.lease_end == ex.round_end + ex.L
    assert [e["job_id"] for e in st.store.events("renew")] == [a]
