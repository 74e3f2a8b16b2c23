"""The scheduler loop's allocator, one for simulation and deployment: the policy over what it believes.

`PolicyAllocator.allocate(jobs, now)` builds the policy's input (a SchedulingProblem) from

- a `JobSource`: the jobs' data by job id (scale factor, weight, steps, arrival, SLO, rules,
  entity): the simulator's JobArrays, the scheduler service's ClusterState;
- a `ThroughputSource`: what the policy believes about throughputs, by job id and
  allocation column, alone and sharing a GPU: the oracle table
  (simulator.oracle.TableThroughputs), the online estimator
  (simulator.estimated.EstimatedThroughputs), the measured table or the estimator fed by
  real runs (runtime.measurements.MeasuredThroughputs);
- the capacity: GPUs per worker type, fixed (a simulated cluster) or read at each solve (a
  real one, whose workers come and go);
- the declared entities (`entities`, name -> policies.Entity: weight and inner policy), which
  the hierarchical policy shares the cluster across and quotas are keyed by;

and solves it in a PolicySession; the constraints the policy added go with the allocation to
the mechanism, as rows over its entries (mechanism.limits). Jobs that can run nowhere (no
positive throughput on a column whose type has enough GPUs) are left out of the problem.

Space sharing (`space_sharing`, a `NAME_packed` policy, or one declared with pairs such as
gandiva): the source's pair table goes with the problem. Placement-sensitive (`placement_sensitive`): every
worker type gets an `_unconsolidated` twin column on the same GPUs, where multi-GPU jobs
run at their unconsolidated throughput (single-GPU jobs have none there).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass
from typing import Protocol

import numpy as np

from .cluster import price_vector
from .columns import Columns
from .errors import PolicyError
from .mechanism import AllocationRows, JobView
from .mechanism.limits import Limits
from .pairs import PairTable
from .policies import Entity, SchedulingProblem
from .policies.lp.layout import isolated_shares
from .policies.lp.warm.session import PolicySession
from .policies.registry import needs_pairs, space_sharing_name
from .rules.compile import RuleCompiler

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class PolicyJobs:
    """The policy's data about some jobs, one entry per job id in `ids`."""

    ids: list[int]
    scale_factors: np.ndarray          # GPUs each job needs
    weights: np.ndarray
    steps_remaining: np.ndarray
    steps_total: np.ndarray
    arrival: np.ndarray                # seconds, on the clock of allocate()'s `now`
    slo_s: np.ndarray                  # seconds after arrival; inf: none
    rules: list | None = None          # per job: its JobRules or None (gavel_ng.rules); None: no job has any
    entities: list | None = None       # per job: its entity's name or None (the default); None: no job has one

    def take(self, idx: np.ndarray) -> PolicyJobs:
        pick = idx.tolist()
        return PolicyJobs([self.ids[i] for i in pick], self.scale_factors[idx], self.weights[idx],
                          self.steps_remaining[idx], self.steps_total[idx], self.arrival[idx], self.slo_s[idx],
                          None if self.rules is None else [self.rules[i] for i in pick],
                          None if self.entities is None else [self.entities[i] for i in pick])


class JobSource(Protocol):
    def policy_jobs(self, jobs: list[int]) -> PolicyJobs:
        """The data of those of `jobs` it knows, in their order."""


class ThroughputSource(Protocol):
    """What the policy believes about throughputs."""

    fixed: bool      # a job's throughputs never change (a warm solver may keep them from its arrival)

    def isolated(self, jobs: list[int], columns: list[str]) -> np.ndarray:
        """(jobs, columns) steps/s of each job alone on each allocation column."""

    def pair_table(self, jobs: list[int], columns: list[str], T: np.ndarray) -> PairTable:
        """How these jobs share a GPU: fractions of their isolated steps/s `T` they keep."""


