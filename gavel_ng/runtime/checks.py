"""Numbers and identities from jobs and workers, checked before anything is stored.

A job holds only its own token, yet what it reports (steps, training seconds, a checkpoint
step) becomes progress and the throughput table every job is scheduled by: one non-finite or
absurd value there stops every solve. So each number is bounded by what the scheduler itself
knows: the job's total steps, the attempt's first step and launch time, the throughput table.
A refusal is an InputError naming the field and the value (INVALID_ARGUMENT); nothing is stored.

Bounds (README "Hostile numbers"):
- a measured rate (steps per training second) within RATE_FACTOR (1000x) either way of the
  configured table's rate for the job type on that worker type; job types the table does not
  know: within [MIN_RATE, MAX_RATE] steps/s;
- seconds (training, wall) finite, >= 0 and no more than the attempt's wall time since launch
  plus SLACK_S (10 s) and 5 %;
- steps run in an attempt no more than that wall time at RATE_FACTOR x the table's fastest rate
  for the job type (what the lease could allow);
- a checkpoint step in [0, total steps] and no more than the progress known so far plus what
  the job's earlier attempts could have run at that rate (a checkpoint is written by one of them).

A worker's end-of-attempt report is believed only as far as the job's own calls support it: its
checkpoint step no further than the newest checkpoint the job reported (InitJob, UpdateLease, and
the report GavelIterator makes as it exits), and its steps run no more than the attempt reported
(README "Security": a worker cannot mark a job done that did not run).
"""

from __future__ import annotations

import json
import logging
import math
import time
from dataclasses import replace

from ..errors import InputError
from ..throughputs import UNCONSOLIDATED, ThroughputTable
from .jobs import Attempt, DoneReport, JobState

log = logging.getLogger(__name__)
RATE_FACTOR = 1000.0
MIN_RATE, MAX_RATE = 1e-4, 1e5
SLACK_S, SLACK_FRACTION = 10.0, 0.05
EXIT_CODES = (-255, 255)
MIN_RATE_STEPS = 5          # as measurements.MIN_MEASURED_STEPS: shorter intervals measure no rate


def rate_bounds(base: ThroughputTable, key: tuple[str, int], worker_type: str) -> tuple[float, float]:
    """(lowest, highest) steps/s a job of `key` may measure on `worker_type` (an `_unconsolidated` twin counts
    as its type)."""
    known = base.get(key, worker_type.removesuffix(UNCONSOLIDATED))
    if known > 0 and math.isfinite(known):
        return known / RATE_FACTOR, known * RATE_FACTOR
    return MIN_RATE, MAX_RATE


def plausible_rate(base: ThroughputTable, key: tuple[str, int], worker_type: str, rate: float) -> bool:
    lo, hi = rate_bounds(base, key, worker_type)
    return math.isfinite(rate) and lo <= rate <= hi


def _fastest(base: ThroughputTable, key: tuple[str, int]) -> float:
    rates = [base.get(key, w) for w in base.worker_types]
    known = [r for r in rates if r > 0 and math.isfinite(r)]
    return max(known) * RATE_FACTOR if known else MAX_RATE


def _number(field: str, value, lo: float, hi: float, why: str = "") -> None:
    if not isinstance(value, (int, float)) or not math.isfinite(value):
        raise InputError(field, value, "must be a finite number")
    if not lo <= value <= hi:
        raise InputError(field, value, f"must be in [{lo:g}, {hi:g}]{why}")


def _total(job: JobState) -> int:
    """The most steps a job may report: its total; an adaptive job counts steps at its initial
    batch, and its last optimizer step may pass the total by up to max_batch / init_batch."""
    a = job.spec.adaptive
    return job.spec.steps + (0 if a is None else math.ceil(a.max_batch / a.init_batch))


def _wall(launched: float, now: float) -> float:
    """Seconds an attempt can have run by now, with slack for timers and the network."""
    elapsed = max(now - launched, 0.0)
    return elapsed * (1 + SLACK_FRACTION) + SLACK_S


