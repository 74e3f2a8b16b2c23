"""What real runs teach the policy: which intervals measure something, and where it goes.

`Measurements` decides *what* an interval between two progress reports of an attempt
measured: an isolated rate if the job ran alone the whole interval, an in-pair rate if it
shared its GPUs with one partner throughout, nothing if that changed meanwhile. It
persists what it folds in, and replays it after a restart.

`MeasuredThroughputs` is where those rates go and what the policy believes: the
throughput table corrected by measurements (`MeasuredTable`), or, with `"estimator":
true`, the online estimator fed by the same measurements. It is the runtime's
ThroughputSource (gavel_ng.allocator), answering for job ids.
"""

from __future__ import annotations

import logging
import math

import numpy as np

from ..estimator import Measurement, Profile, ThroughputEstimator
from ..estimator.columns import isolated_columns, pair_table
from ..pairs import PairTable
from ..throughputs import UNCONSOLIDATED, JobKey
from .checks import RATE_FACTOR, plausible_rate
from .jobs import FINISHED, Attempt, JobState
from .live import LiveIndex
from .measured import MeasuredTable, sane
from .store import Store

log = logging.getLogger(__name__)
MIN_MEASURED_STEPS = 5


class MeasuredThroughputs:
    fixed = False          # measurements change what the policy believes

    def __init__(self, table: MeasuredTable, estimator: ThroughputEstimator | None = None):
        self.table = table
        self.estimator = estimator
        self.worker_types = list(table.worker_types)
        self.keys: dict[int, JobKey] = {}     # every job ever added (finished ones stay answerable)

    # ----- jobs ------------------------------------------------------------------------------
    def add_job(self, job_id: int, key: JobKey, declared: dict[str, float] | None = None) -> None:
        """A job type of the table starts as that reference job; a new class from its declared rates
        and its neighbours (`declared`: steps/s per worker type its job file gives)."""
        self.keys[job_id] = key
        if declared:
            self.table.declare(key, declared)
        est = self.estimator
        if est is not None and job_id not in est.jobs:
            profile = Profile(isolated=dict(self.table.declared.get(key, {}))) if key in self.table.declared else None
            est.add_job(job_id, key[1], profile=profile, known_key=key)

    def remove_job(self, job_id: int) -> None:
        if self.estimator is not None:
            self.estimator.remove_job(job_id)

    # ----- measurements ----------------------------------------------------------------------
    def record(self, job_id: int, key: JobKey, worker_type: str, seconds: float, steps: float,
               partner: tuple[int, JobKey] | None = None, source: str = "") -> tuple[float, int] | None:
        """Fold in `steps` in `seconds` on `worker_type` (`_unconsolidated` when split), alone or
        next to `partner` (job id, key), as `source` reported it (measured.consensus). Returns the table's new
        isolated (value, samples) to persist, or None when the table's isolated entries did not change (or the
        sample is not a sane rate)."""
        rate = steps / seconds if sane(seconds) else math.nan
        if not (sane(steps) and sane(rate)):      # neither the table nor the estimator takes it
            self.table.refuse(f"{key[0]}|{worker_type}", rate)
            return None
        base, consolidated = worker_type.removesuffix(UNCONSOLIDATED), not worker_type.endswith(UNCONSOLIDATED)
        out = None
        source = source or f"job:{job_id}"
        if partner is None:
            out = self.table.record(key[0], key[1], base, consolidated, steps / seconds, source)
        elif consolidated:
            self.table.record_pair(key, partner[1], base, steps / seconds, source)
        est = self.estimator
        other = partner[0] if partner is not None else None
        if est is not None and job_id in est.jobs and worker_type in est.workers and (
                other is None or other in est.jobs):
            est.record(Measurement(job_id, worker_type, seconds, steps, partner=other))
        return out

    def replay(self, events: list[dict], keys: dict[int, JobKey], sources: dict[int, str] | None = None) -> int:
        """After a restart, from the "measure" events: pair rates, and every sample of the jobs the
        estimator follows (isolated rates per job type and source are in the store's tables)."""
        n = 0
        for e in events:
            d, job_id = e["detail"], e["job_id"]
            partner = d.get("partner")
            followed = self.estimator is not None and job_id in self.estimator.jobs
            if job_id not in keys or (partner is None and not followed) or (
                    partner is not None and partner not in keys):
                continue
            if not (sane(d.get("seconds")) and sane(d.get("steps"))):
                continue                  # an old version's bad sample: the table never takes it
            if partner is None:
                if d["worker_type"] in self.estimator.workers:
                    self.estimator.record(Measurement(job_id, d["worker_type"], d["seconds"], d["steps"]))
            else:
                self.record(job_id, keys[job_id], d["worker_type"], d["seconds"], d["steps"],
                            (partner, keys[partner]), (sources or {}).get(job_id, ""))
            n += 1
        if n:
            log.info("replayed %d throughput measurements", n)
        return n

    # ----- what status shows --------------------------------------------------------------------
    def class_rates(self, keys: list[JobKey], live: dict[JobKey, int]) -> list[tuple[JobKey, list[float], list[str]]]:
        """(class, steps/s per worker type, source per worker type) as the policy believes them; with the
        estimator, as it believes them for `live[key]`, a job of the class it follows."""
        out = []
        est = self.estimator
        for key in keys:
            sources = self.table.sources(key)
            job = live.get(key)
            if est is not None and job is not None and job in est.jobs:
                rates = isolated_columns(est, [job], self.worker_types)[0]
            else:
                rates = self.table.row(key)
            out.append((key, [float(v) for v in rates], [sources[w] for w in self.worker_types]))
        return out

    # ----- ThroughputSource: the policy's input ----------------------------------------------
    def isolated(self, jobs: list[int], columns: list[str]) -> np.ndarray:
        """(jobs, columns) steps/s alone; the columns are the worker types."""
        self._check(columns)
        if self.estimator is not None:
            return isolated_columns(self.estimator, jobs, self.worker_types)
        return self.table.matrix([self.keys[m] for m in jobs])

    def pair_table(self, jobs: list[int], columns: list[str], T: np.ndarray) -> PairTable:
        """Fractions of their isolated rates `T` that jobs keep when sharing a GPU."""
        self._check(columns)
        if self.estimator is not None:
            return pair_table(self.estimator, jobs, self.worker_types, T)
        return self.table.pair_table([self.keys[m] for m in jobs])

    def _check(self, columns: list[str]) -> None:
        if list(columns) != self.worker_types:
            raise ValueError(f"the runtime's throughputs have the worker types as columns, not {columns}")