class PolicyAllocator:
    """The SchedulerLoop's Allocator (see the module docstring).

    `capacity`: GPUs per worker type, or a callable giving them at each solve (then no warm
    start: a warm solver keeps the capacity it started with). `prices`: $/GPU-hour per
    worker type (cluster.resolve_prices); the policy gets them when every type has one.
    `lock`: held while the sources are read (the scheduler service's state changes under
    its gRPC threads); the solve runs outside it. `entities`: the declared entities (every job's
    entity must be one, checked where jobs are loaded). `on_solve(jobs, capacity, rows, seconds)`
    sees every solve that had jobs."""

    def __init__(self, policy: str, worker_types: list[str], jobs: JobSource, throughputs: ThroughputSource,
                 capacity: np.ndarray | Callable[[], np.ndarray], *, prices: Mapping[str, float] | None = None,
                 space_sharing: bool = False, placement_sensitive: bool = False, warm: bool = True,
                 lock: AbstractContextManager | None = None, rules: RuleCompiler | None = None,
                 entities: Mapping[str, Entity] | None = None,
                 on_solve: Callable[[list[int], np.ndarray, AllocationRows, float], None] | None = None,
                 policy_errors: str = "raise", options: dict | None = None):
        if policy_errors not in ("raise", "fallback"):
            raise ValueError(f"policy_errors must be 'raise' or 'fallback', not {policy_errors!r}")
        name = space_sharing_name(policy, space_sharing)
        self.packed = needs_pairs(name)
        self.jobs = jobs
        self.throughputs = throughputs
        self.worker_types = list(worker_types)
        self.placement_sensitive = placement_sensitive
        self.columns = Columns.types(self.worker_types, placement_sensitive)   # the allocation's columns
        self.names = self.columns.names
        self.pools = None if self.columns.plain else self.columns.pool
        prices = None if prices is None else price_vector(prices, self.worker_types)
        self.prices = prices if prices is None or self.pools is None else prices[self.pools]
        live = callable(capacity)
        if live:
            self._capacity = capacity
        else:
            fixed = np.asarray(capacity, dtype=float)
            self._capacity = lambda: fixed
        self.lock = lock if lock is not None else nullcontext()
        self.rules = rules                    # constraints and quotas (gavel_ng.rules), same in sim and runtime
        self.entities = dict(entities or {})  # the hierarchical policy's entities, by name
        self.on_solve = on_solve
        self.solves = 0                       # solves that had jobs
        self.fallbacks = 0                    # of them, those whose allocation is a fallback, not the policy's optimum
        self.failures = 0                     # solves that raised in a row: an equal-share allocation was used instead
        self.raise_policy_errors = policy_errors == "raise"
        self.policy_errors = 0                # errors of the policy's own, when not raised (a live cluster)
        self.policy_error: PolicyError | None = None   # the last of them; None once the policy solves again
        self.slo_dropped: set[int] = set()    # jobs whose SLO the policy dropped at some solve (cost policies)
        # warm max-min LP only for single-job rows on plain columns, with fixed capacity and throughputs
        self.session = PolicySession(name, self.column_capacity(), warm=warm and not live and not self.packed
                                     and not placement_sensitive and throughputs.fixed, options=options)
        self.spec = self.session.spec
        if self.spec.entities and not self.entities:
            log.warning("policy %s shares across entities, but none are declared (--entities, cluster-config "
                        "entities): every job is in one entity, so it is max-min fairness over jobs", self.spec.name)

    @property
    def is_agnostic(self) -> bool:
        return self.spec.agnostic

    def column_capacity(self) -> np.ndarray:
        cap = np.asarray(self._capacity(), dtype=float)
        return cap if self.pools is None else cap[self.pools]

    def believed(self, jobs: list[int]) -> JobView:
        """What the policy believes of these jobs (those the source knows) per worker type, the types their
        rules leave out at 0 (and preferences weighed in, as in the policy's input): how the mechanism places
        jobs no allocation covers yet."""
        J = len(self.worker_types)
        with self.lock:
            data = self.jobs.policy_jobs(jobs)
            T = np.asarray(self.throughputs.isolated(data.ids, self.names), float)[:, :J]
            if self.rules is not None and data.rules is not None:
                T, _ = self.rules.compile(data.rules, data.ids, data.scale_factors, T, np.full(J, np.inf),
                                          self.worker_types, strict=False)
        return JobView(list(data.ids), [int(k) for k in data.scale_factors], T)

    def allocate(self, jobs: list[int], now: float) -> AllocationRows:
        cap = self.column_capacity()
        with self.lock:
            data = self.jobs.policy_jobs(jobs)
            T = self.throughputs.isolated(data.ids, self.names)
            job_rules = data.rules if data.rules is not None else [None] * len(data.ids)
            entities = data.entities if data.entities is not None else [None] * len(data.ids)
            ruled = self.rules is not None and self.rules.active(job_rules)
            if ruled:   # worker types a job may not use, preferences (rules.compile); infeasible jobs left out
                T, _ = self.rules.compile(job_rules, data.ids, data.scale_factors, T, cap, self.names, self.pools,
                                          entities, strict=False)
            sf = np.asarray(data.scale_factors, dtype=float)
            runnable = ((T > 0) & (sf[:, None] <= cap[None, :])).any(axis=1)
            if np.count_nonzero(runnable) < len(runnable):
                keep = np.flatnonzero(runnable)
                data, T = data.take(keep), T[keep]
                job_rules = [job_rules[i] for i in keep.tolist()]
                entities = [entities[i] for i in keep.tolist()]
            limits = self.rules.limits(job_rules, entities, self.names, self.columns.pool) \
                if ruled and data.ids else None
            pairs = self.throughputs.pair_table(data.ids, self.names, T) if self.packed and data.ids else None
            preferences = ruled and self.rules.states_preferences(job_rules)
        ids = data.ids
        if not ids:
            return AllocationRows([], np.zeros((0, self.columns.num)), np.zeros(0))
        start = time.perf_counter()
        self.solves += 1
        try:
            problem = SchedulingProblem.build(
                ids, self.names, cap, T, scale_factors=data.scale_factors, weights=data.weights,
                steps_remaining=data.steps_remaining, steps_total=data.steps_total,
                time_since_arrival=np.maximum(0.0, now - data.arrival), slo_s=data.slo_s, prices=self.prices,
                pairs=pairs, pools=self.pools, limits=limits, entities=entities, entity_specs=self.entities,
                soft_preferences=preferences, trusted=True)
            sol = self.session.solve(problem)
        except PolicyError as exc:
            if self.raise_policy_errors:
                raise
            self.policy_errors += 1
            self.policy_error = exc
            log.error("%s; equal shares until it solves again", exc, extra={"kind": "policy error"})
            return self._fallback(ids, data.scale_factors, T, cap, exc)
        except Exception as exc:    # a bad input or a solver fault must not stop every later round
            return self._fallback(ids, data.scale_factors, T, cap, exc)
        if self.failures:
            log.info("policy %s solves again after %d failed solves", self.spec.name, self.failures)
            self.failures = 0
        self.policy_error = None
        if sol.slo_dropped:   # job ids: the problem's are the allocator's own
            self.slo_dropped.update(sol.slo_dropped)
        if not sol.ok:   # the solver failed: `finish` chose a valid fallback and logged why
            self.fallbacks += 1
        if sol.warnings:   # each already logged where it arose (repeats collapsed, see gavel_ng.logs)
            log.debug("solve at t=%.0f: %s", now, "; ".join(sol.warnings))
        a = sol.allocation
        singles = len(a.rows) == len(ids) and max(map(len, a.rows), default=1) == 1
        rows = list(zip(ids)) if singles else list(a.rows)
        er = sol.entry_rows   # the policy's own constraints, for the mechanism to keep in what runs
        own = None if er is None else Limits.from_bounds(er.C, er.lo, er.hi, er.names, rows, self.columns.num)
        # where each job can run at all (what a work-conserving mechanism may give the GPUs the allocation leaves)
        runnable = (T > 0) & (np.asarray(data.scale_factors, dtype=float)[:, None] <= cap[None, :]) if singles \
            else None
        out = AllocationRows(rows, np.asarray(a.values, dtype=float), np.asarray(a.scale_factors, dtype=float), own,
                             runnable=runnable)
        if self.on_solve is not None:
            self.on_solve(ids, cap, out, time.perf_counter() - start)
        return out

    def _fallback(self, ids: list[int], sf: np.ndarray, T: np.ndarray, cap: np.ndarray,
                  exc: Exception) -> AllocationRows:
        """Equal shares while the policy cannot solve: the isolated allocation (policies.lp.layout.isolated_shares, the
        fallback of a failed solve too), 1/n of every type a job can run on (T not 0, enough GPUs). Each is logged
        as one kind (a ledger shows the first and counts the rest, gavel_ng.logs) and counted in `fallbacks`."""
        self.failures += 1
        self.fallbacks += 1
        if not isinstance(exc, PolicyError):
            log.warning("policy %s failed to solve (%s: %s): equal-share allocation until it solves again",
                        self.spec.name, type(exc).__name__, exc, extra={"kind": "solve raised; equal shares used"})
        sf = np.asarray(sf, dtype=float)
        ok = (np.asarray(T) != 0) & (sf[:, None] <= cap[None, :])
        ok[:, len(self.worker_types):] = False      # twin columns share their type's GPUs: only the types
        return AllocationRows([(m,) for m in ids], isolated_shares(ok, sf, np.asarray(cap, dtype=float)), sf.copy())
