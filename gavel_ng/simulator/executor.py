"""The simulated executor: runs a round's plan against a simulated clock.

A scheduled job runs min(throughput x round, remaining) steps and finishes mid-round
when it is done; a multi-GPU job split across servers runs at its unconsolidated
throughput when the table has one. All per-round work is numpy over the round's entries.

Space sharing: an entry with two jobs holds its GPUs once, and each member advances at
its in-pair throughput (the table's pair entry; the `_unconsolidated` pair entry when a
multi-GPU pair ends up split over servers). When one member finishes mid-round the other
runs alone from then, at its isolated rate: the GPU is its own once the process beside it
exits, on a cluster as here (the paced jobs of experiments/sim_vs_cluster.py speed up so;
under --gavel-compat it keeps its in-pair rate to the round's end, as Gavel's simulator). The
entry holds its GPUs until both are done (or the round ends). Throughputs are always
the true (table) ones; what the policy believed is the allocator's business.

Adaptive jobs (those a round policy runs adaptive, simulator.adaptive) progress by their
goodput model instead: a round with any of them runs its fixed entries as above and its
adaptive ones through `AdaptiveRunner` (re-allocation delay, exact progress).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..allocator import PolicyJobs
from ..mechanism import RoundPlan, RoundResult
from ..mechanism.core import without_entries
from ..rules.model import entities_of
from ..throughputs import UNCONSOLIDATED, ThroughputTable
from ..traces import Trace
from .adaptive import AdaptiveModels, AdaptiveRunner
from .backfill import backfill_round
from .restarts import RestartLedger

_NONE = np.zeros(0, np.int64)   # no job finished


@dataclass
class JobArrays:
    """Per-job state by job id; grows as a lazily generated trace grows."""

    key: np.ndarray          # index into the throughput key list
    sf: np.ndarray
    weight: np.ndarray
    steps: np.ndarray
    remaining: np.ndarray
    arrival: np.ndarray
    slo: np.ndarray
    finish: np.ndarray       # nan until done
    active_integral: np.ndarray   # time integral of the active-job count when admitted
    admitted_at: np.ndarray
    avg_active: np.ndarray        # average number of active jobs while the job was active
    T: np.ndarray            # (keys, J) consolidated steps/s
    Tu: np.ndarray           # (keys, J) unconsolidated steps/s, nan where unmeasured
    key_list: list
    P: np.ndarray | None = None    # (keys, keys, J) steps/s of a job sharing a GPU with another; 0 = cannot
    Pu: np.ndarray | None = None   # the same for a multi-GPU pair split over servers, nan where unmeasured
    cost: np.ndarray = field(default_factory=lambda: np.zeros(0))   # $ charged to each job so far
    rules: list = field(default_factory=list)   # per job JobRules or None (gavel_ng.rules); empty: none at all
    models: AdaptiveModels | None = None        # goodput models of a trace's adaptive jobs (None: all fixed)
    adaptive: np.ndarray = field(default_factory=lambda: np.zeros(0, bool))   # the job adapts (else fixed)
    specs: list = field(default_factory=list)   # its AdaptiveSpec (None: fixed)
    progress: np.ndarray = field(default_factory=lambda: np.zeros(0))         # adaptive: fraction of work done
    work: np.ndarray = field(default_factory=lambda: np.zeros(0))             # adaptive: M0-equivalent examples
    reallocations: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))   # configuration changes
    gpu_seconds: np.ndarray = field(default_factory=lambda: np.zeros(0))      # GPU-seconds held (a pair's split)
    batch: np.ndarray = field(default_factory=lambda: np.zeros(0))            # adaptive: total batch last run (0: none)
    restart: np.ndarray = field(default_factory=lambda: np.zeros(0))          # its set's restart seconds (nan: flat)

    @classmethod
    def empty(cls, table: ThroughputTable, worker_types: list[str], models: AdaptiveModels | None = None) -> JobArrays:
        keys = table.job_keys
        Tu = np.full((len(keys), len(worker_types)), np.nan)
        for i, k in enumerate(keys):
            for j, w in enumerate(worker_types):
                u = table.get_unconsolidated(k, w)
                if u is not None:
                    Tu[i, j] = u
        z = np.zeros(0)
        return cls(np.zeros(0, np.int64), np.zeros(0, np.int64), z, z, z, z, z, z, z, z, z,
                   table.matrix(keys, worker_types), Tu, keys, models=models)

    @property
    def any_adaptive(self) -> bool:
        return self.models is not None and self.models.any

    @property
    def measured_restarts(self) -> bool:
        """Whether the trace's profile set gives its jobs their own restart delays (`AdaptiveModels.restart`)."""
        return self.models is not None and self.models.restart is not None and \
            bool(np.isfinite(self.models.restart).any())

    def add_pairs(self, table: ThroughputTable, worker_types: list[str]) -> None:
        """Pair throughputs as dense arrays (once per simulation: a lookup per round is an index)."""
        index = {k: i for i, k in enumerate(self.key_list)}
        K, J = len(self.key_list), len(worker_types)
        self.P = np.zeros((K, K, J))
        self.Pu = np.full((K, K, J), np.nan)
        for out, suffix in ((self.P, ""), (self.Pu, UNCONSOLIDATED)):
            for j, w in enumerate(worker_types):
                for key, per in table.pairs.get(w + suffix, {}).items():
                    a = index.get(key)
                    if a is None:
                        continue
                    for other, (mine, theirs) in per.items():
                        b = index.get(other)
                        if b is None:
                            continue
                        out[a, b, j] = mine
                        if other not in table.pairs[w + suffix] or key not in table.pairs[w + suffix][other]:
                            out[b, a, j] = theirs      # only one side measured

    def append(self, trace: Trace, start: int) -> None:
        index = {k: i for i, k in enumerate(self.key_list)}
        new = slice(start, len(trace))
        keys = np.array([index[(t, int(s))] for t, s in zip(trace.job_types[new], trace.scale_factors[new])],
                        dtype=np.int64)
        n = len(keys)
        self.key = np.concatenate([self.key, keys])
        self.sf = np.concatenate([self.sf, trace.scale_factors[new]])
        self.weight = np.concatenate([self.weight, trace.weights[new]])
        self.steps = np.concatenate([self.steps, trace.steps[new]])
        self.remaining = np.concatenate([self.remaining, trace.steps[new]])
        self.arrival = np.concatenate([self.arrival, trace.arrivals[new]])
        self.slo = np.concatenate([self.slo, trace.slo_s[new]])
        self.finish = np.concatenate([self.finish, np.full(n, np.nan)])
        self.active_integral = np.concatenate([self.active_integral, np.zeros(n)])
        self.admitted_at = np.concatenate([self.admitted_at, np.full(n, np.nan)])
        self.avg_active = np.concatenate([self.avg_active, np.full(n, np.nan)])
        self.cost = np.concatenate([self.cost, np.zeros(n)])
        m = self.models
        self.adaptive = np.concatenate([self.adaptive, m.adaptive[new] if m is not None else np.zeros(n, bool)])
        self.specs += [m.specs[i] if m is not None and m.adaptive[i] else None for i in range(start, len(trace))]
        self.work = np.concatenate([self.work, m.work[new] if m is not None else np.zeros(n)])
        self.progress = np.concatenate([self.progress, np.zeros(n)])
        self.reallocations = np.concatenate([self.reallocations, np.zeros(n, np.int64)])
        self.gpu_seconds = np.concatenate([self.gpu_seconds, np.zeros(n)])
        self.batch = np.concatenate([self.batch, np.zeros(n)])
        own = m.restart[new] if m is not None and m.restart is not None else np.full(n, np.nan)
        self.restart = np.concatenate([self.restart, own])
        if trace.rules or self.rules:
            self.rules = (self.rules or [None] * start) + [trace.rules_of(i) for i in range(start, len(trace))]

    def __len__(self) -> int:
        return len(self.key)

    def policy_jobs(self, jobs: list[int]) -> PolicyJobs:
        """The policy's data about these jobs (JobSource of gavel_ng.allocator)."""
        idx = np.asarray(jobs, dtype=np.int64)
        return PolicyJobs(list(jobs), self.sf[idx].astype(float), self.weight[idx], self.remaining[idx],
                          self.steps[idx], self.arrival[idx], self.slo[idx],
                          [self.rules[m] for m in jobs] if self.rules else None,
                          entities_of(self.rules[m] for m in jobs) if self.rules else None)

    def rules_of(self, job: int):
        """The job's JobRules, or None."""
        return self.rules[job] if self.rules else None


