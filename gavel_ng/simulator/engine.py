"""Trace-driven simulation: the shared scheduler loop with the simulated executor."""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace

import numpy as np

from ..assembly import World, assemble
from ..cluster import Cluster
from ..columns import Columns
from ..elastic.workload import POLLUX_NETWORK_GBPS, ElasticTrace, fit_to_cluster, fixed_job_table
from ..errors import InputError
from ..logs import collapse_repeats
from ..mechanism import MechanismConfig, RoundPlan, SchedulerLoop, plan_lead
from ..policies.input.entities import Entity
from ..policies.registry import get_policy, needs_pairs, space_sharing_name
from ..round_planner import DEFAULT_GPU_COUNTS
from ..rules import AdmissionControl, ClusterRules, RuleCompiler, ServerRules, check_entity, simulated_servers
from ..throughputs import ThroughputTable
from ..topology import Topology
from ..traces import Trace, TraceGenerator
from .adaptive import NETWORK_GBPS, AdaptiveRunner, ArraysSource
from .estimated import EstimatedThroughputs
from .executor import JobArrays, SimExecutor
from .learned import LearnedModels
from .metrics import summarize
from .oracle import TableThroughputs
from .restarts import RestartLedger
from .rounds import adaptive_models, check_adaptive_fits, check_round_config

log = logging.getLogger(__name__)
GAVEL_COMPAT_SOLVE_INTERVAL = 1920.0
POLICY_MODELS = ("exact", "learned")
"""What a round policy sees of an adaptive job's goodput: the simulator's exact model, or one learned from
the job's own runs (simulator.learned)."""
DAY = 86400.0


@dataclass(frozen=True)
class SimConfig:
    """How to simulate. `window` is a half-open range of job ids whose JCTs are measured.

    `round_seconds` None: the policy's declared interval (PolicySpec.round_seconds). `options` are the
    policy's keyword options, of either kind. `realloc_delay` and `gpu_counts` are a round policy's; an
    adaptive job pays the delay on every change of configuration."""

    policy: str = "las"
    round_seconds: float | None = None
    window: tuple[int, int] | None = None
    min_solve_interval: float = 0.0
    preemption_overhead_s: float = 0.0
    start_overhead_s: float | None = None  # a mid-round start on free GPUs (backfill); None: preemption_overhead_s
    ideal: bool = False
    gavel_compat: bool = False
    warm_start: bool = True
    seed: int = 0
    max_sim_seconds: float | None = None   # None: 2 x last window arrival + 60 days
    max_active_jobs: int = 4000
    reset_ledger: bool = False             # the paper's literal ledger instead of the decayed one
    prices: dict[str, float] = field(default_factory=dict)
    space_sharing: bool = False            # solve NAME_packed: jobs may share a GPU (gandiva, *_packed always do)
    placement_sensitive: bool = False      # TYPE_unconsolidated twin columns (placement-sensitive policy)
    estimate_throughputs: bool = False     # the policy sees a ThroughputEstimator, not the table
    profile_fraction: float = 0.25         # share of (type, reference job) cells profiled on arrival
    reference_jobs: int | None = None      # job types the estimator keeps as reference jobs (None: all)
    rules: ClusterRules | None = None      # quotas, server labels, admission (gavel_ng.rules); jobs' own in the trace
    entities: dict[str, Entity] = field(default_factory=dict)   # declared entities; a job's in its trace rules
    realloc_delay: float = 30.0            # seconds an adaptive job loses when its configuration changes
    gpu_counts: tuple[int, ...] = DEFAULT_GPU_COUNTS   # round policies' GPU counts (one declaring its own: those)
    options: dict = field(default_factory=dict)         # the policy's options (PolicySpec.decider, .bind)
    backfill: bool = True                  # GPUs freed mid-round go to waiting entries (off under gavel_compat)
    plan_ahead: bool = True                # plan rounds mechanism.plan_lead s early, as the runtime (not gavel_compat)
    policy_model: str = "exact"            # what round policies see of adaptive jobs: "exact" or "learned"

    def __post_init__(self) -> None:
        if self.round_seconds is not None and not self.round_seconds > 0:
            raise InputError("--round-seconds", self.round_seconds, "must be positive")
        if not (isinstance(self.realloc_delay, (int, float)) and math.isfinite(self.realloc_delay)
                and self.realloc_delay >= 0):
            raise InputError("--realloc-delay", self.realloc_delay, "must be a number of seconds >= 0")
        if not self.gpu_counts or any(not (isinstance(k, (int, np.integer)) and k >= 1) for k in self.gpu_counts):
            raise InputError("gpu_counts", list(self.gpu_counts), "must be integers >= 1")
        if self.preemption_overhead_s < 0:
            raise InputError("--preemption-overhead", self.preemption_overhead_s, "must be >= 0")
        start = self.start_overhead_s
        if start is not None and not (math.isfinite(start) and start >= 0):
            raise InputError("--start-overhead", self.start_overhead_s, "must be a number of seconds >= 0")
        if self.min_solve_interval < 0:
            raise InputError("--min-solve-interval", self.min_solve_interval, "must be >= 0")
        if self.policy_model not in POLICY_MODELS:
            raise InputError("--policy-model", self.policy_model, f"must be one of {', '.join(POLICY_MODELS)}")
        if not 0.0 <= self.profile_fraction <= 1.0:
            raise InputError("--profile-fraction", self.profile_fraction, "must be between 0 and 1")
        if self.window is not None and not (0 <= self.window[0] < self.window[1]):
            raise InputError("--window", f"{self.window[0]}:{self.window[1]}", "must be START:END with START < END")


