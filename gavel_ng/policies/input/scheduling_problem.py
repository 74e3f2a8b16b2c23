"""What a policy decides from: jobs, the cluster and throughputs, as aligned arrays."""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace

import numpy as np

from ...cluster import Cluster
from ...errors import InputError
from ...jobs import Job
from ...pairs import PairTable
from ...rules.limits import Limits
from ...throughputs import UNCONSOLIDATED, ThroughputTable
from .entities import Entity, entity_policies
from .fields import Fields


@dataclass(frozen=True)
class Combinations:
    """Rows of the allocation when jobs may share a GPU.

    members[k] lists the job indices of row k (one job, or a pair). throughputs[k, j, i]
    is member i's steps/s in row k on worker type j (0 for absent members).
    """

    members: list[tuple[int, ...]]
    throughputs: np.ndarray  # (K, J, max members)


@dataclass(frozen=True)
class SchedulingProblem(Fields):
    """Jobs, cluster and throughputs in job order: the whole input of a policy."""

    _FIELDS_LABEL = "p.input"

    job_ids: list                   # (M,) job ids, as given: the scheduler's and simulator's ints (allocator.py,
                                    # converted nowhere), or a problem file's or a Python caller's names
    worker_types: list[str]
    capacity: np.ndarray            # (J,) GPUs per type
    throughputs: np.ndarray         # (M, J) isolated steps/s
    scale_factors: np.ndarray       # (M,)
    weights: np.ndarray             # (M,)
    steps_remaining: np.ndarray     # (M,)
    steps_total: np.ndarray         # (M,)
    time_since_arrival: np.ndarray  # (M,) seconds
    slo_s: np.ndarray               # (M,) deadline in seconds after arrival, inf = none
    entities: list[str | None] = field(default_factory=list)
    entity_specs: dict[str, Entity] = field(default_factory=dict)
    prices: np.ndarray | None = None  # (J,) $/GPU-hour
    combinations: Combinations | None = None
    counts: np.ndarray | None = None  # (M,) identical jobs a row stands for (see job_classes)
    pairs: PairTable | None = None    # space sharing by partner classes (gavel_ng.pairs, packing.py)
    pools: np.ndarray | None = None   # (J,) capacity pool of each column; capacity[j] = its pool's GPUs
    limits: Limits | None = None      # GPU caps on groups of jobs per pool: quotas, labelled servers (rules/)
    soft_preferences: bool = False    # some job's throughputs carry a preference penalty (rules/compile.py)

    @property
    def num_jobs(self) -> int:
        return len(self.job_ids)

    @property
    def total_jobs(self) -> float:
        return float(self.num_jobs if self.counts is None else self.counts.sum())

    def job_classes(self, key: np.ndarray | None = None) -> tuple[SchedulingProblem, np.ndarray]:
        """Collapse jobs that look identical to a policy that reads only throughputs,
        scale factor and weight (las): a symmetric optimum exists, so one row per class
        with a multiplicity gives the same allocation from an LP the size of the job-type
        mix. `key`: (M, k) more columns jobs of one class must share (a policy's own grouping).
        Returns the class problem and each job's class."""
        looks = np.column_stack([self.throughputs, self.scale_factors, self.weights]
                                + ([self.pairs.job_class] if self.pairs is not None else [])
                                + ([self.limits.members.T] if self.limits is not None else [])
                                + ([key] if key is not None else []))
        uniq, first, inverse, counts = np.unique(looks, axis=0, return_index=True, return_inverse=True,
                                                 return_counts=True)
        cls = replace(self, job_ids=[f"class{c}" for c in range(len(uniq))], throughputs=self.throughputs[first],
                      scale_factors=self.scale_factors[first], weights=self.weights[first],
                      steps_remaining=self.steps_remaining[first], steps_total=self.steps_total[first],
                      time_since_arrival=self.time_since_arrival[first], slo_s=self.slo_s[first],
                      entities=[self.entities[i] for i in first], combinations=None,
                      counts=counts.astype(float),
                      pairs=None if self.pairs is None else self.pairs.subset(first),
                      limits=None if self.limits is None else self.limits.subset(first))
        return cls, np.asarray(inverse).ravel()

    def with_throughputs(self, throughputs: np.ndarray) -> SchedulingProblem:
        """The same problem seen through other throughputs (used for agnostic variants).
        Pair classes stay: pair throughputs are fractions of the (new) isolated ones."""
        return replace(self, throughputs=throughputs, combinations=None)

    def subset(self, jobs, capacity_share: float = 1.0) -> SchedulingProblem:
        """Some of the jobs on `capacity_share` of every pool's GPUs (partitioned solves)."""
        idx = np.asarray(jobs, dtype=int)
        pick = lambda a: a[idx]  # noqa: E731
        return replace(self, job_ids=[self.job_ids[i] for i in idx], capacity=self.capacity * capacity_share,
                       throughputs=self.throughputs[idx], scale_factors=pick(self.scale_factors),
                       weights=pick(self.weights), steps_remaining=pick(self.steps_remaining),
                       steps_total=pick(self.steps_total), time_since_arrival=pick(self.time_since_arrival),
                       slo_s=pick(self.slo_s), entities=[self.entities[i] for i in idx], combinations=None,
                       counts=None if self.counts is None else self.counts[idx],
                       pairs=None if self.pairs is None else self.pairs.subset(idx),
                       limits=None if self.limits is None else self.limits.subset(idx).scaled(capacity_share))

    @classmethod
    def build(cls, job_ids, worker_types, capacity, throughputs, *, scale_factors=None, weights=None,
              steps_remaining=None, steps_total=None, time_since_arrival=None, slo_s=None,
              entities=None, entity_specs=None, prices=None, combinations=None, pairs=None,
              pools=None, limits=None, soft_preferences=False, trusted=False) -> SchedulingProblem:
        """The problem from arrays (missing ones at their defaults), validated (`validate`; `trusted`
        there says which checks the caller's own construction makes unnecessary)."""
        m = len(job_ids)

        def arr(v, default):
            return np.full(m, default, dtype=float) if v is None else np.asarray(v, dtype=float)

        remaining = arr(steps_remaining, math.inf)
        problem = cls(
            job_ids=list(job_ids), worker_types=list(worker_types),
            capacity=np.asarray(capacity, dtype=float), throughputs=np.asarray(throughputs, dtype=float),
            scale_factors=arr(scale_factors, 1), weights=arr(weights, 1.0), steps_remaining=remaining,
            steps_total=remaining.copy() if steps_total is None else np.asarray(steps_total, dtype=float),
            time_since_arrival=arr(time_since_arrival, 0.0), slo_s=arr(slo_s, math.inf),
            entities=list(entities) if entities is not None else [None] * m,
            entity_specs=dict(entity_specs or {}),
            prices=None if prices is None else np.asarray(prices, dtype=float),
            combinations=combinations, pairs=pairs,
            pools=None if pools is None else np.asarray(pools, dtype=int), limits=limits,
            soft_preferences=bool(soft_preferences),
        )
        problem.validate(trusted)
        return problem

    @classmethod
    def from_jobs(cls, cluster: Cluster, jobs: list[Job], table: ThroughputTable, now: float = 0.0,
                  entity_specs: dict[str, Entity] | None = None, space_sharing: bool = False,
                  unconsolidated: bool = False) -> SchedulingProblem:
        """Look each job's throughputs up in a table (the simulator's and service's path).

        `space_sharing`: jobs may share a GPU with a job of equal scale factor, with the
        table's pair throughputs. `unconsolidated`: every type j gets a twin column
        `j_unconsolidated` (multi-GPU jobs spread over servers, at the table's
        unconsolidated throughput) drawing on the same GPUs.
        """
        workers = cluster.worker_types
        keys = [(j.job_type, j.scale_factor) for j in jobs]
        T = table.matrix(keys, workers)
        capacity, prices, pools, columns = cluster.capacity(), cluster.prices(), None, list(workers)
        if unconsolidated:
            twin = np.zeros_like(T)
            for c, w in enumerate(workers):
                for i, key in enumerate(keys):
                    v = table.get_unconsolidated(key, w) if key[1] > 1 else None
                    twin[i, c] = 0.0 if v is None else v
            T = np.hstack([T, twin])
            columns = workers + [w + UNCONSOLIDATED for w in workers]
            capacity = np.r_[capacity, capacity]
            prices = None if prices is None else np.r_[prices, prices]
            pools = np.r_[np.arange(len(workers)), np.arange(len(workers))]
        pairs = PairTable.from_table(table, keys, columns) if space_sharing else None
        return cls.build(
            [j.id for j in jobs], columns, capacity, T,
            scale_factors=[j.scale_factor for j in jobs], weights=[j.weight for j in jobs],
            steps_remaining=[j.steps_remaining for j in jobs], steps_total=[j.steps_total for j in jobs],
            time_since_arrival=[max(0.0, now - j.arrival_time) for j in jobs],
            slo_s=[math.inf if j.slo_s is None else j.slo_s for j in jobs],
            entities=[j.entity for j in jobs], entity_specs=entity_specs, prices=prices, pairs=pairs,
            pools=pools,
        )

    def validate(self, trusted: bool = False) -> None:
        """Reject inputs no allocation can serve, naming the job.

        `trusted`: put together by the allocator from its own state at every solve
        (gavel_ng.allocator), where the shapes, the job ids and the pools hold by construction,
        jobs that fit nowhere were left out and each job's entity was checked when the job was
        loaded: only the values its sources report (throughputs) and the entities' declarations
        are checked, in a few vector operations."""
        T = self.throughputs
        if not trusted:
            m, n = T.shape if T.ndim == 2 else (-1, -1)
            if (m, n) != (self.num_jobs, len(self.worker_types)):
                raise InputError("throughputs", T.shape, "must be jobs x worker types")
            if len(set(self.job_ids)) != m:
                dup = next(j for j in self.job_ids if self.job_ids.count(j) > 1)
                raise InputError("jobs.id", dup, "duplicate job id")
        m, n = T.shape
        if T.size and not (T.min() >= 0.0 and T.max() < math.inf):   # (nan fails both)
            i, j = np.argwhere(~np.isfinite(T) | (T < 0))[0]
            raise InputError(f"jobs[{self.job_ids[i]}].throughputs.{self.worker_types[j]}",
                             T[i, j], "must be a finite non-negative number")
        if not trusted:
            self._validate_layout(m, n)
        if self.pairs is not None:
            self.pairs.validate(m, n)
        for name, spec in self.entity_specs.items():
            if spec.policy not in entity_policies():
                raise InputError(f"entities.{name}.policy", spec.policy, f"must be one of {entity_policies()}")
            if not spec.weight > 0:
                raise InputError(f"entities.{name}.weight", spec.weight, "must be positive")

    def _validate_layout(self, m: int, n: int) -> None:
        """validate's checks of what the allocator's own construction guarantees."""
        runnable = (self.throughputs > 0) & (self.scale_factors[:, None] <= self.capacity[None, :])
        nowhere = ~runnable.any(axis=1)
        if nowhere.any():
            i = int(np.argmax(nowhere))
            raise InputError(f"jobs[{self.job_ids[i]}]", self.job_ids[i],
                             f"fits on no worker type (scale_factor {int(self.scale_factors[i])}, "
                             "zero throughput or too few GPUs everywhere)")
        if self.pools is not None:
            pools = self.pools
            if pools.shape != (n,) or (n and pools.min() < 0):
                raise InputError("pools", pools.tolist(), "must give every worker type a pool index >= 0")
            for q in np.unique(pools):
                caps = self.capacity[pools == q]
                if not np.all(caps == caps[0]):
                    raise InputError("capacity", caps.tolist(), "columns of one pool must show its GPU count")
        for name in {e for e in self.entities if e is not None} - set(self.entity_specs):
            raise InputError("entity", name, "job names an entity that is not declared in 'entities'")
