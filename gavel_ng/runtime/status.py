"""A cluster's status read from a scheduler's state directory, without the scheduler.

`read_state_dir` answers with the same `ClusterStatus` a running scheduler sends
(`SchedulerClient.status()`), so `gavel-ng status --state` formats both alike; it works
while the scheduler runs, after it stopped or after it crashed.
"""

from __future__ import annotations

import time
from pathlib import Path

from ..protocol.client import AdaptiveStatus, ClassRates, ClusterStatus, JobStatus, WorkerStatus, placement_label
from .records import JobRow, StateReader
from .waiting import NEW


def read_state_dir(state_dir: str | Path, now: float | None = None, job_limit: int | None = None) -> ClusterStatus:
    """Read a scheduler's state directory read-only, in one short read transaction: every job, or with
    `job_limit` the page a live scheduler's status lists (unfinished first). Job counts cover every job.
    Raises store.NotAStateDir when it holds no scheduler state."""
    now = time.time() if now is None else now
    with StateReader(state_dir) as rd, rd.snapshot():
        info = rd.load_cluster_info()
        counts = rd.job_counts()
        jobs = rd.load_jobs() if job_limit is None else rd.job_page(job_limit)
        running = rd.running_attempts()
        workers = rd.load_workers()
        alloc = rd.load_allocation()
        decided = rd.load_round_decision()
        ended = rd.finished_among(sorted({m for r in alloc.rows for m in r} if alloc is not None else set()) +
                                  sorted({e[0] for e in decided.entries} if decided is not None else set()))
        measured = rd.load_throughputs()
        adaptive = {job_id: (report, resizes) for job_id, report, resizes, _ in rd.load_adaptive()}
        meta = {k: int(rd.get_meta(k, "0")) for k in ("round", "renewals", "launches")}
        classes = [ClassRates(c.job_type, c.scale_factor, c.rates, c.sources)
                   for c in rd.load_classes(job_keys(j for j in jobs if j.status not in ("done", "cancelled",
                                                                                        "failed")))]
    live = {a.job_id: a for a in running}
    types = info.worker_types if info is not None else alloc.worker_types if alloc is not None else \
        list(dict.fromkeys(w.gpu_type for w in workers))
    ws = [WorkerStatus(w.worker_id, w.address, w.gpu_type, w.gpus, w.alive, max(0.0, now - w.last_seen),
                       tuple(sorted(a.job_id for a in running if any(x == w.worker_id for x, _ in a.placement))))
          for w in workers]
    js = [_job_status(j, live.get(j.job_id), adaptive.get(j.job_id, (None, 0))) for j in jobs]
    shares = [] if alloc is None else [         # without finished (e.g. cancelled) jobs' rows, as a scheduler shows
        (tuple(r), {w: x[k] for k, w in enumerate(alloc.worker_types)}) for r, x in zip(alloc.rows, alloc.shares)
        if not ended.intersection(r)]
    thr = {f"{t}|{sf}|{w}": v for t, sf, w, cons, v, _ in sorted(measured) if cons}
    # a round policy's decision (none stored yet: an empty one), without finished jobs as a scheduler shows it
    decision = [e for e in decided.entries if e[0] not in ended] if decided is not None else \
        [] if info is not None and info.round_policy else None
    return ClusterStatus(ws, js, shares, list(types), info.policy if info is not None else "?", meta["round"],
                         info.round_seconds if info is not None else 0.0, None, meta["renewals"], meta["launches"],
                         thr, source=str(state_dir), job_counts=counts, decision=decision, classes=classes, now=now)


def _job_status(r: JobRow, live, adaptive: tuple[dict | None, int]) -> JobStatus:
    """A stored job: progress as last recorded (a checkpoint, a renewal, a cancel); `live`: its running
    attempt, if any; a queued job's reason as the scheduler last decided it."""
    s = r.spec
    placement = placement_label(live.worker_type, live.placement) if live is not None else ""
    ada = AdaptiveStatus.from_report(adaptive[1], adaptive[0]) if s.adaptive is not None else None
    reason = (r.reason or NEW) if r.status == "queued" else ""
    return JobStatus(r.job_id, s.name, s.job_type, s.scale_factor, r.status, r.steps_done, s.steps,
                     max(r.steps_live, r.steps_done), r.attempts, r.renewals, placement, ada,
                     getattr(s.rules, "entity", None), len(live.placement) if live is not None else 0, reason,
                     r.submitted, r.first_start, r.finished, r.preemptions, dict(r.gpu_seconds), r.error,
                     getattr(s.rules, "user", None))


def job_keys(jobs) -> list[tuple[str, int]]:
    """The distinct (class, scale factor) of some jobs (rows or states), in order."""
    return list(dict.fromkeys((j.spec.job_type, j.spec.scale_factor) for j in jobs))
