"""The scheduler's view of the cluster: workers, jobs, live attempts, and their bookkeeping.

All mutation happens under `lock` (an RLock shared with `cv`), from gRPC handler threads
and the round loop. Every decision that must survive a restart is written to the Store
before the lock is released. Calls to workers (RunJob, KillJob) are never made under the
lock: methods here return what to send and the caller sends it.
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass, field

import numpy as np

from ..estimator import ThroughputEstimator
from ..mechanism import Topology
from ..policies.packing import PairTable
from ..throughputs import UNCONSOLIDATED
from .measured import MeasuredTable
from .protos import gavel_pb2 as pb
from .rpc import Stub
from .spec import ClusterConfig, JobSpec
from .store import Store
from .view import ThroughputView

log = logging.getLogger(__name__)
FINISHED = ("done", "cancelled", "failed")
MIN_MEASURED_STEPS = 5


@dataclass
class WorkerState:
    worker_id: str
    address: str
    gpu_type: str
    gpus: int
    order: int                     # registration order: keeps the topology stable
    last_seen: float               # time.monotonic()
    alive: bool = True
    stub: Stub | None = None
    channel: object | None = None


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
    reports: dict[str, pb.DoneReport] = field(default_factory=dict)
    renewals: int = 0
    restored: bool = False               # loaded from the store after a restart
    measured_steps: int = 0              # progress already folded into the throughput table
    measured_seconds: float = 0.0
    sharing: int | None = None           # who shared the GPUs since the last measurement (None: alone)
    mixed: bool = False                  # ... or that changed meanwhile: the interval measures nothing

    @property
    def workers(self) -> list[str]:
        return list(dict.fromkeys(w for w, _ in self.placement))


@dataclass
class JobState:
    job_id: int
    spec: JobSpec
    submitted: float
    status: str = "queued"
    steps_done: int = 0
    steps_live: int = 0
    finished: float | None = None
    attempts: int = 0
    failures: int = 0
    renewals: int = 0
    live: Attempt | None = None
    admitted: bool = False
    blocked_round: int = -1             # a failed attempt waits for the next round

    @property
    def key(self) -> tuple[str, int]:
        return self.spec.job_type, self.spec.scale_factor


class ClusterState:
    def __init__(self, config: ClusterConfig, store: Store, table: MeasuredTable, secret: str,
                 estimator: ThroughputEstimator | None = None):
        self.config = config
        self.store = store
        self.table = table
        self.throughputs = ThroughputView(table, estimator)
        self.secret = secret
        self.worker_types = list(config.worker_types)
        self.lock = threading.RLock()
        self.cv = threading.Condition(self.lock)
        self.workers: dict[str, WorkerState] = {}
        self.jobs: dict[int, JobState] = {}
        self.finished_jobs: list[int] = []       # drained by the executor each round
        self.topology_version = 0
        self.allocation: tuple[list[tuple[int, ...]], np.ndarray] = ([], np.zeros((0, len(self.worker_types))))
        self.started = time.monotonic()
        self.round_no = int(store.get_meta("round", "0"))
        self.stats = {k: int(store.get_meta(k, "0")) for k in ("renewals", "launches")}
        self.wake = False                       # something the idle loop should react to

    # ----- restore ------------------------------------------------------------------------
    def restore(self) -> None:
        """Jobs, measurements and still-running attempts from the store (after a restart)."""
        for row in self.store.load_jobs():
            status = row.status if row.status in FINISHED else "queued"
            self.jobs[row.job_id] = JobState(row.job_id, row.spec, row.submitted, status, row.steps_done,
                                             row.steps_done, row.finished, row.attempts, row.failures, row.renewals)
        self.table.load(self.store.load_throughputs())
        for job in self.jobs.values():
            if job.status not in FINISHED:
                self.throughputs.add_job(job.job_id, job.key)
        self.throughputs.replay(self.store.events("measure"), {m: j.key for m, j in self.jobs.items()})
        now = time.time()
        for a in self.store.running_attempts():
            job = self.jobs.get(a.job_id)
            if job is None or job.status in FINISHED:
                self.store.end_attempt(a.job_id, a.attempt, "lost", now)
                continue
            job.live = Attempt(a.job_id, a.attempt, a.placement, a.worker_type, True, a.launched, now,
                               job.steps_done, restored=True, mixed=True)
            job.status = "running"
        if self.jobs:
            self.store.event("restart", jobs=len(self.jobs), live=sum(j.live is not None for j in self.jobs.values()))
            log.info("restored %d jobs (%d attempts still out) from %s", len(self.jobs),
                     sum(j.live is not None for j in self.jobs.values()), self.store.path)

    # ----- jobs ---------------------------------------------------------------------------
    def submit(self, specs: list[JobSpec]) -> list[int]:
        now = time.time()
        with self.lock:
            ids = self.store.add_jobs(specs, now)
            for i, spec in zip(ids, specs):
                self.jobs[i] = JobState(i, spec, now)
                self.throughputs.add_job(i, self.jobs[i].key)
                self.store.event("submit", job_id=i, job_type=spec.job_type, steps=spec.steps,
                                 scale_factor=spec.scale_factor)
            self.wake = True
            self.cv.notify_all()
        return ids

    def cancel(self, job_id: int) -> tuple[str, list[tuple[WorkerState, pb.KillJobRequest]]]:
        with self.lock:
            job = self.jobs.get(job_id)
            if job is None:
                raise KeyError(job_id)
            if job.status in FINISHED:
                return job.status, []
            kills = self._kills_for(job.live) if job.live else []
            self._finish_job(job, "cancelled")
            return "cancelled", kills

    def _finish_job(self, job: JobState, status: str) -> None:
        job.status = status
        self.throughputs.remove_job(job.job_id)
        job.finished = time.time()
        self.store.update_job(job.job_id, status=status, finished=job.finished, steps_done=job.steps_done)
        self.store.event(status if status != "done" else "finish", job_id=job.job_id, steps=job.steps_done)
        self.finished_jobs.append(job.job_id)
        self.cv.notify_all()

    def _kills_for(self, att: Attempt) -> list[tuple[WorkerState, pb.KillJobRequest]]:
        out = []
        for wid in att.workers:
            w = self.workers.get(wid)
            if w is not None and w.alive and wid not in att.reports:
                out.append((w, pb.KillJobRequest(job_id=att.job_id, attempt=att.attempt)))
        return out

    # ----- workers ------------------------------------------------------------------------
    def register(self, req: pb.RegisterWorkerRequest, make_stub) -> list[tuple[WorkerState, pb.KillJobRequest]]:
        """A worker (re)joins: remember it, take its pending reports, stop attempts nobody owns."""
        with self.lock:
            w = self.workers.get(req.worker_id)
            if w is None or not w.alive or w.address != req.address:
                order = w.order if w is not None else len(self.workers)
                channel, stub = make_stub(req.address)
                w = WorkerState(req.worker_id, req.address, req.gpu_type, req.gpus, order, time.monotonic(),
                                stub=stub, channel=channel)
                self.workers[req.worker_id] = w
                self.topology_version += 1
                self.store.event("worker_up", worker_id=w.worker_id, address=w.address, gpu_type=w.gpu_type,
                                 gpus=w.gpus)
            w.last_seen = time.monotonic()
            self.store.upsert_worker(w.worker_id, w.address, w.gpu_type, w.gpus, time.time(), True)
            for rep in req.pending:
                self._report(rep)
            kills = self._reconcile_running(w, req.running, registering=True)
            self.wake = True
            self.cv.notify_all()
            return kills

    def heartbeat(self, req: pb.HeartbeatRequest) -> pb.HeartbeatReply | None:
        """None when the worker is unknown or was declared dead: it must register again."""
        with self.lock:
            w = self.workers.get(req.worker_id)
            if w is None or not w.alive:
                return None
            w.last_seen = time.monotonic()
            kills = self._reconcile_running(w, req.running, registering=False)
            now = time.time()
            reply = pb.HeartbeatReply(kill=[pb.AttemptRef(job_id=k.job_id, attempt=k.attempt) for _, k in kills])
            for job in self.jobs.values():
                att = job.live
                if att is not None and w.worker_id in att.workers and w.worker_id not in att.reports:
                    reply.leases.add(job_id=att.job_id, attempt=att.attempt, seconds_left=att.lease_end - now)
            return reply

    def _reconcile_running(self, w: WorkerState, running, registering: bool):
        """Attempts a worker runs that are not live here are strays (e.g. declared lost): stop them.
        On registration, live attempts the worker no longer runs (and did not report) are lost."""
        kills = []
        seen = set()
        for ref in running:
            seen.add((ref.job_id, ref.attempt))
            job = self.jobs.get(ref.job_id)
            att = job.live if job is not None else None
            if att is None or att.attempt != ref.attempt or w.worker_id not in att.workers:
                kills.append((w, pb.KillJobRequest(job_id=ref.job_id, attempt=ref.attempt)))
        if registering:
            for job in list(self.jobs.values()):
                att = job.live
                if att is not None and w.worker_id in att.workers and w.worker_id not in att.reports \
                        and (att.job_id, att.attempt) not in seen:
                    self._lose(att, f"worker {w.worker_id} does not run it")
        return kills

    def check_workers(self) -> list[tuple[WorkerState, pb.KillJobRequest]]:
        """Declare dead the workers that missed their heartbeats; their attempts are lost."""
        kills = []
        now = time.monotonic()
        with self.lock:
            for w in self.workers.values():
                if w.alive and now - w.last_seen > self.config.worker_timeout:
                    log.warning("worker %s (%s) missed its heartbeats: declared dead", w.worker_id, w.address)
                    kills += self.worker_lost(w, "heartbeat timeout")
            grace_over = now - self.started > 2 * self.config.worker_timeout
            for job in self.jobs.values():
                att = job.live
                if att is not None and att.restored and grace_over and not any(
                        self.workers.get(x) is not None and self.workers[x].alive for x in att.workers):
                    self._lose(att, "no worker claimed it after the restart")
        return kills

    def worker_lost(self, w: WorkerState, reason: str) -> list[tuple[WorkerState, pb.KillJobRequest]]:
        with self.lock:
            if not w.alive:
                return []
            w.alive = False
            self.topology_version += 1
            self.store.set_worker_alive(w.worker_id, False, time.time())
            self.store.event("worker_down", worker_id=w.worker_id, reason=reason)
            kills = []
            for job in self.jobs.values():
                att = job.live
                if att is not None and w.worker_id in att.workers:
                    kills += self._kills_for(att)     # the other workers of a spread job
                    self._lose(att, f"worker {w.worker_id} lost")
            self.wake = True
            self.cv.notify_all()
            return [k for k in kills if k[0] is not w]

    # ----- attempt ends ---------------------------------------------------------------------
    def report(self, rep: pb.DoneReport) -> None:
        with self.lock:
            self._report(rep)

    def _report(self, rep: pb.DoneReport) -> None:
        job = self.jobs.get(rep.job_id)
        if job is None:
            return
        att = job.live
        if att is None or att.attempt != rep.attempt:
            self._stale_report(job, rep)
            return
        att.reports[rep.worker_id] = rep
        pending = [x for x in att.workers if x not in att.reports and self.workers.get(x) is not None
                   and self.workers[x].alive]
        if not pending:
            self._end_attempt(job, att)

    def _stale_report(self, job: JobState, rep: pb.DoneReport) -> None:
        """An attempt already written off (worker declared lost, scheduler restarted): keep its progress."""
        if rep.steps > job.steps_done:
            job.steps_done = int(rep.steps)
            self.store.update_job(job.job_id, steps_done=job.steps_done)
        self.store.end_attempt(rep.job_id, rep.attempt, "late", time.time(), rep.steps, rep.steps_run,
                               rep.compute_seconds, rep.wall_seconds)
        if rep.done and job.status not in FINISHED and job.live is None:
            self._finish_job(job, "done")

    def _end_attempt(self, job: JobState, att: Attempt) -> None:
        reps = list(att.reports.values())
        steps = max([int(r.steps) for r in reps] + [job.steps_done])
        done = any(r.done for r in reps) and steps >= job.spec.steps
        crashed = any(r.exit_code != 0 and r.reason in ("exited", "launch-failed") for r in reps)
        lead = max(reps, key=lambda r: r.steps_run) if reps else None
        if lead is not None and not crashed:
            self._measure(job, att, int(lead.steps_run), float(lead.compute_seconds))
        job.steps_done = steps
        job.steps_live = max(job.steps_live, steps)
        self._attempt_gone(att)
        job.live = None
        status = "crashed" if crashed else "done" if done else "ended"
        self.store.end_attempt(job.job_id, att.attempt, status, time.time(), steps,
                               int(lead.steps_run) if lead else None, float(lead.compute_seconds) if lead else None,
                               max((r.wall_seconds for r in reps), default=None), att.renewals)
        self.store.event("end", job_id=job.job_id, attempt=att.attempt, status=status, steps=steps,
                         reason=",".join(sorted({r.reason for r in reps})), round=self.round_no,
                         exit_codes=[int(r.exit_code) for r in reps],
                         steps_run=int(lead.steps_run) if lead else 0,
                         compute_seconds=float(lead.compute_seconds) if lead else 0.0,
                         wall_seconds=max((r.wall_seconds for r in reps), default=0.0))
        if job.status in FINISHED:
            pass
        elif done:
            self._finish_job(job, "done")
        elif crashed:
            job.failures += 1
            job.blocked_round = self.round_no
            log.warning("job %d attempt %d crashed (%d of %d allowed failures)", job.job_id, att.attempt,
                        job.failures, self.config.max_failures, extra={"jobs": [job.job_id]})
            if job.failures >= self.config.max_failures:
                self._finish_job(job, "failed")
        else:
            job.failures = 0
        if job.status not in FINISHED:
            job.status = "queued"
        self.store.update_job(job.job_id, status=job.status, steps_done=job.steps_done, failures=job.failures)
        self.cv.notify_all()

    def _lose(self, att: Attempt, reason: str) -> None:
        job = self.jobs[att.job_id]
        self._attempt_gone(att)
        job.live = None
        if job.status not in FINISHED:
            job.status = "queued"
        self.store.end_attempt(att.job_id, att.attempt, "lost", time.time(), job.steps_done)
        self.store.event("lost", job_id=att.job_id, attempt=att.attempt, reason=reason, steps=job.steps_done)
        self.cv.notify_all()

    # ----- progress and measurements ----------------------------------------------------------
    def progress(self, job: JobState, att: Attempt, steps: int, compute_seconds: float) -> None:
        job.steps_live = max(job.steps_live, int(steps))
        self._measure(job, att, int(steps) - att.steps_start, float(compute_seconds))

    def _neighbours(self, att: Attempt) -> list[Attempt]:
        """Other live attempts on any of att's GPUs."""
        mine = set(att.placement)
        return [j.live for j in self.jobs.values()
                if j.live is not None and j.live is not att and mine & set(j.live.placement)]

    def _sharing_now(self, att: Attempt) -> tuple[int | None, bool]:
        """(the job sharing att's GPUs, or None alone; True if the sharing is not one exact partner)."""
        others = self._neighbours(att)
        if not others:
            return None, False
        if len(others) == 1 and others[0].placement == att.placement:
            return others[0].job_id, False
        return None, True

    def attempt_started(self, att: Attempt) -> None:
        """Lock held, att already live: who shares GPUs with whom changed for its neighbours.
        att itself counts as sharing with its planned partner from the start (the two are
        launched together; a partner that never comes shows at the next measurement)."""
        for o in self._neighbours(att):
            planned = o.sharing == att.job_id and att.partner == o.job_id and o.placement == att.placement
            o.mixed = o.mixed or not planned
        now_with, now_mixed = self._sharing_now(att)
        att.sharing = att.partner
        att.mixed = now_mixed or now_with not in (None, att.partner)

    def _attempt_gone(self, att: Attempt) -> None:
        for o in self._neighbours(att):
            o.mixed = True

    def _measure(self, job: JobState, att: Attempt, steps_run: int, seconds: float) -> None:
        """Fold the steps and time since the last measurement of this attempt into what the
        policy sees: an isolated rate if it ran alone the whole interval, an in-pair rate if it
        shared its GPUs with one partner throughout, nothing if that changed meanwhile."""
        d_steps, d_secs = steps_run - att.measured_steps, seconds - att.measured_seconds
        if d_steps < MIN_MEASURED_STEPS or d_secs <= 0:
            return
        att.measured_steps, att.measured_seconds = steps_run, seconds
        now_with, now_mixed = self._sharing_now(att)
        valid = not att.mixed and att.sharing == now_with
        with_, att.sharing, att.mixed = att.sharing, now_with, now_mixed
        if not valid:
            return
        worker_type = att.worker_type
        if not att.consolidated and job.spec.scale_factor > 1:
            worker_type += UNCONSOLIDATED
        partner = (with_, self.jobs[with_].key) if with_ is not None and with_ in self.jobs else None
        if with_ is not None and partner is None:
            return
        saved = self.throughputs.record(job.job_id, job.key, worker_type, d_secs, d_steps, partner)
        if saved is not None:
            split = worker_type.endswith(UNCONSOLIDATED)
            self.store.save_throughput(job.key[0], job.key[1], att.worker_type, not split, *saved)
        self.store.event("measure", job_id=job.job_id, worker_type=worker_type, seconds=d_secs, steps=d_steps,
                         partner=with_)

    # ----- the policy's view of throughputs --------------------------------------------------
    def view_isolated(self, ids: list[int]) -> np.ndarray:
        """(jobs, worker types) steps/s the policy should believe (lock held)."""
        return self.throughputs.isolated(ids, [self.jobs[m].key for m in ids])

    def view_pairs(self, ids: list[int], T: np.ndarray) -> PairTable:
        return self.throughputs.pairs(ids, [self.jobs[m].key for m in ids], T)

    # ----- topology ---------------------------------------------------------------------------
    def capacity(self) -> np.ndarray:
        with self.lock:
            cap = np.zeros(len(self.worker_types))
            for w in self.workers.values():
                if w.alive:
                    cap[self.worker_types.index(w.gpu_type)] += w.gpus
            return cap

    def topology(self) -> tuple[Topology, list[tuple[str, int]], int]:
        """Live workers as servers, GPUs numbered type by type; gpu_map[g] = (worker id, local GPU)."""
        with self.lock:
            live = sorted((w for w in self.workers.values() if w.alive),
                          key=lambda w: (self.worker_types.index(w.gpu_type), w.order))
            gpu_type, gpu_server, server_type, server_gpus, gpu_map = [], [], [], [], []
            type_servers: list[list[int]] = [[] for _ in self.worker_types]
            for s, w in enumerate(live):
                j = self.worker_types.index(w.gpu_type)
                first = len(gpu_type)
                server_type.append(j)
                server_gpus.append(np.arange(first, first + w.gpus, dtype=np.int64))
                type_servers[j].append(s)
                for local in range(w.gpus):
                    gpu_type.append(j)
                    gpu_server.append(s)
                    gpu_map.append((w.worker_id, local))
            cap = np.bincount(np.array(gpu_type, dtype=np.int64), minlength=len(self.worker_types)).astype(float)
            topo = Topology(list(self.worker_types), cap, np.array(gpu_type, dtype=np.int64),
                            np.array(gpu_server, dtype=np.int64), np.array(server_type, dtype=np.int64),
                            server_gpus, [np.array(t, dtype=np.int64) for t in type_servers])
            return topo, gpu_map, self.topology_version

    def drain_finished(self) -> list[int]:
        with self.lock:
            out, self.finished_jobs = self.finished_jobs, []
            return out
