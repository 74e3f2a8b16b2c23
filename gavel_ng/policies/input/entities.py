"""Entities (teams, users) of the hierarchical policy, and the policies used inside them.

An `Entity` has a weight (its share across entities) and names the policy that splits
that share among its own jobs. Those inner policies are registered by name like the
top-level ones (in `ENTITY_POLICIES`, where a name is taken once unless replaced explicitly),
with what the water filling (hierarchical.py) needs to know about each:

- `pooled=False`: every job is its own unit and rises with its own weight (fairness);
- `pooled=True`: the entity's jobs rise together as one unit, and `priority(inp, jobs)`
  says which of them the unit's share goes to first (fifo: the earliest arrivals).

The built-in ones (`fairness`, `fifo`) register themselves in hierarchical.py.

A job names its entity (`Job.entity`, a job file's or trace rules column's `entity`); the
same name keys the entity's GPU quotas (gavel_ng.rules). Entities are declared in one object,
`{"name": {"weight": 2, "policy": "fairness"}}` (`parse_entities`): a problem file's or the
scheduler's cluster config's `"entities"`, `gavel-ng simulate --entities FILE`.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

import numpy as np

from ...errors import read_json, require

DEFAULT_ENTITY_POLICY = "fairness"
# priority(inp, jobs): one number per job index in `jobs` of the SchedulingProblem `inp`, higher first
Priority = Callable[..., np.ndarray]


@dataclass(frozen=True)
class Entity:
    weight: float = 1.0
    policy: str = DEFAULT_ENTITY_POLICY


@dataclass(frozen=True)
class EntityPolicy:
    name: str
    summary: str
    pooled: bool = False
    priority: Priority | None = None


@dataclass
class EntityRegistry:
    """Entity policy names -> EntityPolicy, as the policy registry (registry.Registry) keeps policies: `add`
    refuses a name already taken unless `replace=True`; `kept()` undoes what is registered inside it."""

    specs: dict[str, EntityPolicy] = field(default_factory=dict)

    def add(self, spec: EntityPolicy, replace: bool = False) -> None:
        if spec.name in self.specs and not replace:
            raise ValueError(f"entity policy {spec.name!r} is registered already; register under another name, "
                             "or say replace=True to stand in for it")
        self.specs[spec.name] = spec

    def get(self, name: str) -> EntityPolicy:
        return self.specs[name]

    def names(self) -> tuple[str, ...]:
        """In registration order."""
        return tuple(self.specs)

    @contextlib.contextmanager
    def kept(self) -> Iterator[EntityRegistry]:
        """Everything registered inside leaves at its end."""
        saved = dict(self.specs)
        try:
            yield self
        finally:
            self.specs.clear()
            self.specs.update(saved)


ENTITY_POLICIES = EntityRegistry()


def entity_policy(name: str, summary: str, *, pooled: bool = False, priority: Priority | None = None,
                  replace: bool = False) -> EntityPolicy:
    """Register how an entity splits its share among its jobs (see the module doc); ValueError for a name
    registered already, unless `replace`."""
    if pooled and priority is None:
        raise ValueError(f"entity policy {name}: a pooled policy needs a priority over the entity's jobs")
    spec = EntityPolicy(name, summary, pooled, priority)
    ENTITY_POLICIES.add(spec, replace)
    return spec


def get_entity_policy(name: str) -> EntityPolicy:
    return ENTITY_POLICIES.get(name)


def entity_policies() -> tuple[str, ...]:
    """The names an entity's `policy` may take, in registration order."""
    return ENTITY_POLICIES.names()


def parse_entities(raw: object, where: str = "entities") -> dict[str, Entity]:
    """Declared entities, `{"name": {"weight": w, "policy": p}}` (both optional); None: none."""
    if raw is None:
        return {}
    require(isinstance(raw, dict), where, raw, "must be an object of name: {weight, policy}")
    out = {}
    for name, spec in raw.items():
        require(isinstance(spec, dict), f"{where}.{name}", spec, "must be an object")
        unknown = set(spec) - {"weight", "policy"}
        require(not unknown, f"{where}.{name}", sorted(unknown)[0] if unknown else None,
                "unknown field (expected policy, weight)")
        w = spec.get("weight", 1.0)
        require(isinstance(w, (int, float)) and not isinstance(w, bool) and 0 < w < float("inf"),
                f"{where}.{name}.weight", w, "must be a positive number")
        pol = spec.get("policy", DEFAULT_ENTITY_POLICY)
        require(pol in ENTITY_POLICIES.specs, f"{where}.{name}.policy", pol,
                f"must be one of {', '.join(entity_policies())}")
        out[str(name)] = Entity(float(w), pol)
    return out


def read_entities(path: str | None, field: str = "--entities") -> dict[str, Entity]:
    """An entities JSON file (simulate --entities, a sweep point's `entities`); {}: no file."""
    return {} if not path else parse_entities(read_json(path, field), field)
