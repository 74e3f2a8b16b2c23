"""Rules over worker types, compiled into the policy's input (one code path for every caller).

`RuleCompiler.apply(problem, job_rules)` returns the same SchedulingProblem with

- the throughputs of worker types a job may not use set to 0 (its `allowed_types`, and types
  with too few GPUs on servers carrying its `labels`): the LP has no variable there;
- soft preferences as a penalty: the policy sees a job's throughput on its k-th preferred
  type (k = 0 first) times `(1 - penalty)^k`, and `(1 - penalty)^len(preferred)` on the
  types it does not list; it may still use any of them (never infeasible);
- `limits` (rules.limits): one group per entity with a quota, GPUs per worker type, and one
  per set of required labels, capped at the GPUs of the servers that carry them all.

A job that these rules leave nowhere to run is an InputError naming the job and the rule
(`check_job`, which the simulator, `solve` and the scheduler's submissions call first). The
PolicyAllocator applies the compiler with `strict=False` (a job is only left out of the
problem: a running cluster never fails a solve over one job).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

import numpy as np

from ..errors import InputError
from ..throughputs import UNCONSOLIDATED
from .limits import Limits
from .model import ClusterRules, JobRules, entities_of


@dataclass(frozen=True)
class Server:
    """One server as the rules see it: its worker type, GPU count and labels."""

    worker_type: str
    gpus: int
    labels: frozenset[str] = frozenset()


def base_type(column: str) -> str:
    return column[:-len(UNCONSOLIDATED)] if column.endswith(UNCONSOLIDATED) else column


def simulated_servers(gpus: dict[str, int], server_size, rules: ClusterRules) -> list[Server]:
    """A simulated cluster's servers under the cluster's rules (`rules.server_labels`, labelled_servers)."""
    return labelled_servers(gpus, server_size, rules.server_labels)


def labelled_servers(gpus: dict[str, int], server_size, labels: dict[str, dict[str, int]]) -> list[Server]:
    """A simulated cluster's servers: `server_size(type)` GPUs each (the last may have fewer), the
    first N of a type carrying each label that `labels[type]` gives N servers (the one label rule)."""
    out = []
    for w, n in gpus.items():
        size = server_size(w)
        mine = labels.get(w, {})
        for k, start in enumerate(range(0, n, size)):
            out.append(Server(w, min(size, n - start), frozenset(lb for lb, c in mine.items() if k < c)))
    return out


class RuleCompiler:
    """The cluster's rules and servers; compiles each job's rules into the policy's input."""

    def __init__(self, rules: ClusterRules | None = None, servers: Sequence[Server] | Callable | None = None):
        """`servers`: a list, or a callable giving them at each use (a real cluster's live workers)."""
        self.rules = rules or ClusterRules()
        self._servers = servers if callable(servers) else list(servers or [])

    @property
    def servers(self) -> list[Server]:
        return list(self._servers()) if callable(self._servers) else self._servers

    @property
    def empty(self) -> bool:
        return self.rules.empty

    def label_gpus(self, labels: Sequence[str], worker_type: str) -> tuple[int, int]:
        """(total GPUs, largest server) of the type's servers that carry every label."""
        need = set(labels)
        sizes = [s.gpus for s in self.servers if s.worker_type == worker_type and need <= s.labels]
        return sum(sizes), max(sizes, default=0)

    def job_factors(self, rules: JobRules | None, sf: int, columns: Sequence[str], entity: str | None,
                    runnable: np.ndarray, job: str, strict: bool) -> np.ndarray | None:
        """Per column: 0 where the job may not run, the preference penalty elsewhere. None: it may
        run nowhere (strict: an InputError naming the job and the rule that left it nowhere)."""
        types = [base_type(c) for c in columns]
        f = np.ones(len(columns))
        ok = np.asarray(runnable, dtype=bool).copy()

        def cut(keep: np.ndarray, field: str, value: object, reason: str) -> bool:
            nonlocal ok
            if ok.any() and not (ok & keep).any():
                if strict:
                    raise InputError(f"jobs[{job}].{field}", value, reason)
                return False
            ok &= keep
            return True

        if rules is not None:
            if rules.allowed_types is not None:
                keep = np.array([t in rules.allowed_types for t in types])
                if not cut(keep, "allowed_types", list(rules.allowed_types),
                           "leaves no worker type the job can run on (no throughput or too few GPUs there)"):
                    return None
            if rules.labels:
                keep = np.array([self.label_gpus(rules.labels, t)[0] >= sf for t in types])
                if not cut(keep, "labels", list(rules.labels),
                           f"no worker type has {sf} GPUs on servers carrying all these labels"):
                    return None
            if rules.preferred_types:
                pen = 1.0 - self.rules.preference_penalty
                rank = {t: k for k, t in enumerate(rules.preferred_types)}
                f = np.array([pen ** rank.get(t, len(rank)) for t in types])
        quota = self.rules.quotas.get(entity) if entity is not None else None
        if quota is not None:
            keep = np.array([quota.get(t, np.inf) >= sf for t in types])
            if not cut(keep, "entity", entity, f"the quota of entity {entity!r} ({quota}) leaves the job's "
                                               f"{sf} GPUs no worker type it can run on"):
                return None
        if not ok.any():
            return None
        return np.where(ok, f, 0.0)

    def apply(self, inp, job_rules: Sequence[JobRules | None], strict: bool = True):
        """`inp` (a SchedulingProblem) with these per-job rules compiled in (see the module doc); a
        job's entity is the problem's (`inp.entities`), else its rules'."""
        if inp.num_jobs == 0 or not self.active(job_rules):
            return inp
        entities = [e if e is not None else r.entity if r is not None else None
                    for e, r in zip(inp.entities, job_rules)]
        T, limits = self.compile(job_rules, inp.job_ids, inp.scale_factors, inp.throughputs, inp.capacity,
                                 list(inp.worker_types), inp.pools, entities, strict)
        return replace(inp, throughputs=T, limits=limits, combinations=None,
                       soft_preferences=inp.soft_preferences or self.states_preferences(job_rules))

    @staticmethod
    def states_preferences(job_rules: Sequence[JobRules | None]) -> bool:
        return any(r is not None and bool(r.preferred_types) for r in job_rules)

    def active(self, job_rules: Sequence[JobRules | None]) -> bool:
        return not self.empty or any(r is not None and r.constrains for r in job_rules)

    def compile(self, job_rules, job_ids, sf, T, capacity, cols: list[str], pools=None, entities=None,
                strict: bool = True) -> tuple[np.ndarray, Limits | None]:
        """(throughputs as the policy sees them, limits) for jobs in this order; `entities`: each
        job's (None: its rules'). Not strict: a job left nowhere gets all-zero throughputs (the
        caller drops it)."""
        M = len(job_ids)
        pools = np.arange(len(cols)) if pools is None else np.asarray(pools)
        sf = np.asarray(sf, dtype=float)
        T = np.array(T, dtype=float)
        runnable = (T > 0) & (sf[:, None] <= np.asarray(capacity, dtype=float)[None, :])
        entities = list(entities) if entities is not None else entities_of(job_rules)
        for m in range(M):
            r = job_rules[m]
            if (r is None or not r.constrains) and entities[m] not in self.rules.quotas:
                continue
            f = self.job_factors(r, int(sf[m]), cols, entities[m], runnable[m], str(job_ids[m]), strict)
            T[m] = 0.0 if f is None else T[m] * f
        return T, self.limits(job_rules, entities, cols, pools)

    def limits(self, job_rules: Sequence[JobRules | None], entities: Sequence[str | None], cols: list[str],
               pools: np.ndarray) -> Limits | None:
        """One group per entity with a quota and per required label set (see the module doc)."""
        P = int(pools.max()) + 1 if len(pools) else 0
        pool_type = {int(q): base_type(cols[j]) for j, q in enumerate(pools)}
        groups, caps, names = [], [], []
        for ent, quota in self.rules.quotas.items():
            mem = np.array([e == ent for e in entities])
            if mem.any():
                groups.append(mem)
                caps.append([quota.get(pool_type[q], np.inf) for q in range(P)])
                names.append(f"quota of entity {ent!r}")
        label_sets = sorted({tuple(sorted(r.labels)) for r in job_rules if r is not None and r.labels})
        for ls in label_sets:
            mem = np.array([r is not None and set(ls) <= set(r.labels) for r in job_rules])   # only on those servers
            groups.append(mem)
            caps.append([float(self.label_gpus(ls, pool_type[q])[0]) for q in range(P)])
            names.append(f"servers labelled {', '.join(ls)}")
        if not groups:
            return None
        return Limits(np.array(groups, dtype=bool), np.array(caps, dtype=float), tuple(names))