class Checks:
    """The checks of the service's job and worker calls; each takes the state's lock itself."""

    def __init__(self, state, base: ThroughputTable):
        self.state = state
        self.base = base

    def _live(self, job_id: int, attempt: int) -> tuple[JobState, Attempt | None]:
        job = self.state.jobs[job_id]            # KeyError: NOT_FOUND naming the job
        att = job.live
        return job, (att if att is not None and att.attempt == attempt else None)

    def progress(self, job_id: int, attempt: int, steps: int, compute_seconds: float, checkpoint_step: int = 0,
                 now: float | None = None) -> None:
        """UpdateLease: `steps` (absolute) after `compute_seconds` of training in this attempt, the
        newest checkpoint it committed at `checkpoint_step` (0: none yet)."""
        now = time.time() if now is None else now
        with self.state.lock:
            job, att = self._live(job_id, attempt)
            if att is None:
                return                            # a stale attempt: told to stop, nothing stored
            wall = _wall(att.launched, now)
            _number("compute_seconds", compute_seconds, 0.0, wall, " (the attempt's wall time since launch)")
            _number("steps", steps, att.steps_start, _total(job), " (the attempt's first step .. the job's total)")
            _number("checkpoint_step", checkpoint_step, 0, steps, " (the steps this attempt reports)")
            run = steps - att.steps_start
            if run > _fastest(self.base, job.key) * wall:
                raise InputError("steps", steps, f"{run} steps in {wall:.0f} s is more than the lease allows")
            d_steps, d_secs = run - att.measured_steps, compute_seconds - att.measured_seconds
            if d_steps >= MIN_RATE_STEPS and job.spec.adaptive is None:
                rate = d_steps / d_secs if d_secs > 0 else math.inf
                if not plausible_rate(self.base, job.key, att.worker_type, rate):
                    lo, hi = rate_bounds(self.base, job.key, att.worker_type)
                    raise InputError("compute_seconds", compute_seconds,
                                     f"{d_steps} steps in {d_secs:g} s is {rate:g} steps/s, not within "
                                     f"[{lo:g}, {hi:g}] for {job.spec.job_type} on {att.worker_type}")

    def checkpoint(self, job_id: int, attempt: int, step: int, now: float | None = None) -> None:
        """InitJob: the step of the checkpoint the job restored."""
        now = time.time() if now is None else now
        with self.state.lock:
            job, att = self._live(job_id, attempt)
            if att is None:
                return
            _number("checkpoint_step", step, 0, _total(job), " (the job's total steps)")
            known = max(job.steps_done, job.steps_live)
            fastest = _fastest(self.base, job.key)
        if step <= known:
            return
        # the earlier attempts' times, read without the lock (a query; ended attempts do not change)
        ran = sum((r["ended"] or now) - r["launched"] for r in self.state.store.attempts(job_id)
                  if r["attempt"] != attempt)
        most = known + (fastest * _wall(0.0, ran) if ran > 0 else 0)
        if step > most:
            raise InputError("checkpoint_step", step, f"beyond what the job's earlier attempts could have "
                                                      f"run (at most {most:.0f})")

    def report(self, rep: DoneReport, now: float | None = None) -> None:
        """ReportDone: an attempt the scheduler launched, from a worker of its placement, with sane numbers."""
        now = time.time() if now is None else now
        with self.state.lock:
            job = self.state.jobs[rep.job_id]
            placement, launched = self._placement(job, rep.attempt)
            if rep.worker_id not in {w for w, _ in placement}:
                raise InputError("worker_id", rep.worker_id, f"not a worker of job {rep.job_id} attempt "
                                                             f"{rep.attempt}")
            wall = _wall(launched, now)
            _number("exit_code", rep.exit_code, *EXIT_CODES)
            _number("steps", rep.steps, -1, job.steps_done, f" (-1: unknown, else at most the newest checkpoint job "
                                                            f"{job.job_id} reported itself)")
            att = job.live if job.live is not None and job.live.attempt == rep.attempt else None
            ran = max(job.steps_live - att.steps_start, 0) if att is not None else _total(job)
            _number("steps_run", rep.steps_run, 0, min(ran, _fastest(self.base, job.key) * wall),
                    " (the steps the attempt reported itself, and what the lease allows)")
            _number("compute_seconds", rep.compute_seconds, 0.0, wall, " (the attempt's wall time since launch)")
            _number("wall_seconds", rep.wall_seconds, 0.0, wall, " (the attempt's wall time since launch)")

    def pending(self, worker_id: str, reps: list[DoneReport]) -> list[DoneReport]:
        """A registering worker's unacknowledged reports: those that fail report() are dropped with a warning
        (refusing the registration would keep the worker out for good)."""
        kept = []
        for rep in reps:
            try:
                if rep.worker_id != worker_id:
                    raise InputError("pending.worker_id", rep.worker_id, f"not the registering worker {worker_id}")
                try:
                    self.report(rep)
                except InputError:              # its numbers: the end is still news, without its progress
                    rep = replace(rep, done=False, steps=-1, steps_run=0, compute_seconds=0.0, wall_seconds=0.0)
                    self.report(rep)
                kept.append(rep)
            except (InputError, KeyError) as exc:
                log.warning("worker %s: dropped its report of job %d attempt %d: %s", worker_id, rep.job_id,
                            rep.attempt, exc, extra={"jobs": [rep.job_id]})
        return kept

    def _placement(self, job: JobState, attempt: int) -> tuple[list[tuple[str, int]], float]:
        """The attempt's placement and launch time: the live one, else the store's record (after a restart)."""
        if job.live is not None and job.live.attempt == attempt:
            return job.live.placement, job.live.launched
        row = next((r for r in self.state.store.attempts(job.job_id) if r["attempt"] == attempt), None)
        if row is None:
            raise InputError("attempt", attempt, f"never launched for job {job.job_id} "
                                                 f"(it had {job.attempts} attempts)")
        return [tuple(p) for p in json.loads(row["placement"])], row["launched"]