def parse_window(text: str | None) -> tuple[int, int] | None:
    """SimConfig.window from its text form, `START:END` job ids (None stays None)."""
    if text is None:
        return None
    lo, sep, hi = text.partition(":")
    try:
        if not sep:
            raise ValueError
        window = int(lo), int(hi)
    except ValueError:
        raise InputError("--window", text, "expected START:END job ids, e.g. 4000:5000") from None
    if not 0 <= window[0] < window[1]:
        raise InputError("--window", text, "needs 0 <= START < END")
    return window


@dataclass
class SimResult:
    summary: dict
    jobs: JobArrays
    window: tuple[int, int]
    job_types: list[str]
    config: SimConfig
    cluster: Cluster
    slo_dropped: np.ndarray | None = None   # per job: its SLO was dropped by the policy at some solve


def simulate(cluster: Cluster, table: ThroughputTable | None, trace: Trace | TraceGenerator | ElasticTrace,
             config: SimConfig,
             progress: Callable[[float, int, int, int], None] | None = None,
             observe: Callable[[RoundPlan], None] | None = None) -> SimResult:
    """Run any policy, by its declared kind, until every job in the window finished (or the caps end
    an overloaded run). An allocation policy runs through Gavel's round mechanism, every job fixed;
    a round policy decides each round itself (gavel_ng.round_planner), adaptive jobs adapting as its
    `jobs` declares. An `ElasticTrace` (a Pollux workload) is first fit to the cluster; without a
    `table` its fixed jobs run at `fixed_job_table`'s steps/s; its window is all its jobs.

    `observe(plan)` sees every round's plan after it ran (tests, traces of decisions).
    A warning that repeats during the run is logged once, then counted: the summary's
    "warnings" lists each kind with its count and the jobs concerned (gavel_ng.logs)."""
    with collapse_repeats() as ledger:
        result = _simulate(cluster, table, trace, config, progress, observe)
    result.summary["warnings"] = ledger.summary()
    lo, hi = result.window
    result.summary["slo_dropped"] = int(result.slo_dropped[lo:hi].sum())
    return result


