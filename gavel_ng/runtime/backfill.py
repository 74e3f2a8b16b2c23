"""Mid-round backfill on a live cluster: GPUs a job frees before its round ends run waiting jobs.

The round's plan carries the mechanism's `Waitlist` (gavel_ng.mechanism.backfill), the code the
simulator asks too. The executor's loop (runtime.executor) tells `LiveBackfill` when a plan is
published and when its round begins, and calls `tick(now)` every few tens of milliseconds. When a
planned (or backfilled) job of the round has finished or failed since the last look, the GPUs no
live attempt holds and no planned job still waits for are offered to the waitlist, and each
chosen job becomes an assignment of the current round: the executor launches it like any other,
with a lease that ends at the round boundary (renewed there only if the next plan keeps it on
the same GPUs). A `backfill` event records each choice.

A job submitted mid-round is not in that waitlist. When GPUs idle (no live attempt holds them and
no job of the round waits for them), it is offered them at once, within a tick, through the same
choice: the mechanism's waitlist of jobs no allocation knows yet (`RoundMechanism.arrivals`, each
on its fastest types first, placement's server rules and quotas as above). The next plan admits it
and the policy's allocation takes over from there.

Nothing starts with less than a quarter round left, nor once the next round's plan is published (at
most 30 s, and 30 % of a round, before the boundary; mechanism.backfill.may_start, which the simulator
asks too, with no modeled start-up: a launch's real cost is what the quarter is for): every backfill happens
while the plan of its round is the mechanism's latest, so its GPU numbers are the planner's and
the next round's placement may renew the backfilled job in place.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

import numpy as np

from ..mechanism import Backfilled, RoundPlan, RoundResult, may_start
from ..mechanism.backfill import Holder, holders
from ..mechanism.core import with_backfilled
from .jobs import FINISHED, LOG_EACH
from .launcher import Assignment
from .store import StoreError

log = logging.getLogger(__name__)


class LiveBackfill:
    """`gpu_map()`: the (worker id, local GPU) of each GPU number of the plans (the planner's); `arrivals(jobs,
    plan)`: the Waitlist of jobs no allocation knows, as the policy believes them (AllocationPlanner.arrivals;
    None: mid-round arrivals wait for the next plan). A plan without a waitlist (a round policy's) backfills
    nothing."""

    def __init__(self, executor, gpu_map: Callable[[], list[tuple[str, int]]], arrivals=None):
        self.ex = executor
        self.gpu_map = gpu_map
        self.arrivals = arrivals
        self._offered: tuple[int, int, int] | None = None   # (arrivals, ended, free GPUs) at the last offer
        self.pending: RoundPlan | None = None      # the plan published for the next round
        self.plan: RoundPlan | None = None         # the current round's
        self.entries: list[tuple[Backfilled, float]] = []   # what was backfilled this round, and when
        self.ended = 0                             # the round's jobs seen finished or failed

    def publish(self, plan: RoundPlan) -> None:
        if plan.waiting is not None:
            plan.waiting.build()     # now, before a solve changes the mechanism's rows
        self.pending = plan

    def begin(self) -> None:
        self.plan, self.pending = self.pending, None
        self.entries, self.ended = [], 0
        self._offered = None

    def tick(self, now: float) -> None:
        """Offer GPUs freed since the last look to the waitlist. The round thread, lock not held: what is
        free is read under the state's lock, the choice is made without it (it may take seconds for
        thousands of entries, and heartbeats need that lock), and the chosen entries join under it."""
        ex, plan, st = self.ex, self.plan, self.ex.state
        if plan is None or plan.waiting is None:
            return
        with st.lock:
            if self.pending is not None or ex.round_end is None or now >= ex.round_end:
                return                 # (once the next plan is out, the mechanism has moved on)
            ended = self._ended()
            if len(ended) <= self.ended or not may_start(ex.round_end - now, ex.L, ex.plan_margin):
                return
            self.ended = len(ended)
            gmap = self.gpu_map()
            free = self._free(gmap, ended, now)
            if not free.any():
                return
            busy = set(ex.current) | st.index.live
            holding = self._holding(plan, ended) if plan.waiting.watches_holders else ()
        self._assign(plan.waiting.choose(free, busy, holding), gmap, now)

    def _ended(self) -> set[int]:
        """Jobs of the current round that finished, failed or may not start again this round (lock held)."""
        ex, st = self.ex, self.ex.state
        return {m for m in ex.current if (j := st.jobs.get(m)) is None or j.status in FINISHED
                or j.blocked_round == st.round_no}

    def _free(self, gmap, ended: set[int], now: float) -> np.ndarray:
        """Per GPU of the plan: no job of the round still waits for it, no live attempt holds it past its
        lease, alive. An attempt whose lease has ended (the last round's, not renewed) is leaving: its GPUs
        are as free as the simulator's are at the boundary, and a job started there waits on its worker until
        the attempt has exited, as the round's own launches do. Counted as held, the GPUs it frees a few
        tens of milliseconds into the round sent an arrival at the round's start to slower ones."""
        ex, st = self.ex, self.ex.state
        end = max(now, ex.round_start or now) + 1e-6
        taken = {p for p, held in st.index.by_gpu.items()
                 if any((j := st.jobs.get(m)) is None or j.live is None or j.live.lease_end > end for m in held)}
        taken.update(p for m, a in ex.current.items() if m not in ended for p in a.placement)
        return np.array([p not in taken and ex.alive(p[0]) for p in gmap], bool)

    def arrive(self, now: float) -> None:
        """Offer idle GPUs to the jobs submitted since the round was planned, when one arrived or the
        round's jobs ended since the last offer (module docstring). Lock not held, as in `tick`: the
        waitlist of 10,000 new jobs is built and chosen from without it."""
        ex, plan, st = self.ex, self.plan, self.ex.state
        if self.arrivals is None or plan is None:
            return
        with st.lock:
            if self.pending is not None or ex.round_end is None or now >= ex.round_end or not st.arrivals:
                return
            if self._offered == (len(st.arrivals), self.ended) or not may_start(ex.round_end - now, ex.L,
                                                                                 ex.plan_margin):
                return
            self._offered = (len(st.arrivals), self.ended)
            held = ex.waiting.held if ex.waiting is not None else {}     # admission holds them back
            new = [m for m in dict.fromkeys(st.arrivals) if (j := st.jobs.get(m)) is not None
                   and j.status == "queued" and j.live is None and m not in ex.current and not j.fenced(now)
                   and m not in held]
            if not new:
                return
            ended = self._ended()
            gmap = self.gpu_map()
            free = self._free(gmap, ended, now)
            if not free.any():
                return
            busy = set(ex.current) | st.index.live
        waiting = self.arrivals(new, plan)
        holding = self._holding(plan, ended) if waiting.watches_holders else ()
        self._assign(waiting.choose(free, busy, holding), gmap, now, "arrival")

    def _holding(self, plan: RoundPlan, ended: set[int]) -> list[Holder]:
        out = [h for h in holders(plan) if not ended.issuperset(h.key)]
        return out + [b.holder for b, _ in self.entries if not ended.issuperset(b.key)]

    def _assign(self, chosen: list[Backfilled], gmap, now: float, why: str = "freed") -> None:
        """The chosen entries join the current round (recorded first, in one transaction: a refused write
        assigns nothing). The first LOG_EACH get a log line each, the others one together."""
        if not chosen:
            return
        ex, st = self.ex, self.ex.state
        entries = [(b, tuple(gmap[g] for g in b.gpus), st.worker_types[b.type]) for b in chosen]
        try:                          # without the state's lock: only this thread changes the round's plan
            with st.store.transaction():
                for b, placement, worker_type in entries:
                    for m in b.key:
                        st.store.event("backfill", job_id=m, round_no=st.round_no, worker_type=worker_type,
                                       placement=[list(p) for p in placement],
                                       seconds_left=round(ex.round_end - now, 3), why=why)
        except StoreError:
            return
        with st.cv:                   # a job cancelled or a worker lost meanwhile: the launcher skips it
            for b, placement, worker_type in entries:
                for m in b.key:
                    partner = next((x for x in b.key if x != m), None)
                    ex.current[m] = Assignment(m, placement, worker_type, b.consolidated, partner)
                self.entries.append((b, now))
            st.cv.notify_all()
        for b, _, worker_type in entries[:LOG_EACH]:
            log.info("backfill (%s): job(s) %s on %s for the %.0f s left of round %d", why, ",".join(map(str, b.key)),
                     worker_type, ex.round_end - now, st.round_no, extra={"jobs": list(b.key)})
        if len(entries) > LOG_EACH:
            log.info("backfill (%s): %d more entries for the %.0f s left of round %d (each has its backfill event "
                     "in the state)", why, len(entries) - LOG_EACH, ex.round_end - now, st.round_no)

    def complete(self, plan: RoundPlan, result: RoundResult) -> None:
        """The round as it ran (RoundResult.plan): its plan and the entries backfilled into it, each
        credited with the seconds it held its GPUs (to the round's end if it still runs)."""
        if plan is not self.plan or not self.entries:
            return
        ex, st = self.ex, self.ex.state
        held = []
        with st.lock:
            for b, t0 in self.entries:
                secs = 0.0
                for m in b.key:
                    job = st.jobs.get(m)
                    if job is None:
                        continue
                    if job.finished is not None and job.finished < ex.round_end:
                        secs = max(secs, job.finished - t0)
                    elif job.live is not None:
                        secs = max(secs, ex.round_end - t0)
                held.append(min(max(secs, 0.0), ex.L))
        result.plan = with_backfilled(plan, [b for b, _ in self.entries])
        result.occupied = np.concatenate([result.occupied, held])
