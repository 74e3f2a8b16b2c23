"""The policies the elastic simulator runs, each with the properties that decide how.

This is the one place that routes by name: `gavel-ng simulate --workload pollux` sends a
policy listed here to `simulate_elastic`, any other to the ordinary simulator with the
workload's fixed jobs. Past that, the simulator decides by the declared properties:

* ``adaptive``: the jobs adapt GPU count and batch size (Pollux's adaptive jobs); when
  False every job is a fixed job at its tuned GPU count and batch (the workload's trace);
* ``type_aware``: the policy sees each worker type's own goodput;
* ``planner``: the policy decides each round's placement itself (a `RoundPolicy`:
  Tiresias's queues, Pollux's search), instead of an allocation LP that Gavel's round
  mechanism turns into rounds.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from types import MappingProxyType

from gavel_ng.errors import InputError


@dataclass(frozen=True)
class ElasticPolicy:
    """One policy of the elastic simulator (module docstring)."""

    name: str
    objective: str
    adaptive: bool
    type_aware: bool
    planner: bool
    make: Callable | None = None   # planner policies: RoundPolicy subclass (state, topology, executor, seed, **options)
    round_seconds: float = 360.0   # how often it decides unless told otherwise (Gavel: 360 s; Pollux, Sia: 60 s)


def _tiresias():
    from .tiresias import TiresiasPolicy
    return TiresiasPolicy


def _goodput(agnostic: bool):
    def load():
        from functools import partial

        from .goodput_rounds import GoodputRounds
        return partial(GoodputRounds, agnostic=agnostic)
    return load


def _pollux():
    from .pollux import PolluxPolicy
    return PolluxPolicy


@dataclass(frozen=True)
class _Lazy:
    """A class imported at first use (the planners import the mechanism; this module does not)."""

    load: Callable

    def __call__(self, *args, **kwargs):
        return self.load()(*args, **kwargs)


ELASTIC_POLICIES: MappingProxyType[str, ElasticPolicy] = MappingProxyType({p.name: p for p in (
    ElasticPolicy("goodput", "every round, one whole (type, GPU count) configuration per job maximizing the "
                  "power mean (p = -1) of speedups at current progress, with a restart factor (0/1 program)",
                  adaptive=True, type_aware=True, planner=True, make=_Lazy(_goodput(False)), round_seconds=60.0),
    ElasticPolicy("goodput_agnostic", "goodput, blind to the worker type (speedups averaged over the types)",
                  adaptive=True, type_aware=False, planner=True, make=_Lazy(_goodput(True)), round_seconds=60.0),
    ElasticPolicy("goodput_lp", "maximize the sum of speedups over (type, GPU count) columns, each job at least "
                  "a floor of its fair share (one LP), carried out by Gavel's time-sharing rounds",
                  adaptive=True, type_aware=True, planner=False),
    ElasticPolicy("tiresias", "two-dimensional LAS (GPUs x time attained) in discretized priority queues, FIFO "
                  "within a queue, consolidated placement; fixed jobs at their tuned GPU count",
                  adaptive=False, type_aware=False, planner=True, make=_Lazy(_tiresias), round_seconds=60.0),
    ElasticPolicy("pollux", "maximize the power mean (p = -1) of speedups over allocation matrices (GPUs per job "
                  "per server) by a population search, re-allocation penalty, one distributed job per server",
                  adaptive=True, type_aware=False, planner=True, make=_Lazy(_pollux), round_seconds=60.0),
)})


def is_elastic_policy(name: str) -> bool:
    """Whether `name` runs in the elastic simulator."""
    return name in ELASTIC_POLICIES


def get_elastic_policy(name: str) -> ElasticPolicy:
    if name not in ELASTIC_POLICIES:
        raise InputError("--policy", name, f"elastic jobs run under {', '.join(ELASTIC_POLICIES)}")
    return ELASTIC_POLICIES[name]
