"""The scheduler's view of the cluster: one lock over workers, jobs and measurements.

ClusterState holds the lock and the round counters, and composes three concerns:

- `WorkerRegistry` (workers.py): registered workers, liveness, capacity and topology;
- `JobBook` (jobs.py): jobs and their attempts, from submission to the end of each attempt;
- `Measurements` (measurements.py): what runs measured, and the throughputs the policy sees.

It does what crosses them: a worker that registers, heartbeats or dies changes the
attempts it runs. All mutation happens under `lock` (an RLock shared with `cv`), from
gRPC handler threads and the round loop. Every decision that must survive a restart is
written to the Store before the lock is released. Calls to workers (RunJob, KillJob) are
never made under the lock: methods here return what to send (`Kill`) and the caller sends
it. Nothing here speaks protobuf: the service translates.
"""

from __future__ import annotations

import logging
import math
import threading
import time
from collections.abc import Callable
from contextlib import contextmanager
from dataclasses import dataclass, field, replace

import numpy as np

from ..allocator import PolicyJobs
from ..estimator import ThroughputEstimator
from ..pairs import PairTable
from ..protocol.jobspec import JobSpec
from ..rules.model import entities_of
from ..topology import Topology
from .adaptive import AdaptiveReport, record_report, restore_adaptive
from .config import ClusterConfig
from .heartbeats import HeartbeatAnswer, WorkerRow, quick_answer
from .jobs import FINISHED, Attempt, AttemptRef, DoneReport, JobBook, JobState
from .live import LiveIndex
from .liveness import Stalls
from .measured import MeasuredTable
from .measurements import MeasuredThroughputs, Measurements
from .store import Store, StoreError
from .workers import Kill, WorkerRegistry, WorkerState

log = logging.getLogger(__name__)
ADD_CHUNK = 250          # submitted jobs joining the state per hold of its lock
CHECK_EVERY = 0.2        # seconds between looks for workers that missed their heartbeats


@dataclass(frozen=True)
class Registration:
    """A worker (re)joining: what it is, what it still runs, the ends it could not report yet."""

    worker_id: str
    address: str
    gpu_type: str
    gpus: int
    running: list[AttemptRef] = field(default_factory=list)
    pending: list[DoneReport] = field(default_factory=list)
    labels: frozenset = frozenset()
    call_token: str = ""            # what the scheduler presents to the worker's own service


