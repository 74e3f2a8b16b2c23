"""Simulating with estimated throughputs (Gavel §3.3, Fig 16): the policy sees the estimator.

The executor always advances jobs at their true (table) throughputs; the policy sees
what a `ThroughputEstimator` believes, exactly as on a real cluster:

- a job is profiled when it arrives: the estimator picks a `profile_fraction` of its
  (worker type, reference job) cells, the profile is read off the true table, and the
  rest of the job's row is completed from the reference jobs;
- after every round each entry's steps and seconds flow back as measurements: a job
  that ran alone measures its isolated throughput on that worker type (the
  `_unconsolidated` one when a multi-GPU job ran split), a pair measures both members'
  in-pair throughputs over the time both ran;
- a finished job is forgotten.

`reference_jobs` keeps only that many job types (seeded random choice) as the
estimator's reference jobs; jobs of the other types are new to it and can only be
matched to similar ones. None (the default) keeps every type of the table: a new job
is then profiled against, among others, jobs of its own type.
"""

from __future__ import annotations

import numpy as np

from ..errors import InputError
from ..estimator import EstimatorConfig, Measurement, ThroughputEstimator, profile_from_table
from ..estimator.columns import isolated_columns, pair_table
from ..mechanism import RoundPlan
from ..pairs import PairTable
from ..throughputs import UNCONSOLIDATED, ThroughputTable


class EstimatedThroughputs:
    """A ThroughputSource (gavel_ng.allocator): the estimator's beliefs, by job id."""

    fixed = False          # estimates change as measurements come

    def __init__(self, table: ThroughputTable, jobs, worker_types: list[str], profile_fraction: float = 0.25,
                 reference_jobs: int | None = None, source: str = "completion", seed: int = 0):
        types = table.job_types
        exclude: tuple[str, ...] = ()
        if reference_jobs is not None:
            if not 2 <= reference_jobs <= len(types):
                raise InputError("--reference-jobs", reference_jobs, f"must be between 2 and {len(types)}")
            keep = set(np.random.default_rng([seed, 7]).choice(len(types), reference_jobs, replace=False).tolist())
            exclude = tuple(t for i, t in enumerate(types) if i not in keep)
        self.held_out = exclude
        self.est = ThroughputEstimator(table, EstimatorConfig(profile_fraction=profile_fraction, source=source,
                                                              seed=seed), exclude_types=exclude)
        self.truth = table
        self.jobs = jobs                    # executor.JobArrays (true keys, scale factors)
        self.workers = list(worker_types)
        for w in self.workers:
            if w not in self.est.workers:
                raise InputError("--cluster", w, "worker type unknown to the throughput estimator")
        self.measurements = 0
        self.profiled = 0

    # ----- jobs -------------------------------------------------------------------------
    def sync(self, jobs: list[int]) -> None:
        """Profile jobs the estimator has not seen (on arrival)."""
        ja, est = self.jobs, self.est
        for j in jobs:
            if j not in est.jobs:
                sf = int(ja.sf[j])
                key = ja.key_list[ja.key[j]]
                est.add_job(j, sf, profile_from_table(self.truth, key, est.plan_profile(sf)))
                self.profiled += 1

    # ----- ThroughputSource: the policy's input -------------------------------------------
    def isolated(self, jobs: list[int], columns: list[str]) -> np.ndarray:
        self.sync(jobs)
        return isolated_columns(self.est, jobs, columns)

    def pair_table(self, jobs: list[int], columns: list[str], T: np.ndarray) -> PairTable:
        return pair_table(self.est, jobs, columns, T)

    # ----- measurements -----------------------------------------------------------------
    def on_round(self, plan: RoundPlan, steps: np.ndarray, start: np.ndarray, used: np.ndarray) -> None:
        """Feed back what each entry did this round; forget jobs that finished."""
        if plan.share is not None or plan.num_entries == 0:
            return
        ja, est = self.jobs, self.est
        jobs, e = plan.member_job, plan.member_entry
        seconds = used - start
        split = ~plan.consolidated[e] & (ja.sf[jobs] > 1)
        names = [self.workers[t] + (UNCONSOLIDATED if s else "") for t, s in zip(plan.types[e].tolist(),
                                                                                split.tolist())]
        sizes = np.bincount(e, minlength=plan.num_entries)
        known = est.jobs
        for f in np.flatnonzero(sizes[e] == 1).tolist():
            job = int(jobs[f])
            if job in known and seconds[f] > 0 and steps[f] > 0:
                self.measurements += est.record(Measurement(job, names[f], float(seconds[f]), float(steps[f])))
        if len(e) != plan.num_entries:
            start_of = np.cumsum(sizes) - sizes
            for f in np.flatnonzero(sizes[e] == 2).tolist():
                p = 2 * int(start_of[e[f]]) + 1 - f
                if p < f:
                    continue   # once per pair
                a, b = int(jobs[f]), int(jobs[p])
                t = float(min(seconds[f], seconds[p]))   # both ran at their in-pair rates this long
                if a in known and b in known and t > 0 and steps[f] > 0 and steps[p] > 0:
                    self.measurements += est.record(Measurement(
                        a, names[f], t, float(steps[f]) * t / float(seconds[f]),
                        partner=b, partner_steps=float(steps[p]) * t / float(seconds[p])))
        for job in jobs[ja.remaining[jobs] <= 0].tolist():
            est.remove_job(int(job))
