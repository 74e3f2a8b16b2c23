"""The deployment executor: the SchedulerLoop's second Executor, driving gRPC workers.

Rounds sit on a fixed grid of `round_seconds`. The loop calls execute(plan) for round
r+1 while round r still runs: `plan_margin` seconds before round r ends, so that the
allocation is solved and the next round placed off the critical path. execute() then

1. publishes the plan, which answers the lease renewals iterators ask for near the end
   of round r (renewed iff the job keeps exactly its GPUs; an attempt still starting, which
   cannot ask yet, is renewed by the scheduler on the same terms),
2. waits for round r to end, launching and relaunching as jobs come and go,
3. starts round r+1: every planned job without a live attempt is launched as soon as
   its GPUs are free (the previous occupant checkpointed and exited),
4. returns at round r+1's planning point with the time each entry held its GPUs.

Jobs not renewed stop by themselves at their lease end; workers kill those that
overrun it by more than the grace period.

Space sharing: a planned pair is two assignments on the same GPUs, each naming the other
as partner; each member is launched as soon as its GPUs are free or held only by its
partner, and runs as its own attempt (own lease, own renewals, own checkpoints).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import grpc
import numpy as np

from ..mechanism import RoundPlan, RoundResult, plan_lead
from ..protocol.client import placement_label
from ..protocol.leasefile import lease_mac
from ..protocol.protos import gavel_pb2 as pb
from ..protocol.rpc import derive, job_token
from .adaptive import AdaptiveReport
from .gcpace import GcPacer
from .jobs import FINISHED, Attempt, DoneReport, JobState
from .launcher import RPC_TIMEOUT, Assignment, Launcher
from .records import job_dir
from .state import ClusterState
from .store import StoreError
from .workers import Kill, WorkerState

log = logging.getLogger(__name__)
TICK = 0.05
RETRY = 0.3               # renew_in while the plan a renewal depends on is not made yet


@dataclass(frozen=True)
class Renewal:
    """A renewal decided under the state's lock, to be recorded without it (DeployExecutor._grant)."""

    job: JobState
    att: Attempt
    lease_end: float              # the lease it grants (unix seconds)
    round_no: int
    steps_live: int
    number: int                   # the scheduler's renewal count with it
    by_scheduler: bool = False    # an attempt still starting, renewed when the next plan was published


@dataclass(frozen=True)
class Lease:
    """What a job's iterator is told: run until `seconds_left` (-1: keep the lease you have) and
    ask for a renewal in `renew_in` seconds (-1: do not ask again). `stop`: the attempt was
    written off (fenced), so stop at once and commit nothing."""

    steps_total: int
    seconds_left: float
    renew_in: float
    renewed: bool = False
    round_seconds: float = 0.0
    stop: bool = False
    lease_end: float = 0.0         # unix seconds; with lease_mac, what the job passes to its worker
    lease_mac: str = ""


