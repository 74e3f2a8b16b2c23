"""Launching a round's attempts without holding the scheduler while it happens.

A round on 10,000 GPUs starts thousands of attempts at once. Each launch is recorded before it
happens (a launch the store refused never happens), yet heartbeats, renewals and reports must go
on being answered meanwhile (issue 42: one transaction per launch under the state's lock, then one
RunJob after another, held the lock for a minute and every worker was declared dead). So the
executor's launches go CHUNK at a time through three steps:

1. **pick** (state lock held, a few ms): planned jobs with no live attempt whose GPUs are free
   and workers alive. Only when something they depend on changed (an attempt started or ended, a
   fence lifted, a job finished, a worker came or went, the round or its plan changed) or a
   backoff or fence ran out: no scan of the round per tick;
2. **record** (no state lock): the chunk's attempts, job rows, events and launch counter in one
   transaction (Store.add_launches);
3. **apply** (state lock held): each attempt goes live, unless its job finished, a worker died or
   its GPUs were taken meanwhile; such a recorded launch is written off at once (`lost`, never sent).

RunJob and KillJob then go out from a pool of SENDERS threads, each call waiting for its answer (a
slow or dead worker holds one thread for RPC_TIMEOUT, not the round). Blocking calls from a pool,
not futures: gRPC starts a polling thread per channel for futures, and with one channel per worker
that doubled the CPU a call costs (0.55 vs 0.28 ms, 1,200 calls to 300 workers on loopback). Each
batch of launches is recorded when its last RunJob is answered (a `launched`
event: how many, and the seconds from the pick). The first LOG_EACH launches of a batch get a log
line each, the rest one line together (each has its `launch` event in the store).
"""

from __future__ import annotations

import logging
import math
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import grpc

from ..protocol.client import placement_label
from ..protocol.limits import MAX_BATCH
from ..protocol.protos import gavel_pb2 as pb
from .adaptive import note_launch
from .jobs import FINISHED, LOG_EACH, Attempt, JobState
from .store import StoreError
from .workers import Kill

log = logging.getLogger(__name__)
CHUNK = 200              # launches picked, recorded and applied at a time
RPC_TIMEOUT = 5.0        # seconds a worker has to answer RunJob or KillJob


class Refused(grpc.RpcError):
    """One launch of a RunJobs call the worker refused (what RunJob says with INVALID_ARGUMENT)."""

    def __init__(self, details: str):
        super().__init__(details)
        self._details = details

    def code(self) -> grpc.StatusCode:
        return grpc.StatusCode.INVALID_ARGUMENT

    def details(self) -> str:
        return self._details
SENDERS = 16             # RunJob and KillJob calls in flight at once


@dataclass(frozen=True)
class Assignment:
    """Where a planned job runs this round (the executor resolves each plan entry to these)."""

    job_id: int
    placement: tuple[tuple[str, int], ...]   # (worker id, local GPU) per rank
    worker_type: str
    consolidated: bool
    partner: int | None = None               # space sharing: the job on the same GPUs


@dataclass
class Pick:
    job: JobState
    a: Assignment
    attempt: int


class Batch:
    """The launches of one look; recorded once the last of its RunJob calls is answered."""

    def __init__(self, launcher: Launcher, round_no: int):
        self.launcher, self.round_no = launcher, round_no
        self.start = time.monotonic()
        self.sent = self.answered = self.failed = self.logged = 0
        self.closed = False
        self._lock = threading.Lock()

    def add(self, n: int) -> None:
        with self._lock:
            self.sent += n

    def answered_one(self, ok: bool) -> None:
        with self._lock:
            self.answered += 1
            self.failed += not ok
            last = self.closed and self.answered == self.sent
        if last:
            self.launcher.batch_done(self)

    def close(self) -> None:
        with self._lock:
            self.closed = True
            last = self.sent and self.answered == self.sent
        if last:
            self.launcher.batch_done(self)


