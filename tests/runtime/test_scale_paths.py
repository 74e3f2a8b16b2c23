"""The calls that must not grow with the queue (issue 42), and liveness judged fairly.

Over real gRPC on loopback (a scheduler service, Worker services that accept RunJob and run
nothing, heartbeats and registrations as a worker sends them): a heartbeat and a registration
touch the calling worker's attempts only (the jobs dict is watched for walks from the handler
threads); a worker whose heartbeats waited on a busy scheduler is not declared dead for it, one that
stops heartbeating still is, and once back it gets its attempt again. ClusterState over a real
SQLite store, attempts made by hand: when an attempt is given back and when it is not.
"""

from __future__ import annotations

import threading
import time

from service_helpers import FakeWorker, wait_for

from gavel_ng.profiles import default_table
from gavel_ng.protocol.client import SchedulerClient
from gavel_ng.protocol.jobspec import JobSpec
from gavel_ng.protocol.protos import gavel_pb2 as pb
from gavel_ng.protocol.rpc import Stub, open_channel
from gavel_ng.runtime.config import ClusterConfig
from gavel_ng.runtime.jobs import Attempt, AttemptRef, DoneReport
from gavel_ng.runtime.measured import MeasuredTable
from gavel_ng.runtime.state import ClusterState, Registration
from gavel_ng.runtime.store import Store

JOB = JobSpec("ResNet-18 (batch size 32)", 1000, size="tiny")


class Watched(dict):
    """The jobs dict, counting the walks over all of it made by gRPC handler threads (a call's own work)."""

    scans = 0

    def _walk(self):
        if threading.current_thread().name.startswith("grpc"):
            Watched.scans += 1

    def values(self):
        self._walk()
        return super().values()

    def items(self):
        self._walk()
        return super().items()

    def __iter__(self):
        self._walk()
        return super().__iter__()


def _state(tmp_path, **config) -> ClusterState:
    st = ClusterState(ClusterConfig(worker_types=("v100",), **config), Store(tmp_path),
                      MeasuredTable(default_table(["v100"]), ["v100"]), "secret")
    st.restore()
    return st


def _join(st: ClusterState, worker_id: str, running=(), gpus: int = 4):
    return st.register(Registration(worker_id, f"{worker_id}:1", "v100", gpus, list(running)), lambda a: (None, None))


def _launch(st: ClusterState, job_id: int, worker_id: str, gpu: int, lease: float = 60.0) -> Attempt:
    job = st.jobs[job_id]
    job.attempts += 1
    now = time.time()
    st.store.add_launches([(job_id, job.attempts, [[worker_id, gpu]], "v100", now, job.steps_done, None)],
                          st.round_no, job.attempts)
    att = Attempt(job_id, job.attempts, [(worker_id, gpu)], "v100", True, now, now + lease, job.steps_done)
    job.live, job.status = att, "running"
    st.attempt_started(att)
    return att


def test_a_worker_back_from_the_dead_gets_back_the_attempts_nothing_replaced(tmp_path):
    st = _state(tmp_path, grace_seconds=30.0)
    _join(st, "w1")
    _join(st, "w2")
    w1 = st.workers["w1"]
    a, b, c = st.submit([JOB] * 3)
    kept, taken = _launch(st, a, "w1", 0), _launch(st, b, "w1", 1)
    st.worker_lost(w1, "no heartbeat for 7s")            # e.g. the scheduler itself stalled
    assert st.jobs[a].live is None and st.jobs[a].fence is not None
    _launch(st, c, "w1", 1)                              # someone else got b's GPU meanwhile
    kills = _join(st, "w1", [AttemptRef(a, kept.attempt), AttemptRef(b, taken.attempt)])
    assert st.jobs[a].live is kept and st.jobs[a].status == "running" and st.jobs[a].fence is None
    assert [(k.job_id, k.attempt) for k in kills] == [(b, taken.attempt)]      # b's GPU is c's now
    assert st.jobs[b].live is None
    reclaimed = st.store.events("reclaimed")
    assert [(e["job_id"], e["detail"]["attempt"]) for e in reclaimed] == [(a, kept.attempt)]
    [row] = [r for r in st.store.attempts(a) if r["attempt"] == kept.attempt]
    assert row["status"] == "running" and row["ended"] is None
    answer = st.heartbeat("w1", [AttemptRef(a, kept.attempt)])
    assert [r.job_id for r, _ in answer.leases] == [a] and not answer.kills
    # its GPU-seconds counted once: up to the loss, then from there on
    held = st.jobs[a].gpu_seconds["v100"]
    assert kept.counted > 0 and held <= time.time() - kept.launched + 1e-3


