"""What operators and users may ask of placement (ESCHER's constraints as named resources).

Two typed records, parsed from job files, problem files, trace columns and Python alike:

- `JobRules`, carried by a job: the worker types it may run on, ordered soft preferences
  among them, server labels it needs, its group name and the jobs or groups it must share a
  server with (affinity) or never share one with (anti-affinity), and who owns it (`user`,
  for admission; `entity`, the group it belongs to: quotas are per entity, and the
  hierarchical policy shares the cluster across entities, declared with their weights under
  `entities`, policies.input.entities).
- `ClusterRules`, set by the operator: GPU quotas per entity and worker type, at most one
  distributed job per server, the penalty of a soft preference, server labels (simulated
  clusters: the first N servers of a type), and the admission policy.

Gang scheduling (all of a job's GPUs at once) is what every job gets already. Where each
rule takes effect: worker types and quotas in the policy's LP (rules.compile), servers in
placement (rules.placement), admission before the policy (rules.admission).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field, replace

from ..errors import InputError, read_json, require

DEFAULT_PENALTY = 0.1   # a preference rank further down costs this share of the job's throughput (soft)


def _names(value: object, where: str) -> tuple[str, ...]:
    if isinstance(value, str):
        value = [value]
    require(isinstance(value, (list, tuple)) and all(isinstance(v, str) and v.strip() for v in value),
            where, value, "must be a list of names")
    return tuple(dict.fromkeys(v.strip() for v in value))


@dataclass(frozen=True)
class JobRules:
    """A job's constraints; the default constrains nothing."""

    allowed_types: tuple[str, ...] | None = None   # None: any worker type
    preferred_types: tuple[str, ...] = ()          # best first; soft (a penalty, never infeasible)
    labels: tuple[str, ...] = ()                   # every server the job runs on has all of these
    group: str | None = None                       # a name other jobs' affinity rules may use
    affinity: tuple[str, ...] = ()                 # job names or groups to share a server with
    anti_affinity: tuple[str, ...] = ()            # job names or groups never to share a server with
    user: str | None = None                        # for per-user admission quotas
    entity: str | None = None                      # the job's entity (quotas, hierarchical policy); None: default

    FIELDS = ("allowed_types", "preferred_types", "labels", "group", "affinity", "anti_affinity", "user", "entity")

    @property
    def empty(self) -> bool:
        return self == JobRules()

    @property
    def constrains(self) -> bool:
        """Whether it asks more of placement than who owns the job (`user`, `entity`)."""
        return replace(self, user=None, entity=None) != JobRules()

    def allows(self, worker_types) -> list[bool]:
        """Per worker type, whether the job may run there (`allowed_types`, names compared in lower case)."""
        if self.allowed_types is None:
            return [True] * len(worker_types)
        names = {n.lower() for n in self.allowed_types}
        return [w.lower() in names for w in worker_types]

    @property
    def on_servers(self) -> bool:
        """Whether placement must look at this job (labels, affinity, anti-affinity)."""
        return bool(self.labels or self.affinity or self.anti_affinity)

    @classmethod
    def from_dict(cls, data: object, where: str = "job") -> JobRules:
        """The rule fields of a job object (other keys are the caller's); errors name `where.field`."""
        require(isinstance(data, Mapping), where, data, "expected an object")
        out: dict = {}
        for key in ("allowed_types", "preferred_types", "labels", "affinity", "anti_affinity"):
            if data.get(key) is not None:
                out[key] = _names(data[key], f"{where}.{key}")
        if out.get("allowed_types") == ():
            raise InputError(f"{where}.allowed_types", [], "must name at least one worker type")
        for key in ("group", "user", "entity"):
            if data.get(key) is not None:
                require(isinstance(data[key], str) and data[key].strip() != "", f"{where}.{key}", data[key],
                        "must be a non-empty string")
                out[key] = data[key].strip()
        rules = cls(**out)
        rules.check(where)
        return rules

    def check(self, where: str = "job") -> None:
        if self.allowed_types is not None:
            for w in self.preferred_types:
                require(w in self.allowed_types, f"{where}.preferred_types", w,
                        f"not among allowed_types {list(self.allowed_types)}")
        both = set(self.affinity) & set(self.anti_affinity)
        require(not both, f"{where}.anti_affinity", sorted(both), "also listed in affinity")

    def to_dict(self) -> dict:
        out: dict = {}
        for key in self.FIELDS:
            v = getattr(self, key)
            if v is not None and v != ():
                out[key] = list(v) if isinstance(v, tuple) else v
        return out

    def with_type_names(self, known: list[str], where: str) -> JobRules:
        """Checked against the cluster's worker types (lower-cased as the cluster names them)."""
        def norm(names):
            out = tuple(n.lower() for n in names)
            for n in out:
                require(n in known, where, n, f"unknown worker type; known: {', '.join(known)}")
            return out

        allowed = None if self.allowed_types is None else norm(self.allowed_types)
        return JobRules(allowed, norm(self.preferred_types), self.labels, self.group, self.affinity,
                        self.anti_affinity, self.user, self.entity)