class SimExecutor:
    """Simulated clock, admission from a trace, and per-round execution.

    Cost: an entry pays its GPUs' price for the seconds it holds them (`occupied`: from the
    round's start, restore overhead included, until its last member is done or the round
    ends), as an elastic cloud deployment would; idle GPUs cost nothing. Its members share
    that charge equally (a pair pays for its GPU once) in `jobs.cost`, so that a run's cost
    can be taken over the jobs it measures. `prices` is $/GPU-hour per type, nan where
    unknown (the jobs that ran there get a nan cost)."""

    def __init__(self, jobs: JobArrays, source, round_seconds: float, num_types: int,
                 preemption_overhead: float = 0.0, integer_steps: bool = False, col_pool=None, prices=None, *,
                 restarts: RestartLedger | None = None, adaptive: AdaptiveRunner | None = None,
                 on_round=None, on_finish=None, arrivals=None, plan_lead: float = 0.0,
                 start_overhead: float | None = None):
        self.jobs = jobs
        self.source = source          # callable(n) -> Trace with at least n jobs, or None when exhausted
        self.L = float(round_seconds)
        self._whole_round = self.L.is_integer() and self.L < 2.0 ** 20   # n x L is then exact up to 2^33 entries
        self.J = num_types
        self.overhead = float(preemption_overhead)
        # a mid-round start on free GPUs (backfill): no job is vacating them (None: the same as any launch)
        self.start_overhead = self.overhead if start_overhead is None else float(start_overhead)
        self.integer_steps = integer_steps
        # allocation columns -> types, for fluid (ideal) plans over placement-sensitive columns
        self.col_pool = None if col_pool is None else np.asarray(col_pool, dtype=np.int64)
        self.on_round = on_round             # callback(plan, steps, start, used) per member, after a round
        self.on_finish = on_finish           # callback(array of job ids) as jobs finish or are refused
        self.restarts = restarts             # jobs pay their set's restart delays (simulator.restarts)
        self.adaptive = adaptive             # runs adaptive entries (a trace with adaptive jobs)
        self.paired_seconds = 0.0            # job-seconds run sharing a GPU
        self.run_seconds = 0.0               # job-seconds run
        self.backfilled = 0                  # entries started mid-round on freed GPUs (simulator.backfill)
        self.backfill_gpu_seconds = 0.0      # GPU-seconds they held
        self.clock = 0.0
        self.order = np.zeros(0, np.int64)   # admission order (by arrival, stable)
        self.next_pos = 0
        self._due = -np.inf                  # arrival time of order[next_pos] once admit() looked (-inf: look)
        self.unfinished = 0
        self.integral = 0.0                  # time integral of the number of admitted, unfinished jobs
        self.busy = np.zeros(num_types)      # GPU-seconds used per type
        self.prices = np.full(num_types, np.nan) if prices is None else np.asarray(prices, dtype=float)
        self.finished_total = 0
        self.refused: dict[int, str] = {}    # job -> why admission refused it (gavel_ng.rules.admission)
        # (job ids, plan) -> Waitlist of jobs no allocation knows (AllocationPlanner.arrivals): mid-round arrivals
        # start on idle GPUs, as on a cluster (simulator.backfill); None: they wait for the next round
        self.arrivals = arrivals
        self._early: set[int] = set()        # jobs started that way, not admitted yet
        self.freed_at_start = False          # this round's plan lost entries already done: GPUs free from its start
        # the next round is planned `lead` s before the boundary (mechanism.plan_lead), as a cluster plans it:
        # the plan knows the arrivals and completions up to then, later ones a round late (0: at the boundary)
        self.lead = min(float(plan_lead), self.L)
        self._lagged = False                 # this round's plan was made `lead` s before it began (one ran)
        self.unreported = np.zeros(0, np.int64)   # done in the last `lead` s of the round: the next plan still has them

    def now(self) -> float:
        return self.clock

    # ----- admission -------------------------------------------------------------------
    def _upcoming(self) -> int | None:
        if self.next_pos >= len(self.order):
            if not self._grow():
                return None
        return int(self.order[self.next_pos])

    def _grow(self) -> bool:
        before = len(self.jobs)
        trace = self.source(before + 1) if self.source is not None else None
        if trace is None or len(trace) <= before:
            return False
        self.jobs.append(trace, before)
        rest = np.arange(before, len(trace))
        self.order = np.concatenate([self.order[self.next_pos:], rest[np.argsort(trace.arrivals[before:],
                                                                                  kind="stable")]])
        self.next_pos = 0
        return True

    def _seen(self) -> float:
        """Arrivals up to this time are known to the plan of the round that starts now."""
        return self.clock - self.lead if self._lagged else self.clock

    def admit(self) -> list[int]:
        seen = self._seen()
        if self._due > seen:   # the next arrival, as the last call found it: most rounds admit no one
            return []
        out = []
        while True:
            job = self._upcoming()
            if job is None:
                self._due = -np.inf   # (asked again next round)
                break
            due = float(self.jobs.arrival[job])
            if due > seen:
                self._due = due
                break
            out.append(job)
            self.next_pos += 1
        if out and self._early:     # started mid-round on arrival: counted then; one already done is no news
            fresh = [m for m in out if m not in self._early]
            keep = [m for m in out if m not in self._early or self.jobs.finish[m] != self.jobs.finish[m]]
            self._early.difference_update(out)
            out = keep
        else:
            fresh = out
        if fresh:
            self.jobs.active_integral[fresh] = self.integral
            self.jobs.admitted_at[fresh] = self.clock
            self.unfinished += len(fresh)
        return out

    def arriving(self) -> list[tuple[int, float]]:
        """(job, seconds into the round) of the jobs arriving during the round that starts now, in arrival
        order, when mid-round arrivals may start (`arrivals`); admits none."""
        if self.arrivals is None:
            return []
        out, i, end, seen = [], 0, self.clock + self.L, self._seen()
        while True:
            if self.next_pos + i >= len(self.order):
                if not self._grow():
                    break
            job = int(self.order[self.next_pos + i])
            due = float(self.jobs.arrival[job])
            if due >= end:
                break
            if due > seen:          # (one the plan did not know yet: from the round's start)
                out.append((job, max(due - self.clock, 0.0)))
            i += 1
        return out

    def admit_early(self, jobs: list[int], t: float) -> None:
        """Jobs that start `t` s into the round on their arrival: active from then (admit() returns them at
        the next round, unless already done, as the runtime's next plan admits a backfilled arrival)."""
        if jobs:
            self.jobs.active_integral[jobs] = self.integral + self.unfinished * t
            self.jobs.admitted_at[jobs] = self.clock + t
            self.unfinished += len(jobs)
            self._early.update(jobs)

    def next_arrival(self) -> float | None:
        job = self._upcoming()
        return None if job is None else float(self.jobs.arrival[job])

    def refuse(self, job: int, reason: str) -> None:
        """Admission refused an arrived job: it never runs, and counts as settled."""
        self.refused[job] = reason
        self.unfinished -= 1
        if self.on_finish is not None:
            self.on_finish(np.array([job]))

    # ----- execution -------------------------------------------------------------------
    def execute(self, plan: RoundPlan) -> RoundResult:
        """One round of `plan`. Entries whose jobs are all done already (`unreported`: after the plan was made)
        run nothing: the round runs without them, their GPUs free from its start (backfill may use them), and
        the result's plan is the round as it ran."""
        drop = self._stale_entries(plan)
        if drop is None:
            return self._execute(plan)
        plan = without_entries(plan, drop)
        self.freed_at_start = True
        try:
            result = self._execute(plan)
        finally:
            self.freed_at_start = False
        if result.plan is None:
            result.plan = plan
        return result

    def _stale_entries(self, plan: RoundPlan) -> np.ndarray | None:
        """Per entry: every member is done already (`unreported`); None when no entry is."""
        stale = self._stale(plan.member_job) if plan.num_entries else None
        if stale is None:
            return None
        whole = np.bincount(plan.member_entry, weights=stale, minlength=plan.num_entries) == \
            np.bincount(plan.member_entry, minlength=plan.num_entries)
        return whole if whole.any() else None

    def _execute(self, plan: RoundPlan) -> RoundResult:
        if plan.num_entries == 0:
            if self.adaptive is not None:
                self.adaptive.idle()
            if self.restarts is not None:
                self.restarts.end_round()
            return self._idle()
        if self.adaptive is not None:
            return self._execute_mixed(plan)
        if plan.share is None and self.overhead <= 0 and not self.integer_steps \
                and len(plan.member_entry) == plan.num_entries and self.restarts is None:
            return self._execute_plain(plan)
        ja, L = self.jobs, self.L
        jobs, e = plan.member_job, plan.member_entry
        thr, rate_share = self._throughputs(plan)
        inv = None
        run = L   # seconds each member runs: the whole round unless it restarts at a cost
        from_start = True   # every member starts with the round (start is all 0)
        if plan.share is not None:
            if len(e) != plan.num_entries:   # fluid: a job progresses in all its rows (alone, in pairs) at once
                jobs, inv = np.unique(jobs, return_inverse=True)
                rate_share = np.bincount(inv, weights=rate_share, minlength=len(jobs))
            rem = ja.remaining[jobs]
            start = np.zeros(len(jobs))
            rate = rate_share
        elif self.restarts is not None:
            rem = ja.remaining[jobs]
            start = self._restarts(plan, np.arange(len(e)))
            rate = thr
            run = L - start
            from_start = False
        elif self.overhead > 0:
            rem = ja.remaining[jobs]
            renewed = plan.renewed if len(e) == plan.num_entries else plan.renewed[e]
            start = np.where(renewed, 0.0, min(self.overhead, L))
            rate = thr
            run = L - start
            from_start = False
        else:   # restarts cost nothing (the default)
            rem = ja.remaining[jobs]
            start = np.zeros(len(jobs))
            rate = thr
        if self.integer_steps:
            can = np.floor(rate * run)
        else:
            can = rate * run
        done = rem <= can
        any_done = done.any()
        if any_done:   # (a member that cannot run finishes nothing)
            done &= rate > 0
            any_done = done.any()
        if any_done:
            steps = np.where(done, rem, can)
            with np.errstate(divide="ignore", invalid="ignore"):
                used = np.where(done, start + rem / np.where(rate > 0, rate, 1.0), L)
        else:   # most rounds: no job finishes, each holds its GPUs all round
            steps, used = can, np.full(len(rem), L)
        if any_done and inv is None and len(e) != plan.num_entries and not self.integer_steps:
            self._alone_after_partner(plan, start, rem, rate, steps, used, done)
        stale = self._stale(jobs)
        if stale is not None:
            steps, used, start = np.where(stale, 0.0, steps), np.where(stale, 0.0, used), np.where(stale, 0.0, start)
            done, any_done = done | stale, True
        ja.remaining[jobs] = rem - steps
        if len(e) == plan.num_entries:
            occupied = used
        elif inv is not None:
            occupied = np.zeros(plan.num_entries)
            np.maximum.at(occupied, e, used[inv])
        else:
            if len(np.unique(jobs)) != len(jobs):
                raise RuntimeError("a job appears in two entries of one round")
            occupied = np.zeros(plan.num_entries)
            np.maximum.at(occupied, e, used)
            ran = used - start
            if not self.integer_steps:    # shared only while the partner runs (_alone_after_partner)
                f, p = self._partners(plan)
                ran[f] = np.maximum(np.minimum(used[f], used[p]) - start[f], 0.0)
            self.paired_seconds += float(ran[np.bincount(e, minlength=plan.num_entries)[e] > 1].sum())
        as_run = None
        if plan.waiting is not None and plan.share is None and (any_done and occupied.min(initial=L) < L
                                                                or self.freed_at_start or self._arrive_mid_round()):
            as_run = backfill_round(self, plan, steps, start, used, done, occupied)   # freed GPUs, rest of round
            if as_run is not None:
                plan, steps, start, used, done, occupied = as_run
                jobs = plan.member_job
        self.run_seconds += float(used.sum() if from_start and as_run is None else (used - start).sum())
        if self.on_round is not None:
            self.on_round(plan, steps, start, used)     # per member (per job for fluid plans)
        if plan.share is not None:
            per_col = (plan.sfs * occupied)[:, None] * plan.share          # (E, columns) GPU-seconds
            by_col = per_col.sum(axis=0)
            self.busy += by_col if self.col_pool is None else np.bincount(self.col_pool, by_col, minlength=self.J)
            col_price = self.prices if self.col_pool is None else self.prices[self.col_pool]
            charge = (per_col * col_price[None, :]).sum(axis=1) / 3600.0
            gpu_seconds = per_col.sum(axis=1)
        else:
            gpu_seconds = plan.sfs * occupied
            self.busy += np.bincount(plan.types, weights=gpu_seconds, minlength=self.J)
            charge = gpu_seconds * self.prices[plan.types] / 3600.0
        self._charge(plan, charge, gpu_seconds)
        if self.restarts is not None:
            self.restarts.end_round()
        if any_done or as_run is not None:
            result = self._settle(occupied, jobs[done], used[done])   # a job runs at most once a round
        else:
            result = self._settle(occupied, _NONE, _NONE)
        if as_run is not None:
            result.plan = plan
        return result

    def _execute_plain(self, plan: RoundPlan) -> RoundResult:
        """execute() for the common round: one job per entry, every member from the round's start
        (restarts free), fractional steps, no fluid shares. The same arithmetic in fewer array passes:
        most such rounds end with no job done, and all but the few with a job done stop there."""
        ja, L = self.jobs, self.L
        jobs = plan.member_job
        n = len(jobs)
        if np.count_nonzero(plan.consolidated) == n:   # (most rounds: nothing split over servers)
            rate = ja.T[ja.key[jobs], plan.types]
        else:
            rate = self._throughputs(plan)[0]
        rem = ja.remaining[jobs]
        can = rate * L
        done = rem <= can
        any_done = bool(np.count_nonzero(done))
        if any_done:   # (a member that cannot run finishes nothing)
            done &= rate > 0
            any_done = bool(np.count_nonzero(done))
        if any_done:
            steps = np.where(done, rem, can)
            with np.errstate(divide="ignore", invalid="ignore"):
                used = np.where(done, rem / np.where(rate > 0, rate, 1.0), L)   # (start + ..., start 0)
        else:
            steps = can
            used = np.empty(n)
            used.fill(L)
        stale = self._stale(jobs)
        if stale is not None:
            steps, used = np.where(stale, 0.0, steps), np.where(stale, 0.0, used)
            done, any_done = done | stale, True
        ja.remaining[jobs] = rem - steps
        occupied = used
        start = as_run = None
        if plan.waiting is not None and (any_done and occupied.min() < L or self.freed_at_start
                                         or self._arrive_mid_round()):
            start = np.zeros(n)
            as_run = backfill_round(self, plan, steps, start, used, done, occupied)   # freed GPUs, rest of round
            if as_run is not None:
                plan, steps, start, used, done, occupied = as_run
                jobs = plan.member_job
        if as_run is not None:
            self.run_seconds += float((used - start).sum())
        elif not any_done and self._whole_round:
            self.run_seconds += L * n   # (n whole seconds-counts: the sum below, exactly)
        else:
            self.run_seconds += float(used.sum())
        if self.on_round is not None:
            self.on_round(plan, steps, np.zeros(n) if start is None else start, used)
        types = plan.types
        gpu_seconds = plan.sfs * occupied
        self.busy += np.bincount(types, weights=gpu_seconds, minlength=self.J)
        charge = gpu_seconds * self.prices[types] / 3600.0
        if as_run is None:   # (_charge with one member per entry)
            ja.cost[jobs] += charge
            ja.gpu_seconds[jobs] += gpu_seconds
        else:
            self._charge(plan, charge, gpu_seconds)
        if any_done or as_run is not None or len(self.unreported):
            result = self._settle(occupied, jobs[done], used[done])   # a job runs at most once a round
            if as_run is not None:
                result.plan = plan
            return result
        self.integral += self.unfinished * L   # (_settle with no job done)
        self.clock += L
        self._lagged = self.lead > 0
        return RoundResult(occupied, [])

    def _arrive_mid_round(self) -> bool:
        """A job arrives before the round ends (and mid-round arrivals may start then)."""
        if self.arrivals is None:
            return False
        nxt = self.next_arrival()
        return nxt is not None and nxt < self.clock + self.L

    def _settle(self, occupied: np.ndarray, finished: np.ndarray, used_done: np.ndarray) -> RoundResult:
        """Finish times, the active-job integral and the clock at the round's end. A job done in the round's last
        `lead` s is reported with the next round (its plan was made before it was done), as on a cluster."""
        ja, L, now = self.jobs, self.L, self.clock
        prior, self.unreported = self.unreported, _NONE
        if len(finished) and len(prior):     # (one planned again after it was done: done already)
            fresh = ja.finish[finished] != ja.finish[finished]
            finished, used_done = finished[fresh], used_done[fresh]
        report = finished
        n = self.unfinished
        if len(finished):
            ja.finish[finished] = now + used_done
            span = np.maximum(now + used_done - ja.admitted_at[finished], 1e-9)
            ja.avg_active[finished] = (self.integral + n * used_done - ja.active_integral[finished]) / span
            self.integral += (n - len(finished)) * L + float(used_done.sum())
            self.unfinished -= len(finished)
            self.finished_total += len(finished)
            if self.on_finish is not None:
                self.on_finish(finished)
            if self.lead > 0:       # (an adaptive job's runner settles it at once: not deferred)
                late = (used_done > L - self.lead) & ~ja.adaptive[finished]
                if late.any():
                    report, self.unreported = finished[~late], finished[late]
        else:
            self.integral += n * L
        self.clock = now + L
        self._lagged = self.lead > 0
        return RoundResult(occupied, report.tolist() + prior.tolist())

    def _stale(self, jobs: np.ndarray) -> np.ndarray | None:
        """Members done in the last round's look-ahead (`unreported`), planned again by a plan that did not know:
        they run nothing and hold nothing (their GPUs free from the round's start); None when there are none."""
        if not len(self.unreported):
            return None
        stale = np.isin(jobs, self.unreported)
        return stale if stale.any() else None

    def _execute_mixed(self, plan: RoundPlan) -> RoundResult:
        """A round plan (one job per entry) with adaptive jobs in the trace: fixed entries as in
        `execute`, adaptive ones by their goodput model (`AdaptiveRunner`)."""
        ja, L, now = self.jobs, self.L, self.clock
        E = plan.num_entries
        if len(plan.member_entry) != E or plan.share is not None:
            raise ValueError("adaptive jobs run one job per entry (no space sharing, no fluid plans)")
        jobs = plan.member_job
        ad = ja.adaptive[jobs]
        start = np.where(plan.renewed, 0.0, min(self.overhead, L))
        used, steps, done = np.full(E, L), np.zeros(E), np.zeros(E, bool)
        f = np.flatnonzero(~ad)
        if len(f) and self.restarts is not None:
            start[f] = self._restarts(plan, f)
        if len(f):
            rate = self._throughputs(plan)[0][f]
            rem = ja.remaining[jobs[f]]
            can = rate * (L - start[f])
            if self.integer_steps:
                can = np.floor(can)
            d = (rem <= can) & (rate > 0)
            with np.errstate(divide="ignore", invalid="ignore"):
                used[f] = np.where(d, start[f] + rem / np.where(rate > 0, rate, 1.0), L)
            steps[f], done[f] = np.where(d, rem, can), d
            stale = self._stale(jobs[f])
            if stale is not None:
                g = f[stale]
                steps[g], used[g], start[g], done[g] = 0.0, 0.0, 0.0, True
            ja.remaining[jobs[f]] = rem - steps[f]
        a = np.flatnonzero(ad)
        start[a], used[a], done[a] = self.adaptive.run(plan, a, now)
        if self.restarts is not None:
            self.restarts.end_round()
        self.run_seconds += float((used - start).sum())
        if self.on_round is not None:
            self.on_round(plan, steps, start, used)
        gpu_seconds = plan.sfs * used
        self.busy += np.bincount(plan.types, weights=gpu_seconds, minlength=self.J)
        self._charge(plan, gpu_seconds * self.prices[plan.types] / 3600.0, gpu_seconds)
        return self._settle(used, jobs[done], used[done])

    def _restarts(self, plan: RoundPlan, members: np.ndarray, room: float | None = None) -> np.ndarray:
        """Start-up seconds of these members where the trace's jobs carry their set's restart delays
        (`restarts.RestartLedger`): a job that starts or changes placement owes its delay (the run's flat
        overhead where it has none) and counts a re-allocation. `room`: seconds left in the round (an
        entry backfilled mid-round); what it cannot hold is owed next round."""
        ja, ledger = self.jobs, self.restarts
        out = np.zeros(len(members))
        for i, k in enumerate(np.asarray(members, np.int64).tolist()):
            m, e = int(plan.member_job[k]), int(plan.member_entry[k])
            delay = float(ja.restart[m]) if ja.restart[m] == ja.restart[m] else self.overhead
            out[i], fresh = ledger.start(m, ledger.shape(int(plan.types[e]), plan.gpus[e]), delay, room)
            ja.reallocations[m] += fresh and delay > 0
        return out

    def _charge(self, plan: RoundPlan, charge: np.ndarray, gpu_seconds: np.ndarray) -> None:
        """Each entry's $ and GPU-seconds split equally over its members."""
        e = plan.member_entry
        if len(e) == plan.num_entries:   # one member per entry: e is the identity, and a job is in one entry
            self.jobs.cost[plan.member_job] += charge
            self.jobs.gpu_seconds[plan.member_job] += gpu_seconds
        else:
            size = np.bincount(e, minlength=plan.num_entries)
            np.add.at(self.jobs.cost, plan.member_job, charge[e] / size[e])
            np.add.at(self.jobs.gpu_seconds, plan.member_job, gpu_seconds[e] / size[e])

    def _idle(self) -> RoundResult:
        """Nothing to run: jump to the next arrival when no job waits, else wait a round. A job that arrived
        while this empty plan was made ahead is planned at once (an idle cluster plans as a job arrives)."""
        prior, self.unreported = self.unreported, _NONE
        lagged, self._lagged = self._lagged, False
        nxt = self.next_arrival()
        if lagged and nxt is not None and nxt <= self.clock:
            pass
        elif self.unfinished == 0 and nxt is not None and nxt > self.clock:
            self.clock = nxt
        else:
            self.integral += self.unfinished * self.L
            self.clock += self.L
        return RoundResult(np.zeros(0), prior.tolist())

    def _throughputs(self, plan: RoundPlan) -> tuple[np.ndarray, np.ndarray | None]:
        """Steps/s of each member in its entry (and the fluid rate for ideal plans)."""
        ja = self.jobs
        jobs, e = plan.member_job, plan.member_entry
        k = ja.key[jobs]
        paired = len(e) != plan.num_entries
        if plan.share is not None:
            T = ja.T[k]
            if self.col_pool is not None:
                T = np.hstack([T, np.nan_to_num(ja.Tu[k])])
            if paired:
                f, partner = self._partners(plan)
                P = ja.P[k[f], k[partner]]
                if self.col_pool is not None:
                    P = np.hstack([P, np.nan_to_num(ja.Pu[k[f], k[partner]])])
                T[f] = P
            return T, (plan.share[e] * T).sum(axis=1)
        types = plan.types[e] if paired else plan.types
        if not paired and plan.consolidated.all():   # (most rounds)
            return ja.T[k, types], None
        consolidated = plan.consolidated[e] if paired else plan.consolidated
        thr = self._alone(k, types, consolidated)
        if paired:
            f, partner = self._partners(plan)
            a, b, j = k[f], k[partner], types[f]
            pair = ja.P[a, b, j]
            sp = ~consolidated[f]
            if sp.any():
                u = ja.Pu[a[sp], b[sp], j[sp]]
                pair[sp] = np.where(np.isnan(u), pair[sp], u)
            thr[f] = pair
        return thr, None

    def _alone(self, k: np.ndarray, types: np.ndarray, consolidated: np.ndarray) -> np.ndarray:
        """Steps/s of job keys `k` alone on these types: the unconsolidated rate where split over servers (and
        the table has one)."""
        ja = self.jobs
        thr = ja.T[k, types]
        split = ~consolidated
        if split.any():
            u = ja.Tu[k[split], types[split]]
            thr[split] = np.where(np.isnan(u), thr[split], u)
        return thr

    def _alone_after_partner(self, plan: RoundPlan, start: np.ndarray, rem: np.ndarray, rate: np.ndarray,
                             steps: np.ndarray, used: np.ndarray, done: np.ndarray) -> None:
        """A member of a pair whose partner is done mid-round has the GPU to itself from then and runs at its rate
        alone, as a job on a real GPU speeds up when the process beside it exits (and a paced job does:
        worker.paced_job). Updates steps, used and done in place."""
        f, p = self._partners(plan)
        partner_done = np.where(done[p], used[p], np.inf)
        sel = partner_done < np.where(done[f], used[f], np.inf)
        if not sel.any():
            return
        i = f[sel]
        t = np.maximum(partner_done[sel], start[i])
        e = plan.member_entry[i]
        alone = self._alone(self.jobs.key[plan.member_job[i]], plan.types[e], plan.consolidated[e])
        before = rate[i] * (t - start[i])
        left = rem[i] - before
        d = (left <= alone * (self.L - t)) & (alone > 0)
        with np.errstate(divide="ignore", invalid="ignore"):
            used[i] = np.where(d, t + left / np.where(alone > 0, alone, 1.0), self.L)
        steps[i] = np.where(d, rem[i], before + alone * (self.L - t))
        done[i] = d

    @staticmethod
    def _partners(plan: RoundPlan) -> tuple[np.ndarray, np.ndarray]:
        """Members of two-job entries and, for each, the position of its partner."""
        e = plan.member_entry
        sizes = np.bincount(e, minlength=plan.num_entries)
        if sizes.max(initial=0) > 2:
            raise ValueError("the simulator runs combinations of at most two jobs")
        start = np.cumsum(sizes) - sizes
        f = np.flatnonzero(sizes[e] == 2)
        return f, 2 * start[e[f]] + 1 - f


def isolated_throughput(T: np.ndarray, sf: np.ndarray, capacity: np.ndarray, n_active: np.ndarray) -> np.ndarray:
    """Steps/s under X_isolated (1/n of every type, n = average number of active jobs)."""
    n = np.maximum(n_active, 1.0)
    runnable = (T > 0) & (sf[:, None] <= capacity[None, :])
    iso = np.where(runnable, capacity[None, :] / (n[:, None] * sf[:, None]), 0.0)
    iso = iso / np.maximum(iso.sum(axis=1, keepdims=True), 1.0)
    return (T * iso).sum(axis=1)


