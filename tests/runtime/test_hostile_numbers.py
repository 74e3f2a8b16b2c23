"""Numbers and identities from jobs and workers are checked before they are stored (runtime/checks.py).

A real scheduler on loopback; where a live attempt is needed, a real worker daemon in this process runs a
job that only sleeps, so the test speaks for the job with its own job token.
"""

from __future__ import annotations

import logging
import math
import sqlite3
import sys
import time

import grpc
import numpy as np
import pytest

from gavel_ng.allocator import PolicyAllocator, PolicyJobs
from gavel_ng.logs import collapse_repeats
from gavel_ng.protocol.client import SchedulerClient
from gavel_ng.protocol.limits import MAX_BATCH
from gavel_ng.protocol.protos import gavel_pb2 as pb
from gavel_ng.protocol.rpc import Security, Stub, job_token, open_channel
from gavel_ng.runtime.config import ClusterConfig
from gavel_ng.runtime.service import SchedulerService
from gavel_ng.runtime.store import Store
from gavel_ng.runtime.workers import WorkerConflict, WorkerRegistry
from gavel_ng.worker.daemon import WorkerDaemon

TYPE = "ResNet-18 (batch size 32)"
SLEEPER = {"job_type": TYPE, "steps": 1000, "command": [sys.executable, "-c", "import time; time.sleep(300)"]}


def _stub(svc, token):
    return Stub(open_channel(f"127.0.0.1:{svc.port}", None), "Scheduler", token, timeout=10)


def _refused(call, req, field, code=grpc.StatusCode.INVALID_ARGUMENT):
    with pytest.raises(grpc.RpcError) as err:
        call(req)
    assert err.value.code() == code, err.value.details()
    assert field in err.value.details(), err.value.details()
    return err.value.details()


def _rows(svc, sql):
    db = sqlite3.connect(f"file:{svc.state_dir / 'gavel.sqlite'}?mode=ro", uri=True, timeout=30)
    try:
        return db.execute(sql).fetchall()
    finally:
        db.close()


def _wait(pred, what, timeout=120.0):
    end = time.monotonic() + timeout
    while not (value := pred()):
        assert time.monotonic() < end, what
        time.sleep(0.1)
    return value


@pytest.fixture
def service(tmp_path):
    made = []

    def start(state=None):
        svc = SchedulerService(ClusterConfig(round_seconds=60.0, heartbeat_seconds=0.5), state or tmp_path / "state",
                               port=0, bind="127.0.0.1")
        svc.start()
        made.append(svc)
        return svc

    yield start
    for svc in made:
        svc.stop(grace=0.1)


def _daemon(svc, tmp_path) -> WorkerDaemon:
    """A real worker daemon with one v100, started, registering with `svc`."""
    daemon = WorkerDaemon(f"127.0.0.1:{svc.port}", "v100", 1, Security(svc.secret), bind="127.0.0.1",
                          advertise="127.0.0.1", work_dir=str(tmp_path / "worker"), standby=0)
    daemon.start()
    return daemon


@pytest.fixture
def running(service, tmp_path):
    """(service, worker daemon, job id): the sleeper's attempt 1 is live on the daemon's v100."""
    svc = service()
    daemon = _daemon(svc, tmp_path)
    try:
        with SchedulerClient(f"127.0.0.1:{svc.port}", token=svc.secret) as c:
            [job] = c.submit(SLEEPER)
        _wait(lambda: svc.state.jobs[job].live is not None and daemon.running, "the sleeper never started")
        yield svc, daemon, job
    finally:
        daemon.stop()


