"""Jobs and their attempts: what the scheduler knows of each job, and how an attempt ends.

An attempt is one launch of a job on a placement (the executor starts it); it lives until
every worker of it reported its end, or until it is lost (its worker died, nobody claimed
it after a restart). `JobBook` keeps that lifecycle and its record in the Store; it is
called with ClusterState's lock held and wakes the lock's waiters when a job changes.

A lost attempt may still run (a frozen or partitioned worker), so losing it fences the
job: no relaunch until every worker of it confirmed it gone (a DoneReport, or a
registration or heartbeat without it) or its lease plus grace ran out, by when the worker
kills it and the iterator commits nothing more. Two attempts never train side by side.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

from ..protocol.jobspec import JobSpec
from .live import LiveIndex
from .store import Store, StoreError, acting

log = logging.getLogger(__name__)
FINISHED = ("done", "cancelled", "failed")
# an attempt that ends like these failed, whatever its exit status: it never started (working_dir
# missing, command not found), or it exited without GavelIterator's end-of-run report (a script that
# does not iterate one, or one that returned before its first step)
FAILED_STARTS = ("launch-failed", "no-result")
BACKOFF_S, BACKOFF_MAX_S = 2.0, 120.0     # after the f-th failure in a row: no relaunch for 2 s x 2^(f-1), <= 2 min
MAX_DETAIL = 500                          # characters of a failure's description kept
LOG_EACH = 20                             # preemptions of a round logged one by one (the rest: one line)
# the recorded statuses of an attempt that a late report may still end: written off (and its other workers' late
# reports after the first), or recorded as started but not live here (a restart before it was claimed)
WRITTEN_OFF = ("lost", "late", "running")


@dataclass(frozen=True)
class AttemptRef:
    job_id: int
    attempt: int


@dataclass(frozen=True)
class DoneReport:
    """How one worker's share of an attempt ended."""

    worker_id: str
    job_id: int
    attempt: int
    exit_code: int = 0
    done: bool = False                   # the job reached its steps
    steps: int = 0                       # the job's progress (its last checkpoint's step)
    steps_run: int = 0                   # steps this attempt ran
    compute_seconds: float = 0.0         # ... in this much training time
    wall_seconds: float = 0.0
    reason: str = ""                     # exited | launch-failed | no-result | killed | killed-lease
    detail: str = ""                     # what went wrong, for people (the worker's words, clipped)

    @property
    def failed(self) -> bool:
        """The attempt failed on this worker: a crash (exit status not 0), or it never really ran."""
        return self.reason in FAILED_STARTS or (self.exit_code != 0 and self.reason == "exited")


@dataclass
class Attempt:
    """One launch of a job on a placement; lives until every worker of it reported its end."""

    job_id: int
    attempt: int
    placement: list[tuple[str, int]]     # (worker id, local GPU) per rank
    worker_type: str
    consolidated: bool
    launched: float
    lease_end: float
    steps_start: int
    partner: int | None = None           # the job planned to share these GPUs
    reports: dict[str, DoneReport] = field(default_factory=dict)
    renewals: int = 0
    restored: bool = False               # loaded from the store after a restart
    started: bool = False                # InitJob heard: from now on the job asks for its renewals
    measured_steps: int = 0              # progress already folded into the throughput table
    measured_seconds: float = 0.0
    sharing: int | None = None           # who shared the GPUs since the last measurement (None: alone)
    mixed: bool = False                  # ... or that changed meanwhile: the interval measures nothing
    counted: float = 0.0                 # its GPU-seconds are counted up to here (lost, then reclaimed)
    renewing: bool = False               # a renewal of its lease is being recorded (runtime.executor)

    @property
    def workers(self) -> list[str]:
        return list(dict.fromkeys(w for w, _ in self.placement))


@dataclass
class Fence:
    """A written-off attempt that may still run: the job waits for `workers` to confirm or `until`."""

    attempt: int
    workers: set[str]
    until: float                        # time.time(): lease end + grace
    lost: Attempt | None = None         # the attempt written off: its worker may still claim it (reclaim)