class Launcher:
    def __init__(self, executor, on_batch: Callable[[float], None] | None = None):
        """`executor`: the DeployExecutor whose current round it launches (it owns the plan and the workers' calls);
        `on_batch(seconds)`: metrics, from a batch's pick to its last RunJob answered."""
        self.ex = executor
        self.state = executor.state
        self.pool = ThreadPoolExecutor(SENDERS, thread_name_prefix="send")
        self._seen: tuple | None = None       # what the last look depended on
        self._timer = math.inf                # when a backoff or a fence of a planned job runs out
        self.on_batch = on_batch
        self._single: set[str] = set()        # addresses of workers without RunJobs

    def close(self) -> None:
        self.pool.shutdown(wait=False, cancel_futures=True)

    # ----- when to look -----------------------------------------------------------------------
    def _key(self) -> tuple:
        ex, st = self.ex, self.state
        return (st.index.version, st.registry.version, st.round_no, id(ex.current), len(ex.current), id(ex.next))

    def launch_ready(self, now: float) -> None:
        """Launch every planned job that can start now (the round thread; takes the lock itself)."""
        st = self.state
        batch = None
        while True:
            with st.cv:
                key = self._key()
                if batch is None and key == self._seen and now < self._timer:
                    return
                self._seen = key
                picks = self._pick(now, CHUNK)
                count, round_no = st.stats["launches"], st.round_no
            if not picks:
                break
            batch = batch or Batch(self, round_no)
            try:
                st.store.add_launches([self._row(p, now) for p in picks], round_no, count + len(picks))
            except StoreError:                # disk full: nothing launched; tried again when the store takes it
                self._seen = None
                break
            with st.cv:
                launched = self._apply(picks, now)
            batch.add(len(launched))
            by_worker: dict[str, list[tuple[JobState, Attempt]]] = {}
            for job, att in launched:                 # one call per worker for its one-server attempts
                ws = att.workers
                if len(ws) == 1:
                    by_worker.setdefault(ws[0], []).append((job, att))
                else:
                    self.pool.submit(self._send, job, att, batch)
            for items in by_worker.values():
                for i in range(0, len(items), MAX_BATCH):
                    self.pool.submit(self._send_many, items[i:i + MAX_BATCH], batch)
            for job, att in launched[:max(0, LOG_EACH - batch.logged)]:
                log.info("job %d attempt %d launched on %s", job.job_id, att.attempt,
                         placement_label(att.worker_type, att.placement), extra={"jobs": [job.job_id]})
            batch.logged += len(launched)
            if len(picks) < CHUNK:
                break
        if batch is not None:
            if batch.logged > LOG_EACH:
                log.info("%d more attempts launched in round %d (each has its launch event in the state)",
                         batch.logged - LOG_EACH, batch.round_no)
            batch.close()

    # ----- 1. pick ------------------------------------------------------------------------------
    def _pick(self, now: float, limit: int) -> list[Pick]:
        """Planned jobs with no live attempt whose GPUs are free and workers alive (lock held)."""
        ex, st = self.ex, self.state
        self._timer = math.inf
        if ex.round_end is None or now >= ex.round_end:
            return []
        out: list[Pick] = []
        taken: dict[tuple[str, int], set[int]] = {}
        for m, a in ex.current.items():
            job = st.jobs.get(m)
            if job is None or job.status in FINISHED or job.live is not None or job.blocked_round == st.round_no:
                continue
            if now < job.retry_at:           # a failed attempt: the next round, and its backoff
                self._timer = min(self._timer, job.retry_at)
                continue
            if job.fenced(now):              # a written-off attempt may still run: not beside it
                self._timer = min(self._timer, job.fence.until)
                continue
            allowed = {a.partner} if a.partner is not None else set()
            if any(not ex.alive(w) for w, _ in a.placement) or st.index.taken(a.placement, allowed) or any(
                    not taken.get(p, set()) <= allowed for p in a.placement):
                continue
            if ex.round_end - now < 0.25 * ex.L and not ex.keeps(m, a):
                continue                     # not worth a start-up for a sliver of a round
            out.append(Pick(job, a, job.attempts + 1))
            for p in a.placement:
                taken.setdefault(p, set()).add(m)
            if len(out) >= limit:
                break
        return out

    # ----- 2. record ----------------------------------------------------------------------------
    @staticmethod
    def _row(p: Pick, now: float) -> tuple:
        job, a = p.job, p.a
        return (job.job_id, p.attempt, [list(g) for g in a.placement], a.worker_type, now, job.steps_done, a.partner)

    # ----- 3. apply -----------------------------------------------------------------------------
    def _apply(self, picks: list[Pick], now: float) -> list[tuple[JobState, Attempt]]:
        """The recorded launches go live, those still possible (lock held); the others are written off."""
        ex, st = self.ex, self.state
        out, gone = [], []
        for p in picks:
            job, a = p.job, p.a
            job.attempts = max(job.attempts, p.attempt)
            allowed = {a.partner} if a.partner is not None else set()
            why = "its job ended" if job.status in FINISHED else "another attempt runs" if job.live is not None \
                else "a worker of it is gone" if any(not ex.alive(w) for w, _ in a.placement) \
                else "its GPUs were taken" if st.index.taken(a.placement, allowed) else ""
            if why:
                gone.append((p, why))
                continue
            att = Attempt(job.job_id, p.attempt, list(a.placement), a.worker_type, a.consolidated, now, ex.round_end,
                          job.steps_done, partner=a.partner)
            job.live = att
            if job.first_start is None:
                job.first_start = now
                if st.book.on_start is not None:
                    st.book.on_start(job)
            st.attempt_started(att)
            job.status = "running"
            st.stats["launches"] += 1
            if job.spec.adaptive is not None:
                try:
                    note_launch(st.store, job, a.worker_type, len(a.placement), st.round_no)
                except StoreError:
                    pass                      # a resize count; the launch itself is recorded
            out.append((job, att))
        if gone:
            self._write_off(gone, now)
        return out

    def _write_off(self, gone: list[tuple[Pick, str]], now: float) -> None:
        """Recorded launches that will not be sent: ended as lost at once (lock held)."""
        st = self.state
        try:
            with st.store.transaction():
                for p, why in gone:
                    job = p.job
                    st.store.end_attempt(job.job_id, p.attempt, "lost", now, job.steps_done)
                    st.store.event("lost", job_id=job.job_id, attempt=p.attempt, reason=f"not started: {why}",
                                   steps=job.steps_done)
                    cols = {} if job.status in FINISHED else {"status": job.status}
                    if job.first_start is None:
                        cols["first_start"] = None
                    if cols:
                        st.store.update_job(job.job_id, **cols)
        except StoreError:
            pass                              # a restart finds them running, and loses them unclaimed
        for p, why in gone:
            log.info("job %d attempt %d not started: %s", p.job.job_id, p.attempt, why, extra={"jobs": [p.job.job_id]})

    # ----- sending ------------------------------------------------------------------------------
    def _send(self, job: JobState, att: Attempt, batch: Batch) -> None:
        """RunJob to each worker of the attempt, ranks in order (a sender thread)."""
        ok = False
        try:
            ok = self.ex.run_job(job, att)
        except Exception:                     # a sender must not die silently
            log.exception("RunJob job %d attempt %d", job.job_id, att.attempt)
        finally:
            batch.answered_one(ok)

    def _send_many(self, items: list[tuple[JobState, Attempt]], batch: Batch) -> None:
        """RunJobs to one worker for several one-server attempts (a sender thread): at a round's boundary one
        call per attempt made thousands at once at 10,000 GPUs (issue 42)."""
        oks = [False] * len(items)
        try:
            oks = self._run_jobs(items)
        except Exception:                     # a sender must not die silently
            log.exception("RunJobs jobs %s", [job.job_id for job, _ in items])
        finally:
            for ok in oks:
                batch.answered_one(ok)

    def _run_jobs(self, items: list[tuple[JobState, Attempt]]) -> list[bool]:
        """Each item launched (True) or failed and handled as a refused RunJob would be. A worker without
        RunJobs (UNIMPLEMENTED: an earlier version) is sent RunJob one by one from then on."""
        ex = self.ex
        w = self.state.workers.get(items[0][1].workers[0])
        if len(items) == 1 or w is None or w.address in self._single:
            return [ex.run_job(job, att) for job, att in items]      # (run_job builds its own requests)
        reqs = [ex.run_requests(job, att)[0][1] for job, att in items]
        try:
            reply = w.stub.RunJobs(pb.RunJobsRequest(jobs=reqs), timeout=RPC_TIMEOUT)
        except grpc.RpcError as exc:
            if exc.code() == grpc.StatusCode.UNIMPLEMENTED:
                self._single.add(w.address)
                return [ex.run_job(job, att) for job, att in items]
            lost = exc.code() in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED)
            for job, att in items[:1] if lost else items:    # lost: the worker is written off with all of them
                ex.launch_failed(w, job, att, exc)
            return [False] * len(items)
        refused = list(reply.refused)[:len(items)]
        refused += [""] * (len(items) - len(refused))
        for (job, att), why in zip(items, refused):
            if why:
                ex.launch_failed(w, job, att, Refused(why))
        return [not why for why in refused]

    def _kill(self, k: Kill) -> None:
        if k.worker.stub is None:             # a worker registered without a link (tests)
            return
        try:
            k.worker.stub.KillJob(pb.KillJobRequest(job_id=k.job_id, attempt=k.attempt), timeout=RPC_TIMEOUT)
        except grpc.RpcError as exc:
            log.info("KillJob job %d on %s: %s", k.job_id, k.worker.worker_id, exc.code())

    def batch_done(self, batch: Batch) -> None:
        seconds = time.monotonic() - batch.start
        if self.on_batch is not None:
            self.on_batch(seconds)
        try:
            self.state.store.event("launched", round_no=batch.round_no, launches=batch.sent, failed=batch.failed,
                                   seconds=round(seconds, 3), end=time.time())
        except StoreError:
            pass

    def kill(self, kills: list[Kill]) -> None:
        for k in kills:
            self.pool.submit(self._kill, k)
