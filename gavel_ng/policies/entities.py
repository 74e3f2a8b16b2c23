"""Entities (teams, users) of the hierarchical policy, and the policies used inside them.

An `Entity` has a weight (its share across entities) and names the policy that splits
that share among its own jobs. Those inner policies are registered by name like the
top-level ones, with what the water filling (hierarchical.py) needs to know about each:

- `pooled=False`: every job is its own unit and rises with its own weight (fairness);
- `pooled=True`: the entity's jobs rise together as one unit, and `priority(inp, jobs)`
  says which of them the unit's share goes to first (fifo: the earliest arrivals).

The built-in ones (`fairness`, `fifo`) register themselves in hierarchical.py.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

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


_ENTITY_POLICIES: dict[str, EntityPolicy] = {}


def entity_policy(name: str, summary: str, *, pooled: bool = False,
                  priority: Priority | None = None) -> EntityPolicy:
    """Register how an entity splits its share among its jobs (see the module doc)."""
    if pooled and priority is None:
        raise ValueError(f"entity policy {name}: a pooled policy needs a priority over the entity's jobs")
    spec = EntityPolicy(name, summary, pooled, priority)
    _ENTITY_POLICIES[name] = spec
    return spec


def get_entity_policy(name: str) -> EntityPolicy:
    return _ENTITY_POLICIES[name]


def entity_policies() -> tuple[str, ...]:
    """The names an entity's `policy` may take, in registration order."""
    return tuple(_ENTITY_POLICIES)
