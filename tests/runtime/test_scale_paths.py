"""The calls that must not grow with the queue (issue 42), and liveness judged fairly.

ClusterState over a real SQLite store, attempts made by hand (no processes): a heartbeat and a
registration touch the calling worker's attempts only (the jobs dict is watched for scans); a
worker declared dead while its attempt runs on gets that attempt back when it reports it, unless
something took its place; a worker whose heartbeats waited on a busy scheduler is not declared
dead for it, and one that stops heartbeating still is.
"""

from __future__ import annotations

import threading
import time

from gavel_ng.profiles import default_table
from gavel_ng.protocol.jobspec import JobSpec
from gavel_ng.runtime.config import ClusterConfig
from gavel_ng.runtime.jobs import Attempt, AttemptRef
from gavel_ng.runtime.measured import MeasuredTable
from gavel_ng.runtime.state import ClusterState, Registration
from gavel_ng.runtime.store import Store

JOB = JobSpec("ResNet-18 (batch size 32)", 1000, size="tiny")


class Watched(dict):
    """The jobs dict, counting every walk over all of it."""

    scans = 0

    def values(self):
        Watched.scans += 1
        return super().values()

    def items(self):
        Watched.scans += 1
        return super().items()

    def __iter__(self):
        Watched.scans += 1
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


def test_heartbeats_and_registrations_cost_the_workers_attempts_not_the_queue(tmp_path):
    st = _state(tmp_path)
    _join(st, "w1")
    _join(st, "w2")
    ids = st.submit([JOB] * 300)
    a1, a2, a3 = _launch(st, ids[0], "w1", 0), _launch(st, ids[1], "w2", 0), _launch(st, ids[2], "w1", 1)
    watched = Watched(st.jobs)                    # every component holds the same dict: swap it everywhere
    st.jobs = st.book.jobs = st.measurements.jobs = watched
    Watched.scans = 0
    answer = st.heartbeat("w1", [AttemptRef(ids[0], 1), AttemptRef(ids[1], 1)])
    assert {r.job_id for r, _ in answer.leases} == {ids[0], ids[2]}            # its own attempts' lease ends
    assert [(r.job_id, r.attempt) for r in answer.kills] == [(ids[1], 1)]       # not its attempt: stopped
    assert st.jobs[ids[1]].live is a2                                           # and left alone where it runs
    kills = _join(st, "w1", [AttemptRef(ids[0], 1)])                            # no longer runs ids[2]
    assert not kills and st.jobs[ids[2]].live is None and st.jobs[ids[0]].live is a1
    assert [(e["job_id"], e["detail"]["attempt"]) for e in st.store.events("lost")] == [(ids[2], a3.attempt)]
    assert st.jobs[ids[2]].fence is None and not st.index.fences_on("w1")      # gone there: not fenced
    assert Watched.scans == 0, "a heartbeat or a registration walked the whole queue"


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


def test_liveness_does_not_blame_workers_for_the_schedulers_stall(tmp_path):
    st = _state(tmp_path, worker_timeout_seconds=0.4, heartbeat_seconds=0.1)
    stop = threading.Event()
    threading.Thread(target=st.stalls.run_ticker, args=(stop,), daemon=True).start()
    _join(st, "w1")
    beating = threading.Event()
    beating.set()

    def heartbeats():
        while not stop.is_set():
            if beating.is_set():
                st.heartbeat("w1", [])
            time.sleep(0.05)

    threading.Thread(target=heartbeats, daemon=True).start()
    try:
        with st.lock:                 # the round holds the state 3 timeouts long; heartbeats wait for it
            time.sleep(1.2)
            kills = st.check_workers()    # the order: the check right after, before any heartbeat got in
            st._checked = -1.0
        assert not kills and st.workers["w1"].alive
        time.sleep(0.5)
        st._checked = -1.0
        st.check_workers()
        assert st.workers["w1"].alive and st.stalls.total >= 1.0      # the heartbeat's wait was a stall
        beating.clear()               # now it really stops: declared dead once the scheduler could hear it
        end = time.monotonic() + 30
        while st.workers["w1"].alive and time.monotonic() < end:
            st.check_workers()
            time.sleep(0.05)
        assert not st.workers["w1"].alive
    finally:
        stop.set()
