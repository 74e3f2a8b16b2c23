"""Gavel's round-based mechanism (§5): priorities, greedy selection, placement, the ideal baseline, the loop."""

from .backfill import Backfilled, Waitlist, may_start, worth_starting
from .core import AllocationRows, JobView, Ledger, MechanismConfig, RoundMechanism, RoundPlan, make_plan
from .ideal import IdealPlanner
from .loop import Admission, Allocator, Executor, LoopStats, Planner, RoundResult, SchedulerLoop, plan_lead
from .placement import Placed, Placer
from .priorities import fractions, priorities
from .selection import greedy_select

__all__ = [
    "Admission", "AllocationRows", "Allocator", "Backfilled", "Waitlist", "may_start", "worth_starting",
    "Executor", "IdealPlanner", "JobView", "Ledger", "LoopStats", "MechanismConfig", "Placed", "Placer",
    "Planner", "RoundMechanism", "RoundPlan", "RoundResult", "SchedulerLoop",
    "fractions", "greedy_select", "make_plan", "plan_lead", "priorities",
]