def source_of(job: JobState) -> str:
    """Whose word a job's speed reports are: its user's (all their jobs count as one source), else its own."""
    user = getattr(job.spec.rules, "user", None)
    return f"user:{user}" if user else f"job:{job.job_id}"


class Measurements:
    """The measurement bookkeeping of live attempts (called with ClusterState's lock held)."""

    def __init__(self, jobs: dict[int, JobState], throughputs: MeasuredThroughputs, store: Store, index: LiveIndex):
        self.jobs = jobs
        self.index = index            # live attempts by GPU: who shares an attempt's GPUs, without a scan
        self.throughputs = throughputs
        self.store = store
        self.implausible = 0          # measured rates far off the table: not recorded (logged once, then counted)

    def restore(self) -> None:
        """Measured rates and the jobs the policy follows, from the store (after a restart)."""
        bad = self.throughputs.table.load(self.store.load_throughputs())
        if bad:
            self.store.delete_throughputs(bad)
        self.throughputs.table.load_sources(self.store.load_rate_sources())
        for job in self.jobs.values():
            if job.status not in FINISHED:
                self.throughputs.add_job(job.job_id, job.key, job.spec.throughputs)
            else:
                self.throughputs.keys[job.job_id] = job.key
                if job.spec.throughputs:
                    self.throughputs.table.declare(job.key, job.spec.throughputs)
        self.throughputs.replay(self.store.events("measure"), {m: j.key for m, j in self.jobs.items()},
                                {m: source_of(j) for m, j in self.jobs.items()})

    def add_job(self, job: JobState) -> None:
        self.throughputs.add_job(job.job_id, job.key, job.spec.throughputs)

    def remove_job(self, job: JobState) -> None:
        self.throughputs.remove_job(job.job_id)

    def progress(self, job: JobState, att: Attempt, steps: int, compute_seconds: float) -> None:
        """The job reports `steps` done after `compute_seconds` of training in this attempt."""
        job.steps_live = max(job.steps_live, int(steps))
        self.measure(job, att, int(steps) - att.steps_start, float(compute_seconds))

    # ----- who shares GPUs with whom ------------------------------------------------------------
    def _neighbours(self, att: Attempt) -> list[Attempt]:
        """Other live attempts on any of att's GPUs."""
        out = [self.jobs[m].live for m in sorted(self.index.on_gpus(att.placement))]
        return [o for o in out if o is not None and o is not att]

    def _sharing_now(self, att: Attempt) -> tuple[int | None, bool]:
        """(the job sharing att's GPUs, or None alone; True if the sharing is not one exact partner)."""
        others = self._neighbours(att)
        if not others:
            return None, False
        if len(others) == 1 and others[0].placement == att.placement:
            return others[0].job_id, False
        return None, True

    def attempt_started(self, att: Attempt) -> None:
        """att already live: who shares GPUs with whom changed for its neighbours. att itself
        counts as sharing with its planned partner from the start (the two are launched
        together; a partner that never comes shows at the next measurement)."""
        for o in self._neighbours(att):
            planned = o.sharing == att.job_id and att.partner == o.job_id and o.placement == att.placement
            o.mixed = o.mixed or not planned
        now_with, now_mixed = self._sharing_now(att)
        att.sharing = att.partner
        att.mixed = now_mixed or now_with not in (None, att.partner)

    def attempt_gone(self, att: Attempt) -> None:
        for o in self._neighbours(att):
            o.mixed = True

    def measure(self, job: JobState, att: Attempt, steps_run: int, seconds: float) -> None:
        """Fold the steps and time since the last measurement of this attempt into what the
        policy sees: an isolated rate if it ran alone the whole interval, an in-pair rate if it
        shared its GPUs with one partner throughout, nothing if that changed meanwhile."""
        d_steps, d_secs = steps_run - att.measured_steps, seconds - att.measured_seconds
        if d_steps < MIN_MEASURED_STEPS or d_secs <= 0 or job.spec.adaptive is not None:
            return              # an adaptive job's rate depends on its batch: it reports its own model
        att.measured_steps, att.measured_seconds = steps_run, seconds
        now_with, now_mixed = self._sharing_now(att)
        valid = not att.mixed and att.sharing == now_with
        with_, att.sharing, att.mixed = att.sharing, now_with, now_mixed
        if not valid:
            return
        if not plausible_rate(self.throughputs.table.base, job.key, att.worker_type, d_steps / d_secs):
            self.implausible += 1
            if self.implausible == 1:
                log.warning("job %d measured %.4g steps/s on %s, not within %gx of the table: not recorded "
                            "(repeats counted in Measurements.implausible)", job.job_id, d_steps / d_secs,
                            att.worker_type, RATE_FACTOR, extra={"jobs": [job.job_id]})
            return
        worker_type = att.worker_type
        if not att.consolidated and job.spec.scale_factor > 1:
            worker_type += UNCONSOLIDATED
        partner = (with_, self.jobs[with_].key) if with_ is not None and with_ in self.jobs else None
        if with_ is not None and partner is None:
            return
        source = source_of(job)
        saved = self.throughputs.record(job.job_id, job.key, worker_type, d_secs, d_steps, partner, source)
        if saved is not None:
            split = worker_type.endswith(UNCONSOLIDATED)
            key4 = (job.key[0], job.key[1], att.worker_type, not split)
            table = self.throughputs.table
            with self.store.transaction():
                self.store.save_throughput(*key4, *saved)
                self.store.save_rate_source(*key4, source, *table.by_source[key4][source])
                self.store.delete_rate_sources(*key4, table.evicted.pop(key4, []))
        self.store.event("measure", job_id=job.job_id, worker_type=worker_type, seconds=d_secs, steps=d_steps,
                         partner=with_)