def test_a_heartbeat_answer_behind_a_renewal_does_not_shorten_the_lease_the_worker_holds(running):
    """The heartbeat port answers from a copy up to 0.2 s behind the scheduler (5 s while the scheduler is stopped):
    right after a renewal the job wrote down (signed, read by the daemon), that copy still says the old end. A lease
    end only grows, so the older answer must not bring the worker's deadline back (tests/worker/test_pause.py
    failed now and then: the worker killed a renewed attempt at its old end while the scheduler was stopped)."""
    svc, daemon, job = running
    with daemon.lock:
        [task] = [t for t in daemon.running if t.ref[0] == job]
        task.deadline = time.time() + 60.0            # as a renewal read from the job's lease file leaves it
        held = task.deadline
    stale = pb.HeartbeatReply(leases=[pb.LeaseUpdate(job_id=job, attempt=task.ref[1], seconds_left=5.0)])
    daemon.route.send = lambda stub, request: stale  # the copy behind the renewal answers
    daemon._heartbeat()
    assert task.deadline == held
    later = pb.HeartbeatReply(leases=[pb.LeaseUpdate(job_id=job, attempt=task.ref[1], seconds_left=120.0)])
    daemon.route.send = lambda stub, request: later  # and a renewal told by heartbeat still extends it
    daemon._heartbeat()
    assert task.deadline > held + 50.0


def test_non_finite_and_impossible_progress_is_refused_and_nothing_stored(running):
    svc, _, job = running
    stub = _stub(svc, job_token(svc.secret, job, 1))
    for steps, secs, field in [(2**62, 1e-308, "steps"), (50, 1e-308, "compute_seconds"),
                               (50, math.nan, "compute_seconds"), (50, math.inf, "compute_seconds"),
                               (50, -1.0, "compute_seconds"), (50, 1e6, "compute_seconds")]:
        _refused(stub.UpdateLease, pb.UpdateLeaseRequest(job_id=job, attempt=1, steps=steps, compute_seconds=secs),
                 field)
    assert svc.table.values == {} and _rows(svc, "SELECT * FROM throughputs") == []
    assert svc.state.jobs[job].steps_live == 0
    out = svc.allocator.allocate([job], time.time())      # the policy still solves
    assert svc.allocator.failures == 0 and out.rows == [(job,)] and np.isfinite(out.X).all()


def test_checkpoint_step_beyond_what_the_job_ran_is_refused(running):
    svc, _, job = running
    stub = _stub(svc, job_token(svc.secret, job, 1))
    for step in (10**15, 1001, 500, -1):      # past the total; never run by an earlier attempt; negative
        _refused(stub.InitJob, pb.InitJobRequest(job_id=job, attempt=1, checkpoint_step=step), "checkpoint_step")
    assert svc.state.jobs[job].steps_done == 0 and _rows(svc, f"SELECT steps_done FROM jobs WHERE job_id={job}") \
        == [(0,)]
    assert stub.InitJob(pb.InitJobRequest(job_id=job, attempt=1, checkpoint_step=0)).seconds_left > 0


def test_reports_for_other_attempts_workers_or_bad_numbers_are_refused(running):
    svc, daemon, job = running
    stub = _stub(svc, svc.secret)
    done = {"job_id": job, "done": True, "steps": 1000, "steps_run": 1000, "reason": "exited"}
    _refused(stub.ReportDone, pb.DoneReport(worker_id=daemon.worker_id, attempt=7, **done), "attempt")
    _refused(stub.ReportDone, pb.DoneReport(worker_id="intruder", attempt=1, **done), "worker_id")
    _refused(stub.ReportDone, pb.DoneReport(worker_id=daemon.worker_id, attempt=1, **{**done, "steps": 10**12}),
             "steps")
    # done at step 1000 while the job itself reported no checkpoint: beyond what its own lease calls support
    _refused(stub.ReportDone, pb.DoneReport(worker_id=daemon.worker_id, attempt=1, **done), "steps")
    _refused(stub.ReportDone, pb.DoneReport(worker_id=daemon.worker_id, attempt=1, **{**done, "steps": -1}),
             "steps_run")
    ended = {**done, "steps": -1, "steps_run": 0}
    _refused(stub.ReportDone, pb.DoneReport(worker_id=daemon.worker_id, attempt=1, compute_seconds=math.nan,
                                            **ended), "compute_seconds")
    _refused(stub.ReportDone, pb.DoneReport(worker_id=daemon.worker_id, attempt=1, wall_seconds=1e9, **ended),
             "wall_seconds")
    j = svc.state.jobs[job]
    assert j.status == "running" and j.live is not None and j.steps_done == 0