def test_a_relaunched_job_is_not_taken_back(tmp_path):
    st = _state(tmp_path, grace_seconds=30.0)
    _join(st, "w1")
    _join(st, "w2")
    [a] = st.submit([JOB])
    old = _launch(st, a, "w1", 0)
    st.worker_lost(st.workers["w1"], "gone")
    st.jobs[a].fence = None                              # its fence ran out; the job ran again elsewhere
    new = _launch(st, a, "w2", 0)
    kills = _join(st, "w1", [AttemptRef(a, old.attempt)])
    assert [(k.job_id, k.attempt) for k in kills] == [(a, old.attempt)] and st.jobs[a].live is new


# ----- over gRPC ----------------------------------------------------------------------------------
class Worker:
    """A worker's side of the scheduler protocol (register, heartbeat) over gRPC, its Worker service a
    FakeWorker on loopback."""

    def __init__(self, svc, worker_id: str, gpus: int = 4):
        self.svc, self.worker_id, self.gpus = svc, worker_id, gpus
        self.fake = FakeWorker()
        self.server, self.address = self.fake.serve(svc.secret)
        self.stub = Stub(open_channel(f"127.0.0.1:{svc.port}", None), "Scheduler", svc.secret, timeout=5)
        self.beating = threading.Event()
        self.stop = threading.Event()
        self.refused = 0                    # heartbeats answered NOT_FOUND (declared dead)

    def running(self) -> list:
        """What it runs: every attempt it was sent and not told to kill."""
        with self.fake.lock:
            return [pb.AttemptRef(job_id=m, attempt=a) for m, a in self.fake.runs if (m, a) not in self.fake.kills]

    def register(self):
        return self.stub.RegisterWorker(pb.RegisterWorkerRequest(
            worker_id=self.worker_id, address=self.address, gpu_type="v100", gpus=self.gpus, running=self.running()))

    def heartbeat(self):
        return self.stub.Heartbeat(pb.HeartbeatRequest(worker_id=self.worker_id, running=self.running()))

    def beat_every(self, seconds: float) -> None:
        """Heartbeats from a thread while `beating` is set (each waits for its answer, as the daemon's do)."""
        def run():
            while not self.stop.wait(seconds):
                if self.beating.is_set():
                    try:
                        self.heartbeat()
                    except Exception:
                        self.refused += 1

        self.beating.set()
        threading.Thread(target=run, daemon=True).start()

    def close(self) -> None:
        self.stop.set()
        self.server.stop(0)


def test_a_heartbeat_and_a_registration_over_grpc_cost_the_workers_attempts_not_the_queue(make_service):
    svc = make_service()
    watched = Watched(svc.state.jobs)     # every component holds the same dict: swap it everywhere
    svc.state.jobs = svc.state.book.jobs = svc.state.measurements.jobs = watched
    svc.start()
    workers = [Worker(svc, f"w{k}") for k in range(2)]
    try:
        for w in workers:
            w.register()
        ids = svc.state.submit([JOB] * 300)
        wait_for(lambda: sum(len(w.running()) for w in workers) == 8, "8 jobs did not start on 8 GPUs")
        Watched.scans = 0
        mine = {r.job_id for r in workers[0].running()}
        answer = workers[0].heartbeat()
        assert {u.job_id for u in answer.leases} == mine and not answer.kill     # its own attempts' leases
        stray = pb.AttemptRef(job_id=ids[-1], attempt=1)                        # one it was never sent
        answer = workers[0].stub.Heartbeat(pb.HeartbeatRequest(worker_id="w0", running=workers[0].running() + [stray]))
        assert [(k.job_id, k.attempt) for k in answer.kill] == [(ids[-1], 1)]
        workers[1].register()                                                   # registers again, as after a restart
        assert Watched.scans == 0, "a heartbeat or a registration walked the whole queue"
        workers[0].stub.ListJobs(pb.ListJobsRequest())                         # a call that does walk it is seen
        assert Watched.scans > 0
        with svc.state.lock:
            assert sum(j.live is not None for j in svc.state.jobs.values()) == 8   # nothing was lost by them
    finally:
        for w in workers:
            w.close()