def _simulate(cluster: Cluster, table: ThroughputTable | None, trace, config: SimConfig,
              progress: Callable[[float, int, int, int], None] | None,
              observe: Callable[[RoundPlan], None] | None) -> SimResult:
    wall = time.perf_counter()
    workers = cluster.worker_types
    spec = get_policy(config.policy)
    config = replace(config, round_seconds=spec.round_seconds if config.round_seconds is None
                     else config.round_seconds)
    etrace = None
    if isinstance(trace, ElasticTrace):
        etrace = fit_to_cluster(trace, cluster)
        trace = etrace.trace
        if table is None:
            table = fixed_job_table(etrace, workers, network_gbps=POLLUX_NETWORK_GBPS, profiles=etrace.profiles)
    elif table is None:
        raise InputError("table", None, "a Gavel trace needs a throughput table (simulator.default_table)")
    for w in workers:
        if w not in table.worker_types:
            known = ", ".join(table.worker_types)
            raise InputError("--cluster", w, f"worker type not in the throughput table ({known})")
    generator = trace if isinstance(trace, TraceGenerator) else None
    full = generator.trace if generator else trace
    window = _window(config.window, generator, full)
    if generator:
        generator.ensure(window[1])
    full.check_against(table)
    models = adaptive_models(spec, etrace, len(full))
    jobs = JobArrays.empty(table, workers, models)
    crules = config.rules or ClusterRules()
    crules.check_types(workers)
    compiler = RuleCompiler(crules, simulated_servers(cluster.gpus, cluster.server_size, crules))
    ruled = not crules.empty or any(r is not None and r.constrains for r in full.rules)
    crules.check_entities(config.entities, "--rules", "--entities")
    check_round_config(spec, config, full.rules)
    check_adaptive_fits(models, cluster, config.gpu_counts)
    _check_fits(full, jobs, cluster, compiler if ruled else None, config.entities,
                None if models is None else models.adaptive)
    source = (lambda n: generator.ensure(n)) if generator else (lambda n: full)
    # cost policies see the same prices the cost metric uses (built-in list prices unless given)
    priced = cluster.priced(config.prices)
    prices = [priced.price_per_gpu_hour.get(w, np.nan) for w in workers]
    topology = Topology.from_cluster(cluster, crules.server_labels)
    admission = None if crules.admission.accept_all else AdmissionControl(crules.admission)
    owner = lambda m: (getattr(jobs.rules_of(m), "user", None), int(jobs.sf[m]))  # noqa: E731
    packed = needs_pairs(space_sharing_name(config.policy, config.space_sharing))
    if packed:
        jobs.add_pairs(table, workers)
    columns = Columns.types(workers, config.placement_sensitive)
    estimator = EstimatedThroughputs(table, jobs, workers, config.profile_fraction, config.reference_jobs,
                                     seed=config.seed) if config.estimate_throughputs else None
    beliefs = estimator if estimator is not None else TableThroughputs(jobs, table, columns.names, pairs=packed)
    restarts = RestartLedger(config.round_seconds, topology.gpu_server) if jobs.measured_restarts else None
    learned = LearnedModels(jobs, workers, NETWORK_GBPS) if jobs.any_adaptive and config.policy_model == "learned" \
        else None
    adaptive = AdaptiveRunner(jobs, topology, workers, config.round_seconds, config.realloc_delay, NETWORK_GBPS,
                              ledger=restarts, learned=learned) if jobs.any_adaptive else None
    lo, hi = window
    left = [hi - lo]

    def finished(ids: np.ndarray) -> None:
        left[0] -= int(((ids >= lo) & (ids < hi)).sum())

    # the executor, built below with what the assembled planner offers it, keeps the simulated clock
    world = World(topology, lambda: ex.now(), jobs, beliefs,
                  ArraysSource(jobs, workers, learned=learned, restarts=restarts), cluster.capacity(),
                  rules=compiler if ruled else None,
                  server_rules=ServerRules(crules, jobs.rules_of) if ruled else None, entities=config.entities,
                  prices=priced.price_per_gpu_hour, options=config.options, mechanism=_mechanism(config, spec.agnostic),
                  policy_mechanism=not config.gavel_compat, ideal=config.ideal,
                  min_solve_interval=GAVEL_COMPAT_SOLVE_INTERVAL if config.gavel_compat and
                  config.min_solve_interval == 0 else config.min_solve_interval,
                  space_sharing=config.space_sharing, placement_sensitive=config.placement_sensitive,
                  warm=config.warm_start, realloc_delay=config.realloc_delay, gpu_counts=config.gpu_counts,
                  seed=config.seed)
    built = assemble(spec, world)
    # mid-round arrivals start on idle GPUs, as on a cluster; under admission or rules they wait for the
    # round (admission and rules first see a job there)
    arrivals = built.arrivals if admission is None and not ruled else None
    ex = SimExecutor(jobs, source, config.round_seconds, len(workers), config.preemption_overhead_s,
                     integer_steps=config.gavel_compat, col_pool=None if columns.plain else columns.pool,
                     prices=prices, restarts=restarts, adaptive=adaptive,
                     on_round=_observers(estimator.on_round if estimator is not None else None,
                                         None if observe is None else lambda plan, *_: observe(plan)),
                     on_finish=finished, arrivals=arrivals,
                     plan_lead=plan_lead(config.round_seconds) if config.plan_ahead and not config.gavel_compat
                     and not config.ideal else 0.0, start_overhead=config.start_overhead_s)
    loop = SchedulerLoop(built.planner, ex, admission, owner)
    last_arrival = float(full.arrivals[lo:hi].max())
    cap = config.max_sim_seconds if config.max_sim_seconds is not None else 2 * last_arrival + 60 * DAY
    unstable, reason = False, ""
    while left[0] > 0:
        if ex.now() > cap:
            unstable, reason = True, f"simulated time passed the cap of {cap / 3600:.0f} h"
            break
        if len(loop.active) > config.max_active_jobs:
            unstable, reason = True, f"more than {config.max_active_jobs} active jobs"
            break
        if not loop.active and ex.next_arrival() is None and ex.unfinished == 0:
            break  # a finite trace ran dry (jobs that fit nowhere cannot happen: checked above)
        loop.step()
        if progress is not None and loop.stats.rounds % 200 == 0:
            progress(ex.now(), hi - lo - left[0], hi - lo, len(loop.active))
    if unstable:
        log.warning("run marked unstable: %s", reason)
    summary = summarize(config, cluster, jobs, window, ex, loop.stats, unstable, reason,
                        time.perf_counter() - wall)
    summary["refused"] = sum(1 for m in ex.refused if lo <= m < hi)   # admission refusals in the window
    summary["refusals"] = dict(admission.refusals) if admission is not None else {}
    # the window's admitted jobs, and those of them without a finish (the caps ended the run): left out of
    # every average, so a run with any reads better than it is (issue 37)
    summary["jobs_in_window"] = min(hi, len(jobs)) - lo - summary["refused"]
    summary["jobs_unfinished"] = summary["jobs_in_window"] - summary["jobs_measured"]
    summary.update(built.planner.summary())   # solver fallbacks, the policy solved, mode, backfill, constraints
    summary["policy_model"] = config.policy_model if jobs.any_adaptive else "exact"
    summary["placement_sensitive"] = bool(config.placement_sensitive)
    summary["backfilled_entries"] = ex.backfilled
    summary["backfill_gpu_hours"] = round(ex.backfill_gpu_seconds / 3600, 3)
    summary["paired_fraction"] = round(ex.paired_seconds / ex.run_seconds, 6) if ex.run_seconds else 0.0
    summary["estimated_throughputs"] = estimator is not None
    if estimator is not None:
        summary["estimator_measurements"] = estimator.measurements
        summary["estimator_rejected"] = estimator.est.rejected
    dropped = np.zeros(len(jobs), bool)
    dropped[sorted(built.planner.slo_dropped)] = True
    return SimResult(summary, jobs, window, full.job_types, config, cluster, dropped)


