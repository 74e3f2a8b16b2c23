"""The scheduler loop's planner for a policy, assembled once for the simulator and the scheduler service.

Which planner runs a policy follows from what the policy declares (`PolicySpec.kind`, `.jobs`,
`.gpu_counts`, `.idle_aware`, `.mechanism`), and this module is the one place that reads it:

* a round policy decides every round itself: a `RoundPlanner` (gavel_ng.round_planner) over the
  world's `RoundSource`, placing by the world's server rules;
* an allocation policy: a `PolicyAllocator` over the world's jobs and beliefs, solved when jobs
  come or go, and Gavel's round mechanism (or the ideal time-sharing baseline) turning its
  allocation into rounds: an `AllocationPlanner` (gavel_ng.allocation_planner).

A world (simulator.engine, runtime.service) states what it has in a `World`: its jobs, what the
policy believes of them, its GPUs, rules and clock, and the mechanism settings it runs. The
loop is then `SchedulerLoop(assembled.planner, executor, admission, owner)` in both, and the
loop never asks which kind it runs. The checks of what a policy's kind allows (settings,
which jobs adapt, what a job may ask for) are here too, so that both worlds refuse the same.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from contextlib import AbstractContextManager
from dataclasses import dataclass, field

import numpy as np

from .allocation_planner import AllocationPlanner
from .allocator import JobSource, PolicyAllocator, ThroughputSource
from .cluster import Cluster
from .errors import InputError
from .mechanism import IdealPlanner, MechanismConfig, Planner, RoundMechanism
from .policies.input.entities import Entity
from .policies.input.scheduling_problem import SchedulingProblem
from .policies.lp.pipeline import solve
from .policies.registry import ADAPTIVE, BOTH, FIXED, PolicySpec
from .policies.rounds import RoundJobs, RoundSource
from .round_planner import DEFAULT_GPU_COUNTS, RoundPlanner
from .rules.compile import RuleCompiler
from .topology import Topology


@dataclass(frozen=True)
class World:
    """What the simulator or a cluster gives the assembly. `capacity`: GPUs per worker type, or a callable
    read at each solve (a live cluster). `mechanism`: the world's mechanism settings, to which the
    policy's declared ones are added unless `policy_mechanism` is False (the prototype's mechanism,
    `--gavel-compat`, as it was). `ideal`: the ideal time-sharing baseline instead of the mechanism."""

    topology: Topology
    clock: Callable[[], float]
    jobs: JobSource                        # an allocation policy's job data (PolicyJobs by job id)
    throughputs: ThroughputSource          # what an allocation policy believes of them
    rounds: RoundSource | None             # a round policy's view of the jobs (policies.rounds)
    capacity: np.ndarray | Callable[[], np.ndarray]
    rules: RuleCompiler | None = None      # rules compiled into an allocation policy's input
    server_rules: object | None = None     # the placer's (gavel_ng.rules.placement.ServerRules)
    entities: Mapping[str, Entity] = field(default_factory=dict)
    prices: Mapping[str, float] | None = None
    options: dict = field(default_factory=dict)   # the policy's own options
    mechanism: MechanismConfig = field(default_factory=MechanismConfig)
    policy_mechanism: bool = True
    ideal: bool = False
    min_solve_interval: float = 0.0
    space_sharing: bool = False
    placement_sensitive: bool = False
    warm: bool = True
    lock: AbstractContextManager | None = None
    on_solve: Callable | None = None
    policy_errors: str = "raise"
    realloc_delay: float = 0.0             # what a round policy's adaptive job loses to a new configuration
    gpu_counts: tuple[int, ...] = DEFAULT_GPU_COUNTS
    seed: int = 0


@dataclass(frozen=True)
class Assembled:
    """The planner the loop runs, and what a world may show or offer beside it."""

    planner: Planner
    allocator: PolicyAllocator | None      # an allocation policy's (its fallbacks, errors); None: a round policy
    arrivals: Callable | None              # (job ids, plan) -> Waitlist of jobs no allocation knows, offered GPUs
                                           # that idle mid-round; None: none (a round policy, or no backfill)
    name: str                              # the policy as solved (NAME_packed under space sharing)
    decides_rounds: bool                   # the policy decides each round itself (status shows its decision)


@dataclass(frozen=True)
class Keep:
    """How a world keeps each kind of planner on its own terms (a live cluster: on its workers as they come
    and go, its memory durable; runtime.planner): each takes the assembled planner and gives the one the
    loop runs."""

    allocation: Callable[[AllocationPlanner], Planner]
    rounds: Callable[[RoundPlanner], Planner]


def assemble(spec: PolicySpec, world: World, keep: Keep | None = None) -> Assembled:
    """The planner for `spec` in `world` (module docstring), kept as `keep` says (None: as built)."""
    if spec.is_round:
        planner = RoundPlanner(spec.name, spec.decider(world.options), world.rounds, world.topology, world.clock,
                               realloc_delay=world.realloc_delay, gpu_counts=spec.gpu_counts or world.gpu_counts,
                               seed=world.seed, rules=world.server_rules)
        return Assembled(planner if keep is None else keep.rounds(planner), None, None, spec.name, True)
    allocator = PolicyAllocator(spec.name, list(world.topology.worker_types), world.jobs, world.throughputs,
                                world.capacity, prices=world.prices, space_sharing=world.space_sharing,
                                placement_sensitive=world.placement_sensitive, warm=world.warm, lock=world.lock,
                                rules=world.rules, entities=world.entities, on_solve=world.on_solve,
                                policy_errors=world.policy_errors, options=world.options)
    if world.ideal:
        mech = IdealPlanner(allocator.columns.num, world.mechanism.round_seconds)
    else:
        cfg = world.mechanism.for_policy(allocator.spec) if world.policy_mechanism else world.mechanism
        mech = RoundMechanism(world.topology, cfg, allocator.columns, rules=world.server_rules)
    planner = AllocationPlanner(allocator, mech, world.min_solve_interval)
    return Assembled(planner if keep is None else keep.allocation(planner), allocator,
                     planner.arrivals if mech.backfills else None, allocator.spec.name, False)


# ----- the policy tried once, before a scheduler starts (runtime.probe) -------------------------------------
PROBE_GPUS = 4   # per worker type, on one server: room for both jobs on each type


def probe(spec: PolicySpec, worker_types: list[str], prices: Mapping[str, float] | None = None,
          options: dict | None = None) -> None:
    """Run the policy once on two one-GPU jobs, equally fast on every type, the way its kind runs: an
    allocation policy stated and solved, a round policy asked for one round (one of adaptive jobs only needs
    their goodput models: not tried). Raises what the policy raises (runtime.probe says which errors count)."""
    if not spec.is_round:
        J = len(worker_types)
        price = None if not prices or any(w not in prices for w in worker_types) else [prices[w] for w in worker_types]
        inp = SchedulingProblem.build([0, 1], list(worker_types), np.full(J, float(PROBE_GPUS)),
                                      np.ones((2, J)), steps_remaining=np.array([1000.0, 2000.0]),
                                      steps_total=np.array([1000.0, 2000.0]), time_since_arrival=np.array([60.0, 0.0]),
                                      prices=price)
        solve(inp, spec.name, options=options)
    elif spec.jobs != ADAPTIVE:
        gpus = {w: PROBE_GPUS for w in worker_types}
        planner = RoundPlanner(spec.name, spec.decider(options), _ProbeJobs(len(worker_types)),
                               Topology.from_cluster(Cluster(gpus, gpus)), lambda: 0.0,
                               gpu_counts=spec.gpu_counts if spec.gpu_counts is not None else (1, 2, 4))
        planner.arrive([0, 1])
        planner.plan(0.0)


class _ProbeJobs:
    """The probe's two fixed one-GPU jobs, as a RoundSource."""

    def __init__(self, types: int):
        self.types = types

    def round_jobs(self, jobs: list[int]) -> RoundJobs:
        n = len(jobs)
        return RoundJobs(np.zeros(n, bool), np.ones(n, np.int64), np.ones((n, self.types)), np.zeros(n),
                         np.zeros(n, np.int64))

    def goodput(self, jobs, worker_type, gpus, servers) -> np.ndarray:
        return np.zeros((len(jobs), len(gpus)))


