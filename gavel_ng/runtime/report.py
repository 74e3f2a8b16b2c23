"""The paper's metrics for the jobs of a cluster, read from its state directory (`gavel-ng report`).

Per job, as the scheduler kept them (runtime.jobs): submission, first start, end, job
completion time (end - submission), queueing delay (first start - submission), attempts,
preemptions, GPU-hours by worker type and their cost at the configured prices. Per user or
per entity: counts, mean and median JCT and queueing delay of the jobs done, GPU-hours and
cost. Jobs are selected as Slurm's sacct does with -S/-E: those whose life (submission to end,
or to now) overlaps the window.

`read_audit` lists who did what: every submission, cancellation, credential change and worker
registration with its actor (admin, user:NAME, worker:NAME), from the events the scheduler keeps.

Reads the state read-only (records.StateReader), so it works beside a running scheduler, after
it stopped or crashed; a job still running counts its attempts' GPU time up to its last ended
attempt (the running one is not in the state until it ends).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from .records import JobRow, StateReader

FINISHED = ("done", "cancelled", "failed")
HOUR = 3600.0
# what a principal does (events of these kinds carry its actor); the rest is the scheduler's own doing
AUDITED = ("submit", "cancelled", "user_add", "user_grant", "user_revoke", "worker_up")


@dataclass(frozen=True)
class AuditEntry:
    ts: float
    actor: str          # admin, user:NAME, worker:NAME ("" in a state written before actors were kept)
    action: str         # an AUDITED event kind
    job_id: int | None
    worker_id: str | None
    detail: dict


@dataclass(frozen=True)
class JobMetrics:
    job_id: int
    name: str
    job_class: str
    scale_factor: int
    user: str
    entity: str
    status: str
    submitted: float
    first_start: float | None
    ended: float | None
    jct: float | None                 # seconds, jobs that ended
    queueing_delay: float | None      # seconds, jobs that started
    attempts: int
    preemptions: int
    steps_done: int
    steps: int
    gpu_hours: dict[str, float]       # by worker type
    cost: float | None                # $; None when it used a type without a price

    @property
    def gpu_hours_total(self) -> float:
        return sum(self.gpu_hours.values())


@dataclass(frozen=True)
class GroupMetrics:
    """One user's or entity's jobs in the window."""

    group: str
    jobs: int
    done: int
    failed: int
    cancelled: int
    mean_jct: float | None            # seconds, over its jobs done
    median_jct: float | None
    mean_queueing_delay: float | None   # over its jobs that started
    gpu_hours: dict[str, float] = field(default_factory=dict)
    cost: float | None = None


@dataclass(frozen=True)
class Report:
    policy: str
    worker_types: list[str]
    since: float | None
    until: float | None
    jobs: list[JobMetrics]

    def done_jcts(self) -> np.ndarray:
        """JCTs (seconds) of the jobs done, what the simulator's JCT CDF plots."""
        return np.array([j.jct for j in self.jobs if j.status == "done" and j.jct is not None], float)

    def groups(self, by: str) -> list[GroupMetrics]:
        """Per `user` or `entity` ('-' for jobs that name none)."""
        names: dict[str, list[JobMetrics]] = {}
        for j in self.jobs:
            names.setdefault(getattr(j, by) or "-", []).append(j)
        return [_group(name, js, self.worker_types) for name, js in sorted(names.items())]


def read_report(state_dir: str | Path, since: float | None = None, until: float | None = None,
                now: float | None = None) -> Report:
    """The metrics of the jobs whose life overlaps [since, until) (either bound None: open)."""
    now = time.time() if now is None else now
    with StateReader(state_dir) as rd, rd.snapshot():
        info = rd.load_cluster_info()
        where = "submitted < ?" if until is not None else "1"
        args: tuple = (until,) if until is not None else ()
        if since is not None:
            where += " AND (finished IS NULL OR finished >= ?)"
            args += (since,)
        rows = rd.load_jobs(where + " ORDER BY job_id", args)
    prices = (info.prices or {}) if info is not None else {}
    types = list(info.worker_types) if info is not None else sorted({w for r in rows for w in r.gpu_seconds})
    return Report(info.policy if info is not None else "?", types, since, until,
                  [job_metrics(r, prices) for r in rows])


def read_audit(state_dir: str | Path, since: float | None = None, until: float | None = None) -> list[AuditEntry]:
    """Who did what in [since, until): the AUDITED events, oldest first."""
    with StateReader(state_dir) as rd:
        rows = rd.audit_events(AUDITED, since, until)
    return [AuditEntry(e["ts"], e.get("actor") or "", e["kind"], e["job_id"], e["worker_id"], e["detail"])
            for e in rows]


def job_metrics(r: JobRow, prices: dict[str, float]) -> JobMetrics:
    hours = {w: s / HOUR for w, s in r.gpu_seconds.items() if s > 0}
    cost = None if any(w not in prices for w in hours) else sum(h * prices[w] for w, h in hours.items())
    rules = r.spec.rules
    return JobMetrics(r.job_id, r.spec.name, r.spec.job_type, r.spec.scale_factor, getattr(rules, "user", None) or "",
                      getattr(rules, "entity", None) or "", r.status, r.submitted, r.first_start, r.finished, r.jct,
                      r.queueing_delay, r.attempts, r.preemptions, r.steps_done, r.spec.steps, hours, cost)


def _group(name: str, js: list[JobMetrics], types: list[str]) -> GroupMetrics:
    jct = np.array([j.jct for j in js if j.status == "done" and j.jct is not None], float)
    wait = np.array([j.queueing_delay for j in js if j.queueing_delay is not None], float)
    hours = {w: sum(j.gpu_hours.get(w, 0.0) for j in js) for w in types}
    costs = [j.cost for j in js]
    return GroupMetrics(name, len(js), sum(j.status == "done" for j in js), sum(j.status == "failed" for j in js),
                        sum(j.status == "cancelled" for j in js), float(jct.mean()) if len(jct) else None,
                        float(np.median(jct)) if len(jct) else None, float(wait.mean()) if len(wait) else None,
                        {w: h for w, h in hours.items() if h > 0},
                        None if any(c is None for c in costs) else float(sum(costs)))