def _mechanism(config: SimConfig, agnostic: bool) -> MechanismConfig:
    """The run's settings of Gavel's round mechanism (an allocation policy's; the assembly adds the policy's
    own declared ones unless --gavel-compat runs the prototype's as it was)."""
    mcfg = MechanismConfig.gavel_compat(agnostic, config.seed) if config.gavel_compat \
        else MechanismConfig.since_reset(config.seed) if config.reset_ledger else MechanismConfig(seed=config.seed)
    if not config.backfill:
        mcfg = replace(mcfg, mid_round_backfill=False)
    return replace(mcfg, round_seconds=config.round_seconds)   # (measures the policy's constraints per round)


def _observers(*callbacks):
    """One on_round callback calling each given one in order (None: none given)."""
    given = [c for c in callbacks if c is not None]
    if not given:
        return None
    if len(given) == 1:
        return given[0]

    def on_round(plan, steps, start, used):
        for c in given:
            c(plan, steps, start, used)

    return on_round


def _window(window: tuple[int, int] | None, generator: TraceGenerator | None, trace: Trace) -> tuple[int, int]:
    if window is None:
        if generator is not None:
            return 4000, 5000
        return 0, len(trace)
    if generator is None and window[1] > len(trace):
        raise InputError("--window", f"{window[0]}:{window[1]}", f"past the trace's end ({len(trace)} jobs)")
    return window


def _check_fits(trace: Trace, jobs: JobArrays, cluster: Cluster, rules: RuleCompiler | None = None,
                entities: dict | None = None, adaptive: np.ndarray | None = None) -> None:
    """A job no worker type can run would never finish: reject it up front, naming it (and the rule
    that leaves it nowhere, gavel_ng.rules); so is one whose entity is not declared."""
    cap = cluster.capacity()
    index = {k: i for i, k in enumerate(jobs.key_list)}
    workers = cluster.worker_types
    for i, (t, sf) in enumerate(zip(trace.job_types, trace.scale_factors)):
        T = jobs.T[index[(t, int(sf))]]
        if (adaptive is None or not adaptive[i]) and not ((T > 0) & (sf <= cap)).any():
            raise InputError(f"trace job {i}", t, f"fits on no worker type of the cluster (scale factor {sf})")
        r = trace.rules_of(i)
        if r is not None:
            check_entity(r.entity, entities or {}, f"trace job {i} rules.entity", "--entities")
        if rules is not None and (r is not None or rules.rules.quotas):
            if r is not None:
                r.with_type_names(workers, f"trace job {i} rules")
            rules.compile([r], [i], [sf], T[None, :], cap, workers, strict=True)