# ----- what a policy's kind allows ------------------------------------------------------------------
def check_settings(spec: PolicySpec, settings: Mapping[str, bool], why: str | None = None) -> None:
    """InputError naming the first setting of Gavel's allocation path (flag -> on) that a round policy
    has no use for (`why`: the reason given; default: it does not apply)."""
    if not spec.is_round:
        return
    for flag, on in settings.items():
        if on:
            raise InputError(flag, True, f"{spec.name} is a round policy: {why or f'{flag} does not apply'}")


def bind_options(spec: PolicySpec, options: dict | None) -> object:
    """The policy as one run states it with these options: a round policy's decide(ctx), an allocation
    policy's bound spec (InputError naming an option it does not take; the policy's own TypeError or
    ValueError for a value it refuses)."""
    return spec.decider(options) if spec.is_round else spec.bind(options)


def adaptive_jobs(spec: PolicySpec, has_model: np.ndarray,
                  none_have: str = "no job has an adaptive spec") -> np.ndarray:
    """Which jobs run adaptive under this policy, of those with a goodput model (`has_model`): none under an
    allocation policy or a FIXED round policy, those with one under BOTH; under ADAPTIVE every job must
    have one (else InputError, saying `none_have` when none has)."""
    has = np.asarray(has_model, bool)
    if spec.is_round and spec.jobs == ADAPTIVE and not has.all():
        what = none_have if not has.any() else f"{int((~has).sum())} of its {len(has)} jobs have no adaptive spec"
        raise InputError("--policy", spec.name, f"{spec.name} runs adaptive jobs only: {what}")
    return has.copy() if spec.is_round and spec.jobs in (ADAPTIVE, BOTH) else np.zeros(len(has), bool)


def runs_adaptive(spec: PolicySpec) -> bool:
    """Whether the policy runs a job with an adaptive spec adaptively (a round policy not declared FIXED)."""
    return spec.is_round and spec.jobs != FIXED


def check_job(spec: PolicySpec, adaptive: bool, preferred_types, where: str) -> None:
    """What the policy's declared properties refuse of one job: a fixed job under a policy that runs
    adaptive jobs only, and soft type preferences under a round policy (it picks each round's type itself)."""
    if not spec.is_round:
        return
    if spec.jobs == ADAPTIVE and not adaptive:
        raise InputError(f"{where}.adaptive", None, f"required: {spec.name} runs adaptive jobs only")
    if preferred_types:
        raise InputError(f"{where}.preferred_types", list(preferred_types),
                         f"not honoured by {spec.name}, a round policy (it picks each round's type itself); "
                         "use allowed_types")

