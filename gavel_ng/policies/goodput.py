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

where the speedup is the job's goodput on c at its current progress over its goodput on
one GPU of its fastest type (`RoundContext.speedups`; fixed jobs take their scale
factor on a type). With one column per job the p-mean is a sum over
the chosen pairs (`configurations.config_values`), so the 0/1 program is exact, and its LP
relaxation is nearly integral (`configurations.solve_configurations`).

**Restart factor** (Sia, as Pollux): for a job that ran last round, every column other
than its current one has its speedup times ``(T - R delta) / (T + delta)`` (age T, R
re-allocations so far, delta the re-allocation delay), so a job moves only when moving
pays. A job keeps its GPUs while its configuration stays (the planner's placer).

`goodput_agnostic` is the type-blind twin: it sees each (job, GPU count) averaged over the
types, solves with one pool of GPUs and puts each job on a type it does not choose for
speed (`configurations.solve_configurations`).
"""

from __future__ import annotations

import numpy as np

from .configurations import DEFAULT_P, config_values, solve_configurations
from .registry import BOTH, round_policy
from .rounds import RoundContext


@round_policy("goodput", "every round, one whole (type, GPU count) configuration per job maximizing the power "
              "mean (p = -1) of speedups at current progress, with a restart factor (0/1 program)",
              jobs=BOTH, round_seconds=60.0)
class Goodput:
    """The per-round `goodput` policy (module docstring). Options: `p` (the power mean's exponent),
    `restart_factor` (off: a job moves whenever moving looks better this round)."""

    agnostic = False

    def __init__(self, p: float = DEFAULT_P, restart_factor: bool = True):
        config_values(np.ones((1, 1)), p)   # validates p
        self.p = float(p)
        self.restart = bool(restart_factor)

    def decide(self, ctx: RoundContext) -> np.ndarray:
        S, current = ctx.speedups, ctx.current
        running = current >= 0
        if self.restart and running.any():
            f = ctx.restart_factor()
            stay = np.zeros_like(S, bool)
            stay[np.flatnonzero(running), current[running]] = True
            S = np.where(running[:, None] & ~stay, S * f[:, None], S)
        return solve_configurations(S, ctx.need, ctx.columns, ctx.capacity, self.p, self.agnostic, ctx.current_type)


@round_policy("goodput_agnostic", "goodput, blind to the worker type (speedups averaged over the types)",
              jobs=BOTH, round_seconds=60.0, type_aware=False)
class GoodputAgnostic(Goodput):
    """`goodput` blind to the worker type: each (job, GPU count) averaged over the types, one pool of GPUs."""

    agnostic = True