def test_a_stalled_scheduler_kills_no_worker_and_a_worker_declared_dead_gets_its_attempt_back(make_service):
    svc = make_service(heartbeat_seconds=0.1, worker_timeout_seconds=0.5, grace_seconds=30.0)
    svc.start()
    w = Worker(svc, "w1", gpus=1)
    try:
        w.register()
        [m] = svc.state.submit([JOB])
        wait_for(lambda: w.running(), "the job did not start")
        w.beat_every(0.1)
        again = threading.Thread(target=w.register)   # a registration takes the lock: it waits for the stall
        with svc.state.lock:          # the scheduler holds its state 3 timeouts long
            seen = svc.state.workers["w1"].last_seen
            again.start()
            time.sleep(1.5)
            # heartbeats that change nothing are answered without the lock meanwhile
            assert svc.state.workers["w1"].last_seen > seen
            svc.state._checked = -1.0     # and checks the workers while the registration still waits
            svc.state.check_workers()
        again.join()
        time.sleep(0.5)
        assert svc.state.workers["w1"].alive and not svc.store.events("worker_down")
        stalls = svc.store.events("stall")            # measured, logged once and recorded
        assert svc.state.stalls.total >= 1.0 and stalls and all(e["detail"]["seconds"] >= 1.0 for e in stalls)
        [attempt] = w.running()
        w.beating.clear()             # it really stops: declared dead, its attempt written off
        wait_for(lambda: not svc.state.workers["w1"].alive, "a silent worker was not declared dead", 10.0)
        with svc.state.lock:          # worker_lost marks it dead, then writes its attempts off, under the lock
            assert svc.state.jobs[m].live is None and svc.state.jobs[m].fence is not None
        w.register()                  # back, still running it: the attempt is live again, not relaunched
        job = svc.state.jobs[m]
        assert job.live is not None and job.live.attempt == attempt.attempt and job.status == "running"
        assert [e["job_id"] for e in svc.store.events("reclaimed")] == [m]
        w.beating.set()
        time.sleep(0.5)
        assert w.fake.runs == [(m, attempt.attempt)] and svc.state.workers["w1"].alive
    finally:
        w.close()


def test_a_heartbeat_that_changes_nothing_is_answered_without_the_lock_and_as_the_locked_path_would(tmp_path):
    st = _state(tmp_path, grace_seconds=30.0)
    _join(st, "w1")
    a, b, c = st.submit([JOB] * 3)
    att_a, att_b = _launch(st, a, "w1", 0), _launch(st, b, "w1", 1)
    seen = st.workers["w1"].last_seen
    answered = []
    holder = threading.Thread(target=lambda: answered.append(st.heartbeat("w1", [AttemptRef(a, att_a.attempt)])))
    with st.lock:                         # held by another thread: the usual heartbeat does not wait for it
        holder.start()
        holder.join(5.0)
        assert answered and not holder.is_alive()
    [answer] = answered
    assert st.workers["w1"].last_seen > seen and not answer.kills
    assert [(r.job_id, r.attempt) for r, _ in answer.leases] == [(a, att_a.attempt), (b, att_b.attempt)]
    assert all(55.0 < left <= 60.0 for _, left in answer.leases)
    # a stray attempt (not live here) needs the lock: it is told to stop, as before
    answer = st.heartbeat("w1", [AttemptRef(a, att_a.attempt), AttemptRef(c, 7)])
    assert [(k.job_id, k.attempt) for k in answer.kills] == [(c, 7)]
    # so does a worker a fence waits on: the fence is lifted once the worker no longer lists the attempt
    with st.lock:
        st.book.lose(att_a, "written off")
    assert st.jobs[a].fence is not None
    answer = st.heartbeat("w1", [AttemptRef(b, att_b.attempt)])
    assert st.jobs[a].fence is None and [r.job_id for r, _ in answer.leases] == [b]
    st.worker_lost(st.workers["w1"], "gone")
    assert st.heartbeat("w1", [AttemptRef(b, att_b.attempt)]) is None     # declared dead: register again


def test_a_report_is_a_sign_of_life_before_it_waits_for_the_lock(tmp_path):
    st = _state(tmp_path)
    _join(st, "w1")
    w = st.workers["w1"]
    w.last_seen -= 100.0                  # silent for long: a report still says it is alive
    st.seen("w1")
    assert time.monotonic() - w.last_seen < 1.0
    st.worker_lost(w, "gone")
    before = w.last_seen
    st.seen("w1")                         # a dead worker is not revived by it: it must register again
    assert w.last_seen == before and not w.alive


def test_a_rounds_preemptions_are_logged_twenty_one_by_one_and_the_rest_counted(tmp_path, caplog):
    from gavel_ng.runtime.jobs import LOG_EACH, DoneReport

    st = _state(tmp_path, grace_seconds=30.0)
    for k in range(8):
        _join(st, f"w{k}")
    ids = st.submit([JOB] * (LOG_EACH + 11))
    atts = [_launch(st, m, f"w{n // 4}", n % 4) for n, m in enumerate(ids[:LOG_EACH + 10])]
    caplog.set_level("INFO", logger="gavel_ng.runtime.jobs")
    for att in atts:
        st.report(DoneReport(att.placement[0][0], att.job_id, att.attempt, -15, steps=-1, reason="killed-lease"))
    st.round_no += 1
    last = _launch(st, ids[-1], "w0", 0)
    st.report(DoneReport("w0", last.job_id, last.attempt, -15, steps=-1, reason="killed-lease"))
    lines = [r.getMessage() for r in caplog.records if "preempted" in r.getMessage()]
    assert len(lines) == LOG_EACH + 2 and st.book.tally["preempted"] == LOG_EACH + 11
    assert lines[LOG_EACH] == "10 more attempts preempted in round 0 (each has its end event in the state)"
    assert lines[-1].startswith(f"job {ids[-1]} attempt 1 preempted at step")
    assert len(st.store.events("end")) == LOG_EACH + 11