class ClusterState:
    def __init__(self, config: ClusterConfig, store: Store, table: MeasuredTable, secret: str,
                 estimator: ThroughputEstimator | None = None):
        self.config = config
        self.store = store
        self.table = table
        self.secret = secret
        self.worker_types = list(config.worker_types)
        self.lock = threading.RLock()
        self.cv = threading.Condition(self.lock)
        self.registry = WorkerRegistry(self.worker_types, store)
        self.workers: dict[str, WorkerState] = self.registry.workers
        self.jobs: dict[int, JobState] = {}
        self.index = LiveIndex()                # live attempts and fences by worker and GPU (runtime.live)
        self.throughputs = MeasuredThroughputs(table, estimator)
        self.measurements = Measurements(self.jobs, self.throughputs, store, self.index)
        self.book = JobBook(self.jobs, store, self.cv, self.measurements, config.max_failures,
                            self.registry.is_alive, lambda: self.round_no, config.grace, self.index)
        # the scheduler's own stalls, which liveness does not blame on workers (runtime.liveness)
        self.stalls = Stalls(min(1.0, config.worker_timeout / 4))
        self._swept = self._checked = -math.inf   # time.monotonic() of check_workers' last sweep and look
        self.allocation: tuple[list[tuple[int, ...]], np.ndarray] = ([], np.zeros((0, len(self.worker_types))))
        self.decision: list[tuple[int, str, int]] | None = None   # a round policy's: (job, type, GPUs) this round
        self.started = time.monotonic()
        self.round_no = int(store.get_meta("round", "0"))
        self.stats = {k: int(store.get_meta(k, "0")) for k in ("renewals", "launches")}
        self.wake = False                       # something the idle loop should react to
        self.arrivals: list[int] = []           # jobs submitted since the last plan admitted jobs (runtime.backfill)

    @property
    def topology_version(self) -> int:
        return self.registry.version

    # ----- restore ------------------------------------------------------------------------
    def restore(self) -> None:
        """Jobs, measurements and still-running attempts from the store (after a restart)."""
        self.book.restore_jobs()
        restore_adaptive(self.store, self.jobs)
        self.measurements.restore()
        self.book.restore_attempts()
        if self.jobs:
            live = sum(j.live is not None for j in self.jobs.values())
            self.store.event("restart", jobs=len(self.jobs), live=live)
            log.info("restored %d jobs (%d attempts still out) from %s", len(self.jobs), live, self.store.path)

    # ----- jobs ---------------------------------------------------------------------------
    def submit(self, specs: list[JobSpec], key: str = "", digest: str = "",
               admit: Callable[[list[int], list[JobSpec]], None] | None = None) -> list[int]:
        """Stored first, in one transaction and without the lock (10,000 jobs hold no heartbeat up); then the
        jobs join, ADD_CHUNK at a time under the lock, each chunk with `admit(ids, specs)` (admission).
        Callers make one submission at a time (SchedulerService.submitting)."""
        now = time.time()
        ids = self.store.add_jobs(specs, now, key, digest)
        for i in range(0, len(ids), ADD_CHUNK):
            with self.lock:
                self.book.add_stored(ids[i:i + ADD_CHUNK], specs[i:i + ADD_CHUNK], now)
                if admit is not None:
                    admit(ids[i:i + ADD_CHUNK], specs[i:i + ADD_CHUNK])
                self.arrivals.extend(ids[i:i + ADD_CHUNK])
                self.wake = True
                self.cv.notify_all()
        return ids

    def cancel(self, job_id: int) -> tuple[str, list[Kill]]:
        with self.lock:
            job = self.jobs.get(job_id)
            if job is None:
                raise KeyError(job_id)
            if job.status in FINISHED:
                return job.status, []
            kills = self._kills_for(job.live) if job.live else []
            self.book.finish(job, "cancelled")
            return "cancelled", kills

    def _kills_for(self, att: Attempt) -> list[Kill]:
        """Stop att on each of its live workers that did not report its end yet."""
        return [Kill(self.workers[wid], att.job_id, att.attempt) for wid in att.workers
                if self.registry.is_alive(wid) and wid not in att.reports]

    def report(self, rep: DoneReport) -> None:
        with self.lock:
            self.book.report(rep)

    def seen(self, worker_id: str) -> None:
        """A live worker's call arrived: it is alive now, whatever the call waits for next (the lock). A
        daemon sends its done reports one by one before its heartbeat, so a round's ends would otherwise
        delay the heartbeat past the timeout on a busy scheduler. Without the lock: one float's store."""
        w = self.workers.get(worker_id)
        if w is not None and w.alive:
            w.last_seen = time.monotonic()

    def _lose(self, att: Attempt, reason: str) -> None:
        self.book.lose(att, reason)

    def drain_finished(self) -> list[int]:
        with self.lock:
            return self.book.drain_finished()

    # ----- workers ------------------------------------------------------------------------
    def register(self, reg: Registration, make_stub) -> list[Kill]:
        """A worker (re)joins: remember it, take its pending reports, stop attempts nobody owns.
        `make_stub(address)` gives the (channel, stub) that reaches a new worker."""
        with self._heard():
            w = self.registry.join(reg.worker_id, reg.address, reg.gpu_type, reg.gpus, make_stub, reg.labels,
                                   reg.call_token)
            for rep in reg.pending:
                self.book.report(rep)
            kills = self._reconcile_running(w, reg.running, registering=True)
            self.wake = True
            self.cv.notify_all()
            return kills

    def heartbeat(self, worker_id: str, running: list[AttemptRef]) -> HeartbeatAnswer | None:
        """None when the worker is unknown or was declared dead: it must register again. Costs what the
        worker runs, not what the scheduler holds (runtime.live). The usual heartbeat, which changes nothing
        but its worker's `last_seen`, is answered without the lock (`_quick_heartbeat`)."""
        quick = self._quick_heartbeat(worker_id, running)
        if quick is not None:
            return quick
        self.seen(worker_id)
        with self._heard():
            w = self.registry.live(worker_id)
            if w is None:
                return None
            w.last_seen = time.monotonic()
            kills = self._reconcile_running(w, running, registering=False)
            now = time.time()
            leases = []
            for m in self.index.on_worker(worker_id):
                att = self.jobs[m].live
                if worker_id not in att.reports:
                    leases.append((AttemptRef(m, att.attempt), att.lease_end - now))
            return HeartbeatAnswer([AttemptRef(k.job_id, k.attempt) for k in kills], leases)

    def _quick_heartbeat(self, worker_id: str, running: list[AttemptRef]) -> HeartbeatAnswer | None:
        """The heartbeat of a live worker that runs only attempts live here and waits on no fence, answered
        without the lock (None: it needs the lock). It then changes nothing but `last_seen` (a float's store),
        so the locked path would answer the same: no kills, the same leases (runtime.heartbeats)."""
        row = self.worker_row(worker_id)
        answer = quick_answer(row, [(r.job_id, r.attempt) for r in running], time.time()) if row else None
        if answer is not None:
            self.seen(worker_id)
        return answer

    def worker_row(self, worker_id: str) -> WorkerRow | None:
        """What a heartbeat of this worker needs (runtime.heartbeats); None when unknown, or when read while
        changing. Without the lock, reads are of single dict and attribute lookups and a C-level copy of the
        worker's set (atomic under the GIL); a change made meanwhile (the worker declared dead, an attempt
        ended) is what the next heartbeat sees, as if this one had been answered just before it."""
        w = self.workers.get(worker_id)
        if w is None:
            return None
        try:
            held = sorted(self.index.by_worker.get(worker_id, ()))
        except RuntimeError:                    # changed while copied: take the lock
            return None
        attempts = []
        for m in held:
            job = self.jobs.get(m)
            att = job.live if job is not None else None
            if att is None:
                return None
            attempts.append((m, att.attempt, att.lease_end, worker_id in att.reports))
        return WorkerRow(w.alive, worker_id in self.index.fenced_on, w.call_token, tuple(attempts))

    def rows_mark(self) -> tuple:
        """Changes whenever most of what the workers' rows say does (an attempt or a fence, a worker joining or
        leaving, a lease renewed); a worker's report of a multi-server attempt, or a renewal's lease end that
        lands just after the mark was read, do not change it (runtime.front reads every row every FULL_EVERY)."""
        return self.index.version, self.registry.version, self.stats["renewals"]

    def worker_rows(self) -> dict[str, WorkerRow | None]:
        """Every registered worker's row (runtime.front keeps a copy), read as `worker_row` reads one: without
        the lock, which a hold for all 1,250 workers' rows made a round's reports and `status` wait for (up
        to 180 ms at a boundary). None for a row read while it changed."""
        return {wid: self.worker_row(wid) for wid in list(self.workers)}

    @contextmanager
    def _heard(self):
        """The lock, for a worker's call: how long it waited for it counts toward a stall (runtime.liveness)."""
        token = self.stalls.begin()
        with self.lock:
            self.stalls.end(token)
            yield

    def _reconcile_running(self, w: WorkerState, running, registering: bool) -> list[Kill]:
        """Attempts a worker runs that are not live here are strays (e.g. declared lost): stop them,
        unless a worker back from the dead still runs an attempt nothing replaced (JobBook.reclaim).
        On registration, live attempts the worker no longer runs (and did not report) are lost.
        A fenced attempt the worker does not list is confirmed gone there."""
        kills = []
        seen = {(ref.job_id, ref.attempt) for ref in running}
        now = time.time()
        for ref in running:
            job = self.jobs.get(ref.job_id)
            att = job.live if job is not None else None
            if att is None or att.attempt != ref.attempt or w.worker_id not in att.workers:
                if registering and att is None and job is not None and \
                        self.book.reclaim(job, w.worker_id, ref.attempt, now):
                    continue
                kills.append(Kill(w, ref.job_id, ref.attempt))
        if registering:
            for m in self.index.on_worker(w.worker_id):
                att = self.jobs[m].live
                if w.worker_id not in att.reports and (att.job_id, att.attempt) not in seen:
                    self.book.lose(att, f"worker {w.worker_id} does not run it")
        for m in self.index.fences_on(w.worker_id):
            job = self.jobs[m]
            if job.fence is not None and (m, job.fence.attempt) not in seen:
                self.book.confirm_gone(job, job.fence.attempt, w.worker_id)
        return kills

    def check_workers(self) -> list[Kill]:
        """Declare dead the workers that missed their heartbeats (not counting the scheduler's own
        stalls); their attempts are lost. Once a second: attempts left live on dead workers."""
        kills = []
        now = time.monotonic()
        if now - self._checked < CHECK_EVERY:
            return kills
        self._checked = now
        with self.lock:
            timeout = self.config.worker_timeout
            for w in self.registry.overdue(timeout, self.stalls.quiet_since()):
                kills += self.worker_lost(w, f"no heartbeat for {timeout:g}s")
            self._say_stalls()
            if now - self._swept < 1.0:
                return kills
            self._swept = now
            grace_over = now - self.started > 2 * timeout
            if grace_over:
                for m in list(self.index.restored):
                    att = self.jobs[m].live
                    if not any(self.registry.is_alive(x) for x in att.workers):
                        self.book.lose(att, "no worker claimed it after the restart")
            for wid in [x for x in self.index.by_worker if not self.registry.is_alive(x)]:
                for m in self.index.on_worker(wid):
                    att = self.jobs[m].live
                    if att is not None and not att.restored and wid not in att.reports:
                        self.book.lose(att, "its worker is gone")   # left live by a write that failed
        return kills

    def _say_stalls(self) -> None:
        """One line (and an event) per stall long enough to have cost workers their lives before (lock held)."""
        longest = self.stalls.take_longest()
        if longest < self.config.worker_timeout / 2:
            return
        live = sum(w.alive for w in self.workers.values())
        log.warning("the scheduler could not answer heartbeats for %.1fs (paused, starved of CPU or busy): "
                    "%d worker(s) get %gs from then on to be heard", longest, live, self.config.worker_timeout)
        try:
            self.store.event("stall", seconds=round(longest, 3), workers=live)
        except StoreError:
            pass

    def worker_lost(self, w: WorkerState, reason: str) -> list[Kill]:
        with self.lock:
            if not self.registry.leave(w, reason):
                return []
            kills = []
            for m in self.index.on_worker(w.worker_id):
                att = self.jobs[m].live
                kills += self._kills_for(att)     # the other workers of a spread job
                self.book.lose(att, f"worker {w.worker_id} lost")
            self.wake = True
            self.cv.notify_all()
            return [k for k in kills if k.worker is not w]

    # ----- progress and measurements ----------------------------------------------------------
    def progress(self, job: JobState, att: Attempt, steps: int, compute_seconds: float,
                 report: AdaptiveReport | None = None) -> None:
        """A live attempt's renewal request: its progress, and an adaptive job's report (lock held)."""
        self.measurements.progress(job, att, steps, compute_seconds)
        if report is not None and job.spec.adaptive is not None:
            record_report(self.store, job, replace(report, worker_type=att.worker_type))

    def attempt_started(self, att: Attempt) -> None:
        """Lock held, att already live (see Measurements.attempt_started)."""
        self.measurements.attempt_started(att)

    # ----- the policy's input ------------------------------------------------------------------
    def policy_jobs(self, jobs: list[int]) -> PolicyJobs:
        """The policy's data about the known ones of `jobs` (JobSource of gavel_ng.allocator; lock held)."""
        present = [m for m in jobs if m in self.jobs]
        specs = [self.jobs[m].spec for m in present]
        return PolicyJobs(present, np.array([s.scale_factor for s in specs], dtype=float),
                          np.array([s.weight for s in specs], dtype=float),
                          np.array([max(s.steps - self.jobs[m].steps_done, 0) for m, s in zip(present, specs)],
                                   dtype=float),
                          np.array([s.steps for s in specs], dtype=float),
                          np.array([self.jobs[m].submitted for m in present], dtype=float),
                          np.array([s.slo_s if s.slo_s is not None else math.inf for s in specs], dtype=float),
                          [s.rules for s in specs] if any(s.rules is not None for s in specs) else None,
                          entities_of(s.rules for s in specs))

    def believed_isolated(self, ids: list[int]) -> np.ndarray:
        """(jobs, worker types) steps/s the policy should believe (lock held)."""
        return self.throughputs.isolated(ids, self.worker_types)

    def allowed(self, ids: list[int]) -> np.ndarray:
        """(jobs, worker types) whether each job's rules let it run on each type (lock held): where not, the
        rates the policy and the arrivals' backfill see are 0."""
        types = list(self.worker_types)
        out = np.ones((len(ids), len(types)), bool)
        for i, m in enumerate(ids):
            rules = self.jobs[m].spec.rules
            if rules is not None:
                out[i] = rules.allows(types)
        return out

    def believed_pairs(self, ids: list[int], T: np.ndarray) -> PairTable:
        return self.throughputs.pair_table(ids, self.worker_types, T)

    # ----- topology ---------------------------------------------------------------------------
    def capacity(self) -> np.ndarray:
        with self.lock:
            return self.registry.capacity()

    def topology(self) -> tuple[Topology, list[tuple[str, int]], int]:
        """Live workers as servers, GPUs numbered type by type; gpu_map[g] = (worker id, local GPU).
        Built from a copy of the live workers: 10,000 GPUs are numbered without the lock."""
        with self.lock:
            live, version = self.registry.live_sorted(), self.registry.version
        topo, gpu_map, _ = self.registry.topology(live)
        return topo, gpu_map, version