@dataclass(frozen=True)
class Admission:
    """Who may queue how much (Blox's admission policies); None: no limit (accept all)."""

    max_jobs_per_user: int | None = None      # active (queued or running) jobs
    max_gpus_per_user: int | None = None      # sum of the active jobs' scale factors
    max_queue: int | None = None              # active jobs in the whole cluster

    KEYS = ("max_jobs_per_user", "max_gpus_per_user", "max_queue")

    @property
    def accept_all(self) -> bool:
        return self == Admission()

    @classmethod
    def from_dict(cls, data: object, where: str = "admission") -> Admission:
        if data is None or data == "accept_all":
            return cls()
        require(isinstance(data, Mapping), where, data, "expected an object (or \"accept_all\")")
        for key, v in data.items():
            require(key in cls.KEYS, f"{where}.{key}", v, f"unknown field; known: {', '.join(cls.KEYS)}")
            require(v is None or (isinstance(v, int) and not isinstance(v, bool) and v >= 0), f"{where}.{key}", v,
                    "must be an integer >= 0")
        return cls(**dict(data))


@dataclass(frozen=True)
class ClusterRules:
    """The operator's rules (see the module doc). `quotas[entity][type]`: GPUs of that type the
    entity's jobs may hold together. `server_labels[type][label]`: in a simulated cluster, the
    first N servers of the type carry the label (a real cluster's workers say theirs)."""

    quotas: dict[str, dict[str, float]] = field(default_factory=dict)
    one_distributed_per_server: bool = False
    preference_penalty: float = DEFAULT_PENALTY
    server_labels: dict[str, dict[str, int]] = field(default_factory=dict)
    admission: Admission = field(default_factory=Admission)

    KEYS = ("quotas", "one_distributed_per_server", "preference_penalty", "server_labels", "admission")

    @property
    def empty(self) -> bool:
        return self == ClusterRules()

    @classmethod
    def from_dict(cls, data: object, where: str = "rules") -> ClusterRules:
        if data is None:
            return cls()
        require(isinstance(data, Mapping), where, data, "expected an object")
        for key in data:
            require(key in cls.KEYS, f"{where}.{key}", data[key], f"unknown field; known: {', '.join(cls.KEYS)}")
        quotas = data.get("quotas") or {}
        require(isinstance(quotas, Mapping), f"{where}.quotas", quotas, "must map entity -> {worker type: GPUs}")
        q: dict[str, dict[str, float]] = {}
        for ent, per in quotas.items():
            require(isinstance(per, Mapping) and per, f"{where}.quotas.{ent}", per, "must map worker type -> GPUs")
            for w, n in per.items():
                require(isinstance(n, (int, float)) and not isinstance(n, bool) and math.isfinite(n) and n >= 0,
                        f"{where}.quotas.{ent}.{w}", n, "must be a number of GPUs >= 0")
            q[str(ent)] = {str(w).lower(): float(n) for w, n in per.items()}
        labels = data.get("server_labels") or {}
        require(isinstance(labels, Mapping), f"{where}.server_labels", labels, "must map type -> {label: servers}")
        sl: dict[str, dict[str, int]] = {}
        for w, per in labels.items():
            require(isinstance(per, Mapping), f"{where}.server_labels.{w}", per, "must map label -> server count")
            for label, n in per.items():
                require(isinstance(n, int) and not isinstance(n, bool) and n >= 0,
                        f"{where}.server_labels.{w}.{label}", n, "must be an integer number of servers >= 0")
            sl[str(w).lower()] = dict(per)
        one = data.get("one_distributed_per_server", False)
        require(isinstance(one, bool), f"{where}.one_distributed_per_server", one, "must be true or false")
        pen = data.get("preference_penalty", DEFAULT_PENALTY)
        require(isinstance(pen, (int, float)) and not isinstance(pen, bool) and 0 <= pen < 1,
                f"{where}.preference_penalty", pen, "must be a number in [0, 1)")
        return cls(q, one, float(pen), sl, Admission.from_dict(data.get("admission"), f"{where}.admission"))

    def check_types(self, worker_types: list[str], where: str = "rules") -> None:
        """Every type a quota or label names is one of the cluster's."""
        for ent, per in self.quotas.items():
            for w in per:
                require(w in worker_types, f"{where}.quotas.{ent}", w,
                        f"unknown worker type; known: {', '.join(worker_types)}")
        for w in self.server_labels:
            require(w in worker_types, f"{where}.server_labels", w,
                    f"unknown worker type; known: {', '.join(worker_types)}")

    def check_entities(self, declared, where: str = "rules", declare_in: str = "'entities'") -> None:
        """Every entity a quota names is declared."""
        for ent in self.quotas:
            check_entity(ent, declared, f"{where}.quotas", declare_in)


def check_entity(name: str | None, declared, where: str, declare_in: str = "'entities'") -> None:
    """An entity a job or quota names must be declared (with its weight; policies.input.entities)."""
    require(name is None or name in declared, where, name,
            f"not a declared entity (declared: {', '.join(declared) or 'none'}); declare it in {declare_in}")


def entities_of(job_rules) -> list[str | None]:
    """Each job's entity, from its rules (None: the default entity)."""
    return [None if r is None else r.entity for r in job_rules]


def parse_job_rules(data: Mapping, where: str) -> JobRules | None:
    """The rules among a job object's fields, or None when it has none."""
    present = {k: data[k] for k in JobRules.FIELDS if k in data}
    if not present:
        return None
    rules = JobRules.from_dict(present, where)
    return None if rules.empty else rules


def read_cluster_rules(path: str | None, field: str = "--rules") -> ClusterRules | None:
    """A cluster-rules JSON file (simulate --rules, a sweep point's `rules`); None: no file."""
    return None if not path else ClusterRules.from_dict(read_json(path, field), field)