def test_a_batch_of_reports_refuses_each_bad_one_in_its_place(running):
    """ReportDones (a worker's ends in one call) takes each report as ReportDone would: a refused one is said in
    its place of the reply, and a batch over MAX_BATCH is refused whole, naming the field."""
    svc, daemon, job = running
    stub = _stub(svc, svc.secret)
    done = {"done": True, "steps": 1000, "steps_run": 1000, "reason": "exited"}
    me = daemon.worker_id
    reply = stub.ReportDones(pb.DoneReports(worker_id=me, reports=[
        pb.DoneReport(worker_id=me, job_id=job, attempt=7, **done),
        pb.DoneReport(worker_id="intruder", job_id=job, attempt=1, **done),
        pb.DoneReport(worker_id=me, job_id=10**9, attempt=1, **done),
        pb.DoneReport(worker_id=me, job_id=job, attempt=1, **{**done, "steps": 10**12})]))
    assert len(reply.refused) == 4
    assert "attempt" in reply.refused[0] and "reports[1].worker_id" in reply.refused[1]
    assert "unknown job" in reply.refused[2] and "steps" in reply.refused[3]
    _refused(stub.ReportDones, pb.DoneReports(worker_id=me, reports=[pb.DoneReport(worker_id=me)] * (MAX_BATCH + 1)),
             "reports")
    j = svc.state.jobs[job]
    assert j.status == "running" and j.live is not None and j.steps_done == 0


def test_report_for_a_never_launched_attempt_leaves_a_queued_job_queued(service):
    svc = service()
    with SchedulerClient(f"127.0.0.1:{svc.port}", token=svc.secret) as c:
        [job] = c.submit(SLEEPER)
    stub = _stub(svc, svc.secret)
    _refused(stub.ReportDone, pb.DoneReport(worker_id="w", job_id=job, attempt=1, done=True, steps=1000,
                                            reason="exited"), "attempt")
    assert svc.state.jobs[job].status == "queued" and svc.state.jobs[job].steps_done == 0
    assert _rows(svc, f"SELECT status, steps_done FROM jobs WHERE job_id={job}") == [("queued", 0)]


def test_a_live_worker_id_cannot_be_taken_from_another_address(running, tmp_path):
    svc, daemon, job = running
    stub = _stub(svc, svc.secret)
    mine = f"127.0.0.1:{daemon.port}"
    details = _refused(stub.RegisterWorker, pb.RegisterWorkerRequest(worker_id=daemon.worker_id, address="127.0.0.1:1",
                                                                      gpu_type="v100", gpus=1),
                       daemon.worker_id, grpc.StatusCode.ALREADY_EXISTS)
    assert mine in details
    w = svc.state.workers[daemon.worker_id]
    assert w.alive and w.address == mine and svc.state.jobs[job].live.attempt == 1
    stub.RegisterWorker(pb.RegisterWorkerRequest(worker_id=daemon.worker_id, address=mine, gpu_type="v100", gpus=1,
                                                 running=[pb.AttemptRef(job_id=job, attempt=1)]))   # its own: fine
    assert svc.state.jobs[job].live.attempt == 1 and svc.state.workers[daemon.worker_id].alive
    # a holder declared dead frees the id for a new address (real SQLite store, the registry alone)
    store = Store(tmp_path / "registry")
    try:
        reg = WorkerRegistry(["v100"], store)
        connect = lambda address: (None, None)         # noqa: E731 - nothing to reach in this check
        w = reg.join("a", "h:1", "v100", 1, connect)
        with pytest.raises(WorkerConflict):
            reg.join("a", "h:2", "v100", 1, connect)
        reg.leave(w, "test")
        assert reg.join("a", "h:2", "v100", 1, connect).address == "h:2"
    finally:
        store.close()