def test_a_heartbeat_is_answered_while_every_handler_thread_waits_for_the_state(make_service):
    """Heartbeats have threads of their own (liveness.TimedPool): 80 registrations waiting for the state's
    lock fill the 64 handler threads and the pool's queue, and a heartbeat is still answered at once.
    Status reads have their own lane as well."""
    from concurrent.futures import ThreadPoolExecutor

    svc = make_service()
    svc.start()
    w = Worker(svc, "w1")
    callers = ThreadPoolExecutor(80)
    try:
        w.register()
        stub = Stub(open_channel(f"127.0.0.1:{svc.port}", None), "Scheduler", svc.secret, timeout=60)
        with svc.state.lock:
            waiting = [callers.submit(stub.RegisterWorker, pb.RegisterWorkerRequest(
                worker_id=f"x{k}", address=f"127.0.0.1:{20000 + k}", gpu_type="v100", gpus=1)) for k in range(80)]
            time.sleep(1.0)                   # every handler thread now waits for the lock
            start = time.monotonic()
            w.heartbeat()
            answered = time.monotonic() - start
            assert not any(f.done() for f in waiting)
        assert answered < 2.0, answered
        for f in waiting:
            f.result(timeout=60)
        assert len(svc.state.workers) == 81
        # a status read has threads of its own too (they start at the first call)
        reads = next(p for m, p in svc.pool.lanes.items() if m.endswith(b"/GetStatus"))
        assert not reads._threads
        with SchedulerClient(f"127.0.0.1:{svc.port}", token=svc.secret) as client:
            client.status()
        assert len(reads._threads) == 1
    finally:
        callers.shutdown(wait=False)
        w.close()


def test_status_reads_its_page_without_a_lock_held_elsewhere_and_as_it_reads_under_it(make_service):
    """A round's reports hold the state's lock in turns at a boundary; `status` waits for it at most
    STATUS_LOCK_WAIT, then reads its page without it (SchedulerService.status): the same reply."""
    svc = make_service(worker_types=("v100",))
    with svc.state.lock:
        pass
    ids = svc.state.submit([JOB, JobSpec("ResNet-50 (batch size 64)", 500, size="tiny"), JOB])
    svc.state.cancel(ids[1])
    locked = svc.status()
    held, done = threading.Event(), threading.Event()

    def hold() -> None:
        with svc.state.lock:
            held.set()
            done.wait(30)                        # until status returned (30 s: it waited for the lock)

    holder = threading.Thread(target=hold)
    holder.start()
    held.wait(10)
    free = svc.status()
    still_held = not done.is_set() and holder.is_alive()
    done.set()
    holder.join()
    assert still_held                            # answered while the lock was held elsewhere
    assert dict(free.job_counts) == dict(locked.job_counts) == {"queued": 2, "cancelled": 1}
    assert [(j.job_id, j.status, j.reason) for j in free.jobs] == [(j.job_id, j.status, j.reason) for j in locked.jobs]
    assert list(free.classes) == list(locked.classes)


def test_a_report_sent_again_leaves_an_ended_attempts_record_as_it_was(tmp_path):
    """A worker sends an end again when its call ran past its deadline though the scheduler took it: the attempt's
    record stays as the first report left it. The late report of an attempt written off still records its end."""
    st = _state(tmp_path)
    _join(st, "w1")
    [job_id] = st.submit([JOB])
    att = _launch(st, job_id, "w1", 0)
    end = DoneReport("w1", job_id, att.attempt, -15, steps=-1, reason="killed-lease", wall_seconds=5.0)
    st.report(end)
    first = st.store.attempts(job_id)
    assert first[0]["status"] != "running"
    st.report(end)                                   # the same end again
    assert st.store.attempts(job_id) == first
    lost = _launch(st, job_id, "w1", 0)
    st.worker_lost(st.workers["w1"], "silent")       # written off ...
    assert st.store.attempts(job_id)[1]["status"] == "lost"
    st.report(DoneReport("w1", job_id, lost.attempt, -15, steps=-1, reason="killed", wall_seconds=3.0))
    late = st.store.attempts(job_id)[1]              # ... and its end, when it comes, recorded
    assert (late["status"], late["wall_seconds"]) == ("late", 3.0)
    assert st.store.attempts(job_id)[0] == first[0]
