"""Training jobs as the scheduler sees them."""

from __future__ import annotations

import math
from dataclasses import dataclass

from .errors import require


@dataclass
class Job:
    """One training job. `steps_remaining` changes as the job runs; the rest is its spec."""

    id: str
    job_type: str = ""
    scale_factor: int = 1
    weight: float = 1.0
    steps_total: float = math.inf
    steps_remaining: float = math.inf
    arrival_time: float = 0.0
    slo_s: float | None = None
    entity: str | None = None

    def __post_init__(self) -> None:
        f = f"jobs[{self.id}]"
        require(isinstance(self.id, str) and self.id != "", "jobs.id", self.id, "must be a non-empty string")
        require(isinstance(self.scale_factor, int) and not isinstance(self.scale_factor, bool)
                and self.scale_factor >= 1, f"{f}.scale_factor", self.scale_factor, "must be an integer >= 1")
        require(_positive(self.weight), f"{f}.weight", self.weight, "must be a positive number")
        require(_nonneg(self.steps_remaining), f"{f}.steps_remaining", self.steps_remaining,
                "must be a non-negative number")
        if self.steps_total == math.inf and self.steps_remaining != math.inf:
            self.steps_total = self.steps_remaining
        require(_nonneg(self.steps_total) and self.steps_total >= self.steps_remaining,
                f"{f}.steps_total", self.steps_total, "must be >= steps_remaining")
        require(_nonneg(self.arrival_time) and math.isfinite(self.arrival_time),
                f"{f}.arrival_time", self.arrival_time, "must be a finite non-negative number")
        if self.slo_s is not None:
            require(_positive(self.slo_s), f"{f}.slo_s", self.slo_s, "must be a positive number of seconds")

    @property
    def steps_done(self) -> float:
        return self.steps_total - self.steps_remaining


def _nonneg(x: object) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and not math.isnan(x) and x >= 0


def _positive(x: object) -> bool:
    return _nonneg(x) and x > 0 and math.isfinite(x)