@dataclass
class JobState:
    job_id: int
    spec: JobSpec
    submitted: float
    steps_done: int = 0
    steps_live: int = 0
    finished: float | None = None
    attempts: int = 0
    failures: int = 0
    renewals: int = 0
    admitted: bool = False
    blocked_round: int = -1             # a failed attempt waits for the next round
    report: object | None = None        # adaptive jobs: the last AdaptiveReport (runtime.adaptive)
    resizes: int = 0                    # adaptive jobs: launches on another (worker type, GPUs) than the last
    last_config: tuple[str, int] | None = None
    reason: str = ""                    # while queued: why it waits, as last decided and stored (runtime.waiting)
    waits_for_round: bool = False       # ... a reason a later round may end (status adds when it starts)
    first_start: float | None = None    # the paper's metrics: first launch (queueing delay = it - submitted)
    preemptions: int = 0                # attempts that stopped short of the job's end without failing
    gpu_seconds: dict[str, float] = field(default_factory=dict)   # GPU-seconds of its ended attempts, by type
    error: str = ""                     # why its last attempt failed ("" once one ran without failing)
    retry_at: float = 0.0               # after a failure: no relaunch before this (time.time(), backoff)
    actor: str = ""                     # who submitted it (admin, user:NAME): a user's job runs as that user
    # `status` (queued, running or one of FINISHED), `live` (the attempt running now) and `fence` (a lost
    # attempt not yet known dead: no relaunch meanwhile) are properties: setting one keeps the book's
    # LiveIndex (runtime.live) current
    _status: str = field(default="queued", init=False, repr=False)
    _live: Attempt | None = field(default=None, init=False, repr=False)
    _fence: Fence | None = field(default=None, init=False, repr=False)
    index: LiveIndex | None = field(default=None, init=False, repr=False, compare=False)

    @property
    def status(self) -> str:
        return self._status

    @status.setter
    def status(self, status: str) -> None:
        if self.index is not None and status != self._status:
            self.index.status_changed(self.job_id, self._status, status, status in FINISHED)
        self._status = status

    @property
    def live(self) -> Attempt | None:
        return self._live

    @live.setter
    def live(self, att: Attempt | None) -> None:
        if self.index is not None and att is not self._live:
            self.index.live_changed(self.job_id, self._live, att)
        self._live = att

    @property
    def fence(self) -> Fence | None:
        return self._fence

    @fence.setter
    def fence(self, fence: Fence | None) -> None:
        if self.index is not None and fence is not self._fence:
            self.index.fence_changed(self.job_id, self._fence, fence)
        self._fence = fence

    def fenced(self, now: float) -> bool:
        if self.fence is not None and (not self.fence.workers or now >= self.fence.until):
            self.fence = None
        return self.fence is not None

    @property
    def key(self) -> tuple[str, int]:
        return self.spec.job_type, self.spec.scale_factor


class Measuring(Protocol):
    """What the job book tells the measurement bookkeeping (runtime.measurements)."""

    def add_job(self, job: JobState) -> None: ...
    def remove_job(self, job: JobState) -> None: ...
    def measure(self, job: JobState, att: Attempt, steps_run: int, seconds: float) -> None: ...
    def attempt_started(self, att: Attempt) -> None: ...
    def attempt_gone(self, att: Attempt) -> None: ...


