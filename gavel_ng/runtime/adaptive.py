"""Adaptive jobs on the cluster: their reports, and their resizes.

An adaptive job's iterator sends an `AdaptiveReport` with each lease renewal (where it
ran, its batch, gradient noise scale and fitted throughput model; gavel_ng.iterator.adaptive).
The scheduler keeps the last one per job in the state store, so a restarted scheduler
schedules by what the job measured rather than by its modeled profile, and shows it in
`status`. A launch on another (worker type, GPU count) than the job's previous one is a
*resize* (checkpoint-restart): counted per job, and an event in the store.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

from ..errors import InputError
from ..protocol.reports import decode_report, encode_report
from .jobs import JobState
from .store import Store

PARAMS = 7     # Pollux's (alpha_grad, beta_grad, alpha_local, beta_local, alpha_node, beta_node, gamma)


@dataclass(frozen=True)
class AdaptiveReport:
    """One report of an adaptive job (the protocol's AdaptiveReport, checked)."""

    worker_type: str
    gpus: int
    servers: int
    batch: int
    local_batch: int
    accumulation: int
    phi: float | None              # None: not measured yet
    goodput: float | None          # None: no fit yet
    params: tuple[float, ...] | None
    fit_error: float
    max_local_batch: int
    reported: float

    @classmethod
    def from_proto(cls, m, worker_type: str, now: float) -> AdaptiveReport:
        """InputError naming `report.<field>` for values no training job can report."""
        d = decode_report(m)
        for name in ("gpus", "servers", "batch", "local_batch", "max_local_batch"):
            if d[name] < 1:
                raise InputError(f"report.{name}", d[name], "must be >= 1")
        if d["accumulation"] < 0:
            raise InputError("report.accumulation", d["accumulation"], "must be >= 0")
        for name in ("phi", "goodput", "fit_error"):
            if not math.isfinite(getattr(m, name)):
                raise InputError(f"report.{name}", getattr(m, name), "must be finite")
        params = d["params"]
        if params and (len(params) != PARAMS or not all(math.isfinite(v) and v >= 0 for v in params)
                       or not 1.0 <= params[-1] <= 10.0):
            raise InputError("report.params", list(params), f"must be {PARAMS} finite numbers >= 0, gamma in [1, 10]")
        return cls(**{**d, "worker_type": worker_type, "reported": now})

    def to_proto(self):
        return encode_report(self.to_dict())

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict) -> AdaptiveReport:
        params = d.get("params")
        return cls(**{**d, "params": tuple(params) if params else None})


def record_report(store: Store, job: JobState, report: AdaptiveReport) -> None:
    """Keep a job's latest report (lock held)."""
    store.save_adaptive(job.job_id, report.to_dict(), job.resizes, job.last_config)
    job.report = report


def note_launch(store: Store, job: JobState, worker_type: str, gpus: int, round_no: int) -> None:
    """An adaptive job launches on (worker_type, gpus): a resize when that is not where it last ran (lock held)."""
    config = (worker_type, int(gpus))
    resized = job.last_config is not None and job.last_config != config
    resizes = job.resizes + int(resized)
    with store.transaction():
        if resized:
            store.event("resize", job_id=job.job_id, round_no=round_no, steps=job.steps_done,
                        before=list(job.last_config), after=list(config), resizes=resizes)
        store.save_adaptive(job.job_id, job.report.to_dict() if job.report is not None else None, resizes, config)
    job.resizes, job.last_config = resizes, config


def restore_adaptive(store: Store, jobs: dict[int, JobState]) -> None:
    """Reports, resize counts and last configurations from the store (after a restart)."""
    for job_id, report, resizes, last in store.load_adaptive():
        job = jobs.get(job_id)
        if job is None:
            continue
        job.report = AdaptiveReport.from_dict(report) if report else None
        job.resizes = resizes
        job.last_config = last