def test_bad_stored_throughputs_are_dropped_at_load_and_jobs_still_run(service, tmp_path, caplog):
    state = tmp_path / "old"
    store = Store(state)
    store.save_throughput(TYPE, 1, "v100", True, math.inf, 3)
    store.save_throughput(TYPE, 1, "p100", True, -2.0, 1)
    store.save_throughput(TYPE, 1, "k80", True, 7.5, 2)
    store.close()
    with sqlite3.connect(store.path) as db:   # an old version's NaN, written to the file as it left it
        db.execute("INSERT INTO throughputs VALUES (?, 1, 'v100', 0, 'NaN', 1, 0)", (TYPE,))
    db.close()
    with caplog.at_level(logging.WARNING, logger="gavel_ng"):
        svc = service(state)
    drops = [r for r in caplog.records if "dropped 3 stored throughputs" in r.getMessage()]
    assert len(drops) == 1 and "v100" in drops[0].getMessage() and "p100" in drops[0].getMessage()
    assert _rows(svc, "SELECT worker_type, steps_per_s FROM throughputs") == [("k80", 7.5)]
    daemon = _daemon(svc, tmp_path)
    try:
        with SchedulerClient(f"127.0.0.1:{svc.port}", token=svc.secret) as c:
            [job] = c.submit(SLEEPER)
        _wait(lambda: svc.state.jobs[job].live is not None, "no job was launched")
        assert svc.allocator.failures == 0
    finally:
        daemon.stop()


class _Jobs:
    def policy_jobs(self, jobs):
        n = len(jobs)
        return PolicyJobs(list(jobs), np.array([1.0, 2.0][:n]), np.ones(n), np.full(n, 100.0), np.full(n, 100.0),
                          np.zeros(n), np.full(n, math.inf))


class _Throughputs:
    """A source whose numbers may go bad (as an old table could be)."""

    fixed = False

    def __init__(self):
        self.T = np.array([[math.inf, 2.0], [1.0, 0.0]])

    def isolated(self, jobs, columns):
        return self.T[: len(jobs)].copy()

    def pair_table(self, jobs, columns, T):   # not a packed policy: never asked
        raise AssertionError("pairs asked of an unpacked policy")


def test_a_failed_solve_falls_back_to_equal_shares_said_once_counted_each(caplog):
    source = _Throughputs()
    alloc = PolicyAllocator("max_min_fairness", ["v100", "k80"], _Jobs(), source, np.array([2.0, 1.0]), warm=False)
    with caplog.at_level(logging.WARNING, logger="gavel_ng"), collapse_repeats() as ledger:
        outs = [alloc.allocate([0, 1], 0.0) for _ in range(3)]
    said = [r for r in caplog.records if "failed to solve" in r.getMessage()]
    assert len(said) == 1 and alloc.failures == 3 and alloc.fallbacks == 3 and alloc.solves == 3
    assert [w["count"] for w in ledger.summary() if "failed to solve" in w["first"]] == [3]   # each one counted
    for out in outs:
        assert out.rows == [(0,), (1,)] and np.isfinite(out.X).all() and (out.X >= 0).all()
        assert (out.X.sum(axis=1) <= 1 + 1e-9).all() and ((out.row_sf[:, None] * out.X).sum(axis=0)
                                                          <= np.array([2.0, 1.0]) + 1e-9).all()
        assert out.X[1, 1] == 0 and out.X[0].sum() > 0 and out.X[1].sum() > 0   # never where T says it cannot run
    source.T = np.array([[3.0, 2.0], [1.0, 0.0]])
    alloc.allocate([0, 1], 0.0)
    assert alloc.failures == 0