class JobBook:
    def __init__(self, jobs: dict[int, JobState], store: Store, cv: threading.Condition, measurements: Measuring,
                 max_failures: int, worker_alive: Callable[[str], bool], current_round: Callable[[], int],
                 grace: float = 0.0, index: LiveIndex | None = None):
        self.jobs = jobs
        self.index = index if index is not None else LiveIndex()   # live attempts and fences by worker and GPU
        self.grace = grace                   # workers kill a job this long after its lease ended
        self.store = store
        self.cv = cv
        self.measurements = measurements
        self.max_failures = max_failures
        self.worker_alive = worker_alive
        self.current_round = current_round
        self.finished: list[int] = []        # drained by the executor each round
        self.tally: Counter = Counter()      # since start: preempted, crashed, lost, failed (metrics)
        self.on_done: Callable[[JobState], None] | None = None     # metrics: a job finished its steps
        self.gpu_seconds_total: Counter = Counter()               # GPU-seconds of every ended attempt, by type
        self.on_start: Callable[[JobState], None] | None = None    # metrics: a job's first attempt launched
        self._preempted = (-1, 0)            # (round, its preemptions so far): the first LOG_EACH are logged

    # ----- restore ------------------------------------------------------------------------
    def restore_jobs(self) -> None:
        for row in self.store.load_jobs():
            status = row.status if row.status in FINISHED else "queued"
            self.gpu_seconds_total.update(row.gpu_seconds)
            job = JobState(row.job_id, row.spec, row.submitted, row.steps_done, max(row.steps_live, row.steps_done),
                           row.finished, row.attempts, row.failures, row.renewals, reason=row.reason,
                           first_start=row.first_start, preemptions=row.preemptions,
                           gpu_seconds=dict(row.gpu_seconds), error=row.error, actor=row.actor)
            job.status = status
            self._track(job)

    def restore_attempts(self) -> None:
        """Attempts the store says still run: live again until their workers claim them (or not)."""
        now = time.time()
        for a in self.store.running_attempts():
            job = self.jobs.get(a.job_id)
            if job is None or job.status in FINISHED:
                self.store.end_attempt(a.job_id, a.attempt, "lost", now)
                continue
            job.live = Attempt(a.job_id, a.attempt, a.placement, a.worker_type, True, a.launched, now,
                               job.steps_done, restored=True, mixed=True)
            job.status = "running"

    # ----- jobs ---------------------------------------------------------------------------
    def add(self, specs: list[JobSpec], now: float, key: str = "", digest: str = "") -> list[int]:
        """Jobs, submit events and idempotency key are stored in one transaction (Store.add_jobs)."""
        ids = self.store.add_jobs(specs, now, key, digest)
        self.add_stored(ids, specs, now)
        return ids

    def add_stored(self, ids: list[int], specs: list[JobSpec], now: float) -> None:
        """Jobs the store already holds (Store.add_jobs) join the book, submitted by the caller (`acting`)."""
        actor = acting()
        for i, spec in zip(ids, specs):
            self._track(JobState(i, spec, now, actor=actor))
            self.measurements.add_job(self.jobs[i])

    def _track(self, job: JobState) -> None:
        """A job joins the book and its index (which counts it by status from now on)."""
        self.jobs[job.job_id] = job
        job.index = self.index
        self.index.status_changed(job.job_id, None, job.status, job.status in FINISHED)

    def finish(self, job: JobState, status: str, steps_done: int | None = None) -> None:
        """Recorded first (StoreError: nothing changed), then `job` ends with `status`."""
        steps = job.steps_done if steps_done is None else steps_done
        now = time.time()
        with self.store.transaction():
            self._record_finish(job, status, steps, now)
        self._apply_finish(job, status, steps, now)

    def _record_finish(self, job: JobState, status: str, steps: int, now: float, error: str = "") -> None:
        live = max(job.steps_live, steps)     # a cancel keeps the progress last reported (991/5000 stays)
        self.store.update_job(job.job_id, status=status, finished=now, steps_done=steps, steps_live=live)
        self.store.event(status if status != "done" else "finish", job_id=job.job_id, steps=steps, steps_live=live,
                         **({"error": error} if error else {}))

    def _apply_finish(self, job: JobState, status: str, steps: int, now: float) -> None:
        job.status, job.finished, job.steps_done = status, now, steps
        job.steps_live = max(job.steps_live, steps)
        if status == "failed":
            self.tally["failed"] += 1
        elif status == "done" and self.on_done is not None:
            self.on_done(job)
        checkpoint = f" (last checkpoint at step {steps})" if job.steps_live > steps else ""
        why = f": {job.error}" if status == "failed" and job.error else ""
        log.info("job %d %s at step %d of %d%s%s", job.job_id, "finished" if status == "done" else status,
                 job.steps_live, job.spec.steps, checkpoint, why, extra={"jobs": [job.job_id]})
        self.measurements.remove_job(job)
        self.finished.append(job.job_id)
        self.index.touch()
        self.cv.notify_all()

    def drain_finished(self) -> list[int]:
        out, self.finished = self.finished, []
        return out

    # ----- attempt ends ---------------------------------------------------------------------
    def report(self, rep: DoneReport) -> None:
        job = self.jobs.get(rep.job_id)
        if job is None:
            return
        att = job.live
        if att is None or att.attempt != rep.attempt:
            self._stale_report(job, rep)
            return
        att.reports[rep.worker_id] = rep
        pending = [x for x in att.workers if x not in att.reports and self.worker_alive(x)]
        if not pending:
            self._end_attempt(job, att)

    def _stale_report(self, job: JobState, rep: DoneReport) -> None:
        """An attempt already written off (worker declared lost, scheduler restarted): keep its progress. An
        attempt that ended with its reports is left as they recorded it: a report sent again (the worker's call
        ran past its deadline after the scheduler took it) rewrote its end as `late`."""
        if self.store.attempt_status(rep.job_id, rep.attempt) not in WRITTEN_OFF:
            self.confirm_gone(job, rep.attempt, rep.worker_id)
            return
        steps = max(int(rep.steps), job.steps_done)
        with self.store.transaction():
            self.store.update_job(job.job_id, steps_done=steps)
            self.store.end_attempt(rep.job_id, rep.attempt, "late", time.time(), rep.steps, rep.steps_run,
                                   rep.compute_seconds, rep.wall_seconds)
        job.steps_done = steps
        self.confirm_gone(job, rep.attempt, rep.worker_id)
        if rep.done and steps >= job.spec.steps and job.status not in FINISHED and job.live is None:
            self.finish(job, "done")

    def _end_attempt(self, job: JobState, att: Attempt) -> None:
        """Recorded in one transaction first; a StoreError leaves the attempt live, and the
        worker, told UNAVAILABLE, sends its report again."""
        reps = list(att.reports.values())
        steps = max([int(r.steps) for r in reps] + [job.steps_done])
        done = any(r.done for r in reps) and steps >= job.spec.steps
        crashed = any(r.failed for r in reps)
        lead = max(reps, key=lambda r: r.steps_run) if reps else None
        status = "crashed" if crashed else "done" if done else "ended"
        round_no = self.current_round()
        was_finished = job.status in FINISHED
        failures, ends = job.failures, None
        error = _failure(att, reps) if crashed else ""
        if not was_finished and done:
            ends = "done"
        elif not was_finished and crashed:
            failures += 1
            ends = "failed" if failures >= self.max_failures else None
        elif not was_finished:
            failures = 0
        now = time.time()
        held = self._held_after(job, att, now)
        preempted = not was_finished and not done and not crashed
        with self.store.transaction():
            self.store.end_attempt(job.job_id, att.attempt, status, now, steps,
                                   int(lead.steps_run) if lead else None,
                                   float(lead.compute_seconds) if lead else None,
                                   max((r.wall_seconds for r in reps), default=None), att.renewals)
            self.store.event("end", job_id=job.job_id, attempt=att.attempt, status=status, steps=steps,
                             reason=",".join(sorted({r.reason for r in reps})), round=round_no,
                             exit_codes=[int(r.exit_code) for r in reps],
                             steps_run=int(lead.steps_run) if lead else 0,
                             compute_seconds=float(lead.compute_seconds) if lead else 0.0,
                             wall_seconds=max((r.wall_seconds for r in reps), default=0.0),
                             gpu_seconds=round(held[att.worker_type] - job.gpu_seconds.get(att.worker_type, 0.0), 3),
                             **({"error": error} if error else {}))
            self.store.update_job(job.job_id, status=job.status if was_finished else "queued", steps_done=steps,
                                  failures=failures, gpu_seconds=json.dumps(held),
                                  preemptions=job.preemptions + preempted, error=error)
            if ends is not None:
                self._record_finish(job, ends, steps, now, error)
        if lead is not None and not crashed:
            try:
                self.measurements.measure(job, att, int(lead.steps_run), float(lead.compute_seconds))
            except StoreError:
                pass                                  # one measurement lost; the store said why
        self.gpu_seconds_total[att.worker_type] += held[att.worker_type] - job.gpu_seconds.get(att.worker_type, 0.0)
        job.gpu_seconds, job.preemptions = held, job.preemptions + preempted
        job.error = error if crashed else ""
        self._say_end(job, att, reps, steps, crashed and not was_finished, failures, preempted, error)
        if ends is not None:
            self._apply_finish(job, ends, steps, now)
        job.steps_done = steps
        job.steps_live = max(job.steps_live, steps)
        self.measurements.attempt_gone(att)
        job.live = None
        job.failures = failures
        if crashed and not was_finished and not done:
            job.blocked_round = round_no
            job.retry_at = now + min(BACKOFF_S * 2 ** (failures - 1), BACKOFF_MAX_S)
        if job.status not in FINISHED:
            job.status = "queued"
        self.cv.notify_all()

    @staticmethod
    def _held_after(job: JobState, att: Attempt, now: float) -> dict[str, float]:
        """The job's GPU-seconds by type once `att` (launched to now, on its GPUs) is added."""
        out = dict(job.gpu_seconds)
        since = max(att.launched, att.counted)
        out[att.worker_type] = round(out.get(att.worker_type, 0.0) + max(now - since, 0.0) * len(att.placement), 3)
        return out

    def _say_end(self, job: JobState, att: Attempt, reps: list[DoneReport], steps: int, crashed: bool,
                 failures: int, unfinished: bool, error: str = "") -> None:
        """One line and one count for an attempt that crashed, or stopped short of the job's end
        (at its lease end without a renewal, or killed): a preemption."""
        if crashed:
            self.tally["crashed"] += 1
            log.info("job %d attempt %d failed (%d of %d allowed failures): %s", job.job_id, att.attempt,
                     failures, self.max_failures, error, extra={"jobs": [job.job_id]})
        elif unfinished:
            self.tally["preempted"] += 1
            if self._count_preemption():
                log.info("job %d attempt %d preempted at step %d (%s)", job.job_id, att.attempt, steps,
                         ",".join(sorted({r.reason for r in reps})) or "no report", extra={"jobs": [job.job_id]})

    def _count_preemption(self) -> bool:
        """Whether this preemption gets its own line: the first LOG_EACH of a round do, the others are counted
        in one line once the next round preempts (at 10,000 GPUs a round ends thousands of attempts, and each
        line was written under the state's lock; each has its `end` event in the state)."""
        round_no, n = self.current_round(), 0
        said, count = self._preempted
        if said == round_no:
            n = count
        elif count > LOG_EACH:
            log.info("%d more attempts preempted in round %d (each has its end event in the state)",
                     count - LOG_EACH, said)
        self._preempted = (round_no, n + 1)
        return n < LOG_EACH

    def lose(self, att: Attempt, reason: str) -> None:
        """The attempt is gone without its reports (worker lost, nobody claimed it after a restart)."""
        job = self.jobs[att.job_id]
        fence = Fence(att.attempt, set(att.workers) - set(att.reports), att.lease_end + self.grace, att)
        now = time.time()
        held = self._held_after(job, att, now)
        with self.store.transaction():          # recorded first: StoreError leaves the attempt live
            self.store.end_attempt(att.job_id, att.attempt, "lost", now, job.steps_done)
            self.store.event("lost", job_id=att.job_id, attempt=att.attempt, reason=reason, steps=job.steps_done,
                             fenced_until=fence.until)
            self.store.update_job(att.job_id, gpu_seconds=json.dumps(held))
        self.gpu_seconds_total[att.worker_type] += held[att.worker_type] - job.gpu_seconds.get(att.worker_type, 0.0)
        job.gpu_seconds = held
        att.counted = now
        self.measurements.attempt_gone(att)
        self.tally["lost"] += 1
        log.info("job %d attempt %d lost: %s", att.job_id, att.attempt, reason, extra={"jobs": [att.job_id]})
        job.live = None
        job.fence = fence
        if job.status not in FINISHED:
            job.status = "queued"
        self.cv.notify_all()

    def confirm_gone(self, job: JobState, attempt: int, worker_id: str) -> None:
        """A worker says a written-off attempt no longer runs there: lift the fence once all did."""
        f = job.fence
        if f is None or f.attempt != attempt or worker_id not in f.workers:
            return
        f.workers.discard(worker_id)
        self.index.fence_confirmed(job.job_id, worker_id)
        if not f.workers:
            job.fence = None
            self.store.event("unfenced", job_id=job.job_id, attempt=attempt, worker_id=worker_id)
            self.cv.notify_all()

    def reclaim(self, job: JobState, worker_id: str, attempt: int, now: float) -> bool:
        """A worker declared dead comes back still running an attempt that was written off with it: the
        attempt is live again if nothing took its place, i.e. its fence still holds (so the job was not
        relaunched), it ran on that worker alone, its job is unfinished, and no other attempt took its
        GPUs meanwhile. Recorded first (StoreError: it stays lost). False: it stays lost."""
        f = job.fence
        att = f.lost if f is not None else None
        if att is None or f.attempt != attempt or job.live is not None or job.status in FINISHED \
                or now >= f.until or att.workers != [worker_id] or att.reports:
            return False
        if self.index.taken(att.placement, {att.partner} if att.partner is not None else set()):
            return False
        with self.store.transaction():
            self.store.reopen_attempt(job.job_id, attempt)
            self.store.update_job(job.job_id, status="running")
            self.store.event("reclaimed", job_id=job.job_id, attempt=attempt, worker_id=worker_id)
        job.fence = None
        job.live = att
        job.status = "running"
        self.measurements.attempt_started(att)
        self.tally["reclaimed"] += 1
        log.info("job %d attempt %d reclaimed: worker %s still runs it after it was declared dead",
                 job.job_id, attempt, worker_id, extra={"jobs": [job.job_id]})
        self.cv.notify_all()
        return True


def _failure(att: Attempt, reps: list[DoneReport]) -> str:
    """One line on why an attempt failed: the first failed rank's worker and its words."""
    r = next(r for r in reps if r.failed)
    what = r.detail or (f"exit status {r.exit_code}" if r.exit_code else
                        "exited without GavelIterator's report" if r.reason == "no-result" else r.reason)
    text = f"attempt {att.attempt} on {r.worker_id}: {what}"
    return text if len(text) <= MAX_DETAIL else text[:MAX_DETAIL - 3] + "..."
