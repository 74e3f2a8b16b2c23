"""Gavel's round-based mechanism (§5): priorities, greedy selection, placement, the loop."""

from .backfill import Backfilled, Waitlist, worth_starting
from .core import AllocationRows, JobView, Ledger, MechanismConfig, RoundMechanism, RoundPlan, make_plan
from .placement import Placed, Placer
from .priorities import fractions, priorities
from .round import Allocator, Executor, LoopStats, Planner, RoundResult, SchedulerLoop
from .selection import greedy_select

__all__ = [
    "AllocationRows", "Allocator", "Backfilled", "Waitlist", "worth_starting",
    "Executor", "JobView", "Ledger", "LoopStats", "MechanismConfig", "Placed", "Placer",
    "Planner", "RoundMechanism", "RoundPlan", "RoundResult", "SchedulerLoop",
    "fractions", "greedy_select", "make_plan", "priorities",
]