class DeployExecutor:
    def __init__(self, state: ClusterState, placement: Callable[[RoundPlan, int], list[tuple[str, int]]],
                 checkpoint_root: Path, stop: threading.Event, state_id: str = "", *, waiting=None,
                 backfill: Callable[[DeployExecutor], object] | None = None,
                 on_publish: Callable[[], None] | None = None, on_launch_batch: Callable[[float], None] | None = None):
        """`waiting`: a runtime.waiting.Waiting (why each queued job waits, per plan); `backfill(executor)`
        makes the runtime.backfill.LiveBackfill that gives GPUs freed mid-round to waiting jobs (None: off);
        `on_publish()` runs after each plan is published (lock not held); `on_launch_batch(seconds)` sees each
        batch of launches (metrics)."""
        self.state = state
        self.state_id = state_id              # job directories and checkpoints carry it (records.job_dir)
        self.lease_key = derive(state.secret, "lease")   # workers check the lease ends jobs write with it
        self.placement = placement            # (worker id, local GPU) of each GPU of a planned entry
        self.checkpoint_root = Path(checkpoint_root)
        self.stop = stop
        cfg = state.config
        self.L = float(cfg.round_seconds)
        self.renewals = cfg.lease_renewals
        self.checkpoint_every = cfg.checkpoint_every_rounds if self.renewals else 0
        self.plan_margin = plan_lead(self.L)     # (the simulator plans as far ahead: mechanism.loop)
        self.renew_margin = self.plan_margin / 2
        self.round_start: float | None = None
        self.round_end: float | None = None
        self.current: dict[int, Assignment] = {}
        self.next: dict[int, Assignment] | None = None
        self.idle = False                     # the last plan ran nothing: no round is counting down
        self.waiting = waiting
        self.on_publish = on_publish
        self.launcher = Launcher(self, on_launch_batch)   # picks, records and sends the round's launches
        self.gc: GcPacer | None = None     # the collector's full passes off the boundaries (the service's)
        self.backfill = backfill(self) if backfill is not None else None
        self._backfill_seen: tuple | None = None

    # ----- Executor protocol ---------------------------------------------------------------
    def now(self) -> float:
        return time.time()

    def admit(self) -> list[int]:
        st = self.state
        with st.lock:
            out = sorted(m for m, j in st.jobs.items() if not j.admitted and j.status not in FINISHED)
            for m in out:
                st.jobs[m].admitted = True
            st.arrivals.clear()               # the next plan knows them: mid-round arrivals start over
            return out

    def refuse(self, job: int, reason: str) -> None:
        """Admission held the job back (SchedulerLoop): its reason says so."""
        with self.state.lock:
            if self.waiting is not None:
                self.waiting.held[job] = reason

    def execute(self, plan: RoundPlan) -> RoundResult:
        desired = self.publish(plan)
        if not desired:
            self._run_until(time.time() + min(self.L, 1.0), idle=True)
            return RoundResult(np.zeros(plan.num_entries), self.state.drain_finished())
        if self.round_end is not None:
            self._run_until(self.round_end)
        self._begin_round(desired)
        self._run_until(self.round_start + self.L - self.plan_margin)
        result = RoundResult(self._occupied(plan), self.state.drain_finished())
        if self.backfill is not None:
            self.backfill.complete(plan, result)
        return result

    def publish(self, plan: RoundPlan) -> dict[int, Assignment]:
        """The next round's plan: renewals are answered from it, and each queued job's reason decided."""
        desired = self._resolve(plan)
        with self.state.cv:
            if self.backfill is not None:
                self.backfill.publish(plan)
            self.next = desired
            self.idle = not desired
            starting = self._keep_starting(desired)
            self.state.cv.notify_all()
        for r in starting:                  # recorded, then granted, without the lock (as a job's own renewal)
            try:
                self._grant(r)
            except StoreError:              # not granted: it ends at its lease and is launched again
                log.debug("renewal of starting job %d refused by the store", r.job.job_id)
        if self.waiting is not None:        # takes the lock a chunk of jobs at a time
            self.waiting.update({m: placement_label(a.worker_type, a.placement) for m, a in desired.items()})
        if self.on_publish is not None:
            self.on_publish()
        return desired

    def _keep_starting(self, desired: dict[int, Assignment]) -> list[Renewal]:
        """Lock held. Decides the renewal of each attempt that has not started (no InitJob yet, so it cannot
        ask) and that the next plan keeps on its GPUs: a job slower to start than a round would otherwise be
        killed at its lease's end and relaunched in the same place every round, never reaching a step. The
        caller records and grants them without the lock (`_grant`); a renewal decided and never granted would
        leave its attempt `renewing`, told to ask again until its lease ran out. The worker hears the new
        lease end with its next heartbeat."""
        if not self.renewals or self.round_end is None:
            return []
        out = []
        for m, a in desired.items():
            job = self.state.jobs.get(m)
            att = job.live if job is not None else None
            if (att is not None and not att.started and not att.restored and tuple(att.placement) == a.placement
                    and self._target(att) is desired):
                decided = self._renew(job, att, by_scheduler=True)
                if isinstance(decided, Renewal):
                    out.append(decided)
        return out

    # ----- rounds ---------------------------------------------------------------------------
    def _resolve(self, plan: RoundPlan) -> dict[int, Assignment]:
        out = {}
        types = self.state.worker_types
        for e in range(plan.num_entries):
            members = [int(m) for m in plan.keys[e]]
            placement = tuple(self.placement(plan, e))
            for m in members:
                partner = next((x for x in members if x != m), None)
                out[m] = Assignment(m, placement, types[int(plan.types[e])], bool(plan.consolidated[e]), partner)
        return out

    def _begin_round(self, desired: dict[int, Assignment]) -> None:
        st = self.state
        with st.lock:
            now = time.time()
            on_grid = self.round_end is not None and now - self.round_end < 0.5 * self.L
            start = self.round_end if on_grid else now
            round_no = st.round_no + 1
            kept = [m for m, a in desired.items() if (live := st.jobs[m].live) is not None
                    and tuple(live.placement) == a.placement and live.lease_end >= start + self.L - 1e-6]
        # recorded first, without the state's lock (a plan of 5,000 jobs is a large event; only this thread
        # starts rounds): a failed write starts no round
        with st.store.transaction():
            st.store.set_meta("round", round_no)
            st.store.event("round", round_no=round_no, start=start, kept=kept,
                           plan={str(m): [a.worker_type, [list(p) for p in a.placement], a.partner]
                                 for m, a in desired.items()})
        with st.cv:
            self.round_start, self.round_end = start, start + self.L
            st.round_no = round_no
            self.current, self.next = desired, None
            if self.backfill is not None:
                self.backfill.begin()
            st.cv.notify_all()

    def _occupied(self, plan: RoundPlan) -> np.ndarray:
        st = self.state
        out = np.zeros(plan.num_entries)
        with st.lock:
            for e in range(plan.num_entries):
                out[e] = max(self._held(st.jobs.get(int(m))) for m in plan.keys[e])
        return out

    def _held(self, job: JobState | None) -> float:
        """Seconds of the current round the job held its planned GPUs."""
        if job is None or job.job_id not in self.current:
            return 0.0
        if job.finished is not None and job.finished < self.round_end:
            return min(max(job.finished - self.round_start, 0.0), self.L)
        return self.L if job.live is not None or job.status not in FINISHED else 0.0

    def _run_until(self, t: float, idle: bool = False) -> None:
        """Keep the current round's jobs running until time t (or, idle, until something happens)."""
        st = self.state
        while not self.stop.is_set():
            now = time.time()
            if now >= t:
                return
            try:
                kills = st.check_workers()
            except StoreError:                # retried next tick; the store said why
                kills = []
            look = False
            with st.cv:
                if self.backfill is not None:
                    seen = (st.index.version, st.topology_version, len(st.arrivals), st.round_no, id(self.next))
                    look = seen != self._backfill_seen       # something ended or arrived since the last look
                    self._backfill_seen = seen
            if look:                      # they take the lock themselves, and choose without it
                self.backfill.tick(now)
                self.backfill.arrive(now)
            self.send_kills(kills)
            self.launcher.launch_ready(now)
            if self.gc is not None:
                self.gc.tick(self._quiet(now))
            with st.cv:
                if idle and st.wake:
                    st.wake = False
                    return
                st.cv.wait(timeout=max(0.0, min(TICK, t - time.time())))

    def _quiet(self, now: float) -> bool:
        """Mid-round: the boundary's ends and launches are over and the next plan is not being made."""
        return self.round_start is not None and 0.3 * self.L <= now - self.round_start <= 0.6 * self.L

    # ----- launching (runtime.launcher picks, records and applies; these reach the workers) -------
    def alive(self, worker_id: str) -> bool:
        w = self.state.workers.get(worker_id)
        return w is not None and w.alive

    def keeps(self, m: int, a: Assignment) -> bool:
        nxt = self.next.get(m) if self.next is not None else None
        return self.renewals and nxt is not None and nxt.placement == a.placement

    def run_requests(self, job: JobState, att: Attempt) -> list[tuple[WorkerState, pb.RunJobRequest]]:
        """The RunJob call for each worker of a live attempt, in rank order."""
        st = self.state
        workers = att.workers
        ckpt = job_dir(self.checkpoint_root, job.job_id, self.state_id)
        # a user's job runs as that user where workers run as root; an admin's as the worker's account
        run_as = job.actor.removeprefix("user:") if job.actor.startswith("user:") else ""
        identity = f"{self.state_id}:{job.job_id}" if self.state_id else ""
        dist_init = f"file://{ckpt}/rendezvous-{att.attempt}" if len(workers) > 1 else ""
        spec, token = job.spec.to_proto(), job_token(st.secret, job.job_id, att.attempt)
        out, rank = [], 0
        for wid in workers:
            gpus = [g for w, g in att.placement if w == wid]
            out.append((st.workers.get(wid), pb.RunJobRequest(
                job_id=job.job_id, attempt=att.attempt, spec=spec, gpus=gpus, rank_offset=rank,
                world_size=len(att.placement), dist_init=dist_init, lease_seconds=att.lease_end - time.time(),
                checkpoint_dir=str(ckpt), job_token=token, share_with=att.partner or 0, servers=len(workers),
                checkpoint_every_rounds=self.checkpoint_every, run_as=run_as, identity=identity)))
            rank += len(gpus)
        return out

    def run_job(self, job: JobState, att: Attempt) -> bool:
        """RunJob to each worker of a live attempt in turn, blocking; False (and the failure handled) if one
        refused it."""
        for w, req in self.run_requests(job, att):
            try:
                w.stub.RunJob(req, timeout=RPC_TIMEOUT)
            except grpc.RpcError as exc:
                self.launch_failed(w, job, att, exc)
                return False
        return True

    def launch_failed(self, w: WorkerState, job: JobState, att: Attempt, exc: grpc.RpcError) -> None:
        st = self.state
        code = exc.code() if hasattr(exc, "code") else None
        log.warning("RunJob job %d on %s failed: %s", job.job_id, w.worker_id, exc, extra={"jobs": [job.job_id]})
        if code in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED):
            self.send_kills(st.worker_lost(w, f"RunJob: {code.name}"))
            return
        with st.lock:
            for wid in att.workers:       # the attempt ends here, counted as a failure
                st.report(DoneReport(worker_id=wid, job_id=job.job_id, attempt=att.attempt, exit_code=-1, steps=-1,
                                     reason="launch-failed",
                                     detail=f"worker {w.worker_id} refused RunJob ({code.name if code else exc})"))
        self.send_kills([Kill(st.workers[x], job.job_id, att.attempt)
                         for x in att.workers if x != w.worker_id and self.alive(x)])

    def send_kills(self, kills: list[Kill]) -> None:
        """Sent by the launcher's sender (runtime.launcher): a dead worker holds one call slot, not the caller."""
        self.launcher.kill(kills)

    # ----- leases (called from gRPC threads) --------------------------------------------------
    def _attempt(self, job_id: int, attempt: int):
        """The job and its live attempt, or a lease telling a stale attempt to stop (fenced: `stop`)."""
        job = self.state.jobs[job_id]
        att = job.live
        if att is None or att.attempt != attempt:
            return job, att, Lease(steps_total=job.spec.steps, seconds_left=-1, renew_in=-1, round_seconds=self.L,
                                   stop=True)
        return job, att, None

    def init_job(self, job_id: int, attempt: int, checkpoint_step: int) -> Lease:
        """A job process starts: it restored `checkpoint_step`."""
        st = self.state
        with st.cv:
            job, att, stale = self._attempt(job_id, attempt)
            if stale is not None:
                return stale
            if checkpoint_step > job.steps_done:     # the checkpoint is the truth about progress
                st.store.update_job(job.job_id, steps_done=int(checkpoint_step))
                job.steps_done = int(checkpoint_step)
            att.steps_start = int(checkpoint_step)
            att.started = True
            job.steps_live = max(job.steps_live, att.steps_start)
            if not self.renewals or att.lease_end - time.time() > self.renew_margin:
                return self._lease(job, att, False)
            decided = self._renew(job, att)        # started late in its round: renew right away
        return decided if isinstance(decided, Lease) else self._grant(decided)

    def update_lease(self, job_id: int, attempt: int, steps: int, compute_seconds: float,
                     report: AdaptiveReport | None = None, checkpoint_step: int = 0,
                     progress_only: bool = False) -> Lease:
        """Renewed iff the job runs on exactly the same GPUs in the round its lease ends into.
        `checkpoint_step`: the attempt's newest committed checkpoint, the job's progress so far.
        `progress_only`: a report between renewals, for status: its step is kept in memory (this job's
        entry only), nothing is measured, stored or renewed, and the lease is answered as it stands."""
        st = self.state
        with st.cv:
            job, att, stale = self._attempt(job_id, attempt)
            if stale is not None:
                return stale
            step = min(int(checkpoint_step), job.spec.steps)
            if step > job.steps_done:
                st.store.update_job(job.job_id, steps_done=step)
                job.steps_done = step
            if progress_only:
                job.steps_live = max(job.steps_live, int(steps))
                return self._lease(job, att, False)
            st.progress(job, att, steps, compute_seconds, report)
            if not self.renewals:
                return self._lease(job, att, False)
            decided = self._renew(job, att)
        return decided if isinstance(decided, Lease) else self._grant(decided)

    def _renew(self, job: JobState, att: Attempt, by_scheduler: bool = False) -> Lease | Renewal:
        """Lock held; decides at once: a Lease to answer, or a Renewal to record (`_grant`, without the lock).
        Until the plan of the round the lease ends into exists, the current lease and a short renew_in: a
        handler waiting for the plan would hold a server thread, and enough waiting renewals leave none for
        the heartbeats. `by_scheduler`: an attempt still starting (its `renew` event says so): no job writes
        this lease end down for its worker, which hears it only by heartbeat, so a scheduler stopped through
        the old end loses the attempt."""
        st = self.state
        if self.round_end is not None and att.lease_end > self.round_end + 1e-6:
            return self._lease(job, att, True)          # already renewed
        target = self._target(att)
        if target is None or att.renewing:             # no plan yet, or this renewal is being recorded
            left = att.lease_end - time.time()
            if left <= 0 or self.stop.is_set():
                return self._lease(job, att, False, final=True)
            return self._lease(job, att, False, retry=min(RETRY, left / 2))
        a = target.get(job.job_id)
        if a is None or a.placement != tuple(att.placement) or job.status in FINISHED:
            return self._lease(job, att, False, final=True)
        att.renewing = True
        st.stats["renewals"] += 1                      # its number; given back if the store refuses it
        return Renewal(job, att, self.round_end + self.L if target is self.next else self.round_end, st.round_no,
                       job.steps_live, st.stats["renewals"], by_scheduler)

    def _grant(self, r: Renewal) -> Lease:
        """Record a renewal, then grant it (a renewal the store refused is not granted). The write is made
        without the state's lock: 5,000 renewals near a round's end, each a transaction, held it for seconds
        (issue 42). `att.renewing` keeps a second call for the same attempt from deciding meanwhile; an attempt
        written off meanwhile is told to stop, its renewal recorded but never in force."""
        st, job, att = self.state, r.job, r.att
        try:
            with st.store.transaction():
                st.store.update_job(job.job_id, renewals=job.renewals + 1, steps_live=r.steps_live)
                st.store.raise_meta("renewals", r.number)
                st.store.event("renew", job_id=job.job_id, round_no=r.round_no, attempt=att.attempt,
                               steps=r.steps_live, **({"by": "scheduler"} if r.by_scheduler else {}))
        except StoreError:
            with st.cv:
                att.renewing = False
                st.stats["renewals"] -= 1
            raise
        with st.cv:
            att.renewing = False
            job.renewals += 1
            att.renewals += 1
            if job.live is not att:
                return self._attempt(job.job_id, att.attempt)[2]
            att.lease_end = max(att.lease_end, r.lease_end)
            return self._lease(job, att, True)

    def _target(self, att: Attempt) -> dict[int, Assignment] | None:
        """The plan of the round the attempt's lease ends into; None while not yet computed."""
        if self.round_end is None:
            return None
        if att.lease_end <= self.round_start + 1e-6:
            return self.current
        return self.next

    def _lease(self, job: JobState, att: Attempt, renewed: bool, final: bool = False,
               retry: float | None = None) -> Lease:
        """`final`: the lease will not be renewed, so the iterator should not ask again; `retry`: ask
        again this soon (the decision is not made yet). lease_end and its MAC are for the worker."""
        now = time.time()
        renew_in = max(att.lease_end - self.renew_margin - now, 0.0) if self.renewals and not final else -1.0
        if retry is not None:
            renew_in = retry
        return Lease(steps_total=job.spec.steps, seconds_left=max(att.lease_end - now, 0.0), renew_in=renew_in,
                     renewed=renewed, round_seconds=self.L, lease_end=att.lease_end,
                     lease_mac=lease_mac(self.lease_key, job.job_id, att.attempt, att.lease_end))

    def round_ends_in(self) -> float:
        return max(0.0, self.round_end - time.time()) if self.round_end is not None else 0.0
