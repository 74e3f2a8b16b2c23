"""`goodput`: every round, one whole (worker type, GPU count) configuration per job (Sia-like).

Why per round and whole: Gavel's mechanism turns an allocation of time fractions into
rounds, so an elastic job rotates between configurations (each change costs the 30 s
re-allocation delay), waits for the next round boundary after it arrives, and its
speedups are those of the last arrival or completion while its noise scale grows. On
Pollux's workload under 360 s rounds that cost its first, time-sharing version (`goodput_lp`,
since removed) a job's arrival-to-start wait of about half a round and 2.2 re-allocations per
job (experiments/README.md). Sia
(SOSP'23) instead re-solves every scheduling interval at current progress and gives each
job one configuration; so does this policy:

    choose at most one column c per job m (0/1), GPUs of each type within capacity,
    maximizing the power mean (p = -1 by default, Pollux's) of the jobs' speedups,
    each job weighted by w_m (1 unless `service_hours` is set, below),

where a job's speedup on c is its goodput on c at its current progress over its goodput on
its least productive configuration, times that configuration's GPU count
(`RoundContext.min_speedups`, Sia's normalization; fixed jobs: their rate on a type over
their slowest type's), and a job left waiting counts as speedup `waiting` (1 / 1.1 of its
least productive option: at p = -1 exactly Sia's penalty lambda = 1.1). With one column per
job the p-mean is a sum over the chosen pairs (`configurations.config_values`), so the 0/1
program is exact, and its LP relaxation is nearly integral
(`configurations.solve_configurations`).

**Why these two choices (issue 29).** With the speedup over one GPU of the job's fastest
type and a waiting job worth 1e-3 (Pollux's), `goodput` lost to `sia` by 21 % on average JCT
on the bursty newTrace mix: during a burst it shrank running jobs to start every newcomer
(a waiting job cost 1000 against a speedup of at most tens) and re-weighted jobs as their
best single GPU sped up with progress, so a job was re-configured 2.6x as often as under
`sia` (deepspeech2: 38.8 restarts per job against 10.6). Measured one at a time on seed 1:
Sia's normalization brings the restarts to 6.5 k from 12.1 k and the JCT to 1.21 h from
1.52 h; a waiting job worth 1 / 1.1 then brings them to 4.6 k and 1.18 h (`sia` 1.19 h).
Placement (whole servers like `sia`), the configuration set and p = -0.5 were each measured
and moved it by at most 3 % (experiments/README.md).

**Attained service** (option `service_hours` H, off by default; Tiresias's two queues, which need
no job lengths): w_m = `service_weight` (0.5) for a job that has run H GPU-hours or more, else 1,
so a long job's speedup counts for less than a newcomer's and it yields GPUs to it in a burst.
Weighted, the sum over chosen pairs is still the weighted p-mean's, so the program stays exact.
Two levels, not a weight that falls smoothly with service: identical jobs of one burst would
then trade GPUs round after round (experiments/README.md, issue 29).

**Restart factor** (Sia, as Pollux): for a job that ran last round, every column other
than its current one has its speedup times ``(T - R delta) / (T + delta)`` (age T, R
re-allocations so far, delta the job's restart delay), so a job moves only when moving
pays. A job keeps its GPUs while its configuration stays (the planner's placer), and a job
still paying a restart keeps its configuration (`RoundContext.pinned`, as Sia's artifact does).

`goodput_agnostic` is the type-blind twin: it sees each (job, GPU count) averaged over the
types, solves with one pool of GPUs and puts each job on a type it does not choose for
speed (`configurations.solve_configurations`).
"""

from __future__ import annotations

import numpy as np

from ...errors import InputError
from ..registry import BOTH, round_policy
from ..rounds import RoundContext
from ..rounds.configurations import DEFAULT_P, STARVED, config_values, solve_configurations
from .sia import DEFAULT_LAMBDA

WAITING = 1.0 / DEFAULT_LAMBDA   # a waiting job's speedup, in units of its least productive configuration


@round_policy("goodput", "every round, one whole (type, GPU count) configuration per job maximizing the power "
              "mean (p = -1) of speedups at current progress, with a restart factor (0/1 program)",
              jobs=BOTH, round_seconds=60.0)
class Goodput:
    """The per-round `goodput` policy (module docstring). Options: `p` (the power mean's exponent),
    `restart_factor` (off: a job moves whenever moving looks better this round), `waiting` (the
    speedup a job without GPUs counts as: lower starts every job sooner at the others' expense),
    `service_hours` and `service_weight` (the attained-service weights; off by default)."""

    agnostic = False

    def __init__(self, p: float = DEFAULT_P, restart_factor: bool = True, waiting: float = WAITING,
                 service_hours: float | None = None, service_weight: float = 0.5):
        config_values(np.ones((1, 1)), p, waiting)   # validates p and waiting
        self.p = float(p)
        self.restart = bool(restart_factor)
        self.waiting = float(waiting)
        if service_hours is not None and not (_number(service_hours) and np.isfinite(service_hours)
                                              and service_hours > 0):
            raise InputError("goodput.service_hours", service_hours,
                             "must be a number of GPU-hours > 0, or null (every job weighs the same)")
        if not (_number(service_weight) and 0 < service_weight <= 1):
            raise InputError("goodput.service_weight", service_weight, "must be a number in (0, 1]")
        self.service_hours = None if service_hours is None else float(service_hours)
        self.service_weight = float(service_weight)

    def service_weights(self, ctx: RoundContext) -> np.ndarray | None:
        """Each job's weight in the objective: `service_weight` once it has run `service_hours` GPU-hours,
        else 1 (None: the option is off)."""
        if self.service_hours is None:
            return None
        return np.where(np.asarray(ctx.attained, float) >= self.service_hours * 3600.0, self.service_weight, 1.0)

    def decide(self, ctx: RoundContext) -> np.ndarray:
        S = ctx.min_speedups
        waiting = np.full(len(ctx.jobs), self.waiting)
        if self.restart:
            S = ctx.with_restart_factor(S)
            # a running job left out must restart to resume: its waiting is a move like any other
            running = ctx.current >= 0
            waiting[running] = np.maximum(self.waiting * ctx.restart_factor()[running], STARVED)
        w = self.service_weights(ctx)
        return ctx.around_pinned(lambda rows, cap: solve_configurations(
            S[rows], ctx.need[rows], ctx.columns, cap, self.p, self.agnostic, ctx.current_type[rows],
            waiting=waiting[rows], weights=None if w is None else w[rows]))


def _number(x) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool)


@round_policy("goodput_agnostic", "goodput, blind to the worker type (speedups averaged over the types)",
              jobs=BOTH, round_seconds=60.0, type_aware=False)
class GoodputAgnostic(Goodput):
    """`goodput` blind to the worker type: each (job, GPU count) averaged over the types, one pool of GPUs."""

    agnostic = True
