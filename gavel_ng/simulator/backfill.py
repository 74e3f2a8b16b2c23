"""Mid-round backfill in the simulator: the rest of a round on the GPUs its early finishers free.

The round's entries run first (executor.SimExecutor.execute); each that ends before the round
does frees its GPUs at that moment. Those moments are taken in time order: at each, the plan's
`Waitlist` (gavel_ng.mechanism.backfill, the code the runtime asks too) chooses entries for the
GPUs free then (freed ones and any no entry held this round), and each chosen entry starts
there, pays the start-up a launch onto free GPUs pays (`--start-overhead`, by default
`--preemption-overhead`; or its job's measured restart delay where the profile set has one:
simulator.restarts) and runs at its true
rate until it is done or the round ends. One that is done early frees its GPUs in turn. Whether
a job may still start is the runtime's rule (mechanism.backfill.may_start): a quarter round left,
the next round not planned yet, and no start-up counted (a cluster does not know it beforehand).

Jobs that arrive mid-round are offered GPUs that idle then (no entry holds them, or one freed
them), at their arrival and at each later moment GPUs free, through the mechanism's waitlist of
jobs no allocation knows yet (`AllocationPlanner.arrivals`, given to `SimExecutor`): what the runtime
does within a tick of a submission (runtime.backfill, `LiveBackfill.arrive`). Without it a job
arriving mid-round waited for the round's end here and started at once on a cluster: half a round
more JCT per arrival onto a cluster with idle GPUs (experiments/sim_vs_cluster.py).

What comes back is the round as it ran: the plan with the backfilled entries appended and every
member's steps, start, end and finished flag, so that progress, GPU-seconds, cost, the
estimator's measurements and the mechanism's ledger (time received per row) see them as they
see any entry.
"""

from __future__ import annotations

import heapq
from itertools import chain

import numpy as np

from ..mechanism import RoundPlan, make_plan, may_start
from ..mechanism.backfill import holders
from ..mechanism.core import with_backfilled

EPS = 1e-9


def backfill_round(ex, plan: RoundPlan, steps: np.ndarray, start: np.ndarray, used: np.ndarray,
                   done: np.ndarray, occupied: np.ndarray):
    """(plan, steps, start, used, done, occupied) of the round with its backfilled entries, per member
    and per entry as SimExecutor.execute keeps them; None when nothing was backfilled."""
    wl, L, ja = plan.waiting, ex.L, ex.jobs
    overhead = min(ex.start_overhead, L)
    arriving = ex.arriving()                  # (job, seconds into the round) of mid-round arrivals
    # the moments GPUs free: for the plan's waiting entries and for arrivals waiting for a GPU alike (the runtime
    # offers both whenever a job of the round ends)
    freed = occupied[occupied < L - EPS].tolist() if len(wl.candidates) or arriving else []
    times = sorted(set(freed + [t for _, t in arriving] + ([0.0] if ex.freed_at_start else [])))
    if not times or not may_start(L - times[0], L, ex.lead):
        return None                             # (most rounds with an early end: nothing waits)
    end = np.zeros(wl.topo.num_gpus)          # when each GPU is free from (0: no entry held it)
    sizes = np.fromiter(map(len, plan.gpus), np.int64, plan.num_entries)
    end[np.fromiter(chain.from_iterable(plan.gpus), np.int64, int(sizes.sum()))] = np.repeat(occupied, sizes)
    if end.min() > times[-1] + EPS:
        return None                             # (a full cluster: no GPU is free at any of those moments)
    busy = set(plan.member_job.tolist()) | set(ex.unreported.tolist())   # (done, the plan does not know yet)
    watch = wl.watches_holders or bool(arriving)   # (rules, or the policy's packing rows: who holds GPUs when)
    holding = list(zip(holders(plan), occupied.tolist())) if watch else []
    parts = []
    while times:
        t = heapq.heappop(times)
        while times and times[0] <= t + EPS:
            heapq.heappop(times)
        if not may_start(L - t, L, ex.lead):
            break                               # later moments leave even less of the round
        now = [h for h, e in holding if e > t + EPS] if watch else ()
        chosen = wl.choose(end <= t + EPS, busy, now) if len(wl.candidates) else []
        new = [m for m, a in arriving if a <= t + EPS and m not in busy]
        if new and (end <= t + EPS).any():      # then the jobs no allocation knows, on what is still idle
            late = ex.arrivals(new, plan)   # (as the policy believes them)
            free = end <= t + EPS
            for b in chosen:
                free[list(b.gpus)] = False
            taken = late.choose(free, busy, now + [b.holder for b in chosen] if late.watches_holders else ())
            ex.admit_early([m for b in taken for m in b.key], t)
            chosen = chosen + taken
        if not chosen:
            continue
        sub = make_plan([b.key for b in chosen], [b.row for b in chosen], [b.type for b in chosen],
                        [b.sf for b in chosen], [b.gpus for b in chosen], np.zeros(len(chosen), bool),
                        [b.consolidated for b in chosen], cols=[b.col for b in chosen])
        rate, _ = ex._throughputs(sub)
        m = sub.member_job
        # each pays what a launch pays: the flat overhead, or its own measured restart (restarts.py)
        s0 = t + (ex._restarts(sub, np.arange(len(m)), L - t) if ex.restarts is not None
                  else np.full(len(m), min(overhead, L - t)))
        rem = ja.remaining[m]
        can = rate * (L - s0)
        if ex.integer_steps:
            can = np.floor(can)
        d = (rem <= can) & (rate > 0)
        with np.errstate(divide="ignore", invalid="ignore"):
            u = np.where(d, s0 + rem / np.where(rate > 0, rate, 1.0), L)
        st = np.where(d, rem, can)
        ja.remaining[m] = rem - st
        stop = np.zeros(sub.num_entries)
        np.maximum.at(stop, sub.member_entry, u)
        pairs = np.bincount(sub.member_entry, minlength=sub.num_entries)[sub.member_entry] > 1
        ex.paired_seconds += float((u - s0)[pairs].sum())
        for b, s in zip(chosen, stop.tolist()):
            end[list(b.gpus)] = s
            if watch:
                holding.append((b.holder, s))
            if s < L - EPS:
                heapq.heappush(times, s)
        parts.append((chosen, st, s0, u, d, stop - t))
        ex.backfilled += sub.num_entries
        ex.backfill_gpu_seconds += float((sub.sfs * (stop - t)).sum())
    if not parts:
        return None
    ran = with_backfilled(plan, [b for p in parts for b in p[0]])
    return (ran, *(np.concatenate([a] + [p[i] for p in parts]) for i, a in
                   enumerate((steps, start, used, done, occupied), start=1)))
