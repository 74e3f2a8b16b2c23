"""Retry pacing toward the scheduler, and the two lines an outage is told in.

A scheduler that cannot be reached is normal for a while (started later, restarting): the
worker retries with doubling pauses and says so once when it begins and once when it ends,
not once per attempt.
"""

from __future__ import annotations

import logging
import time

log = logging.getLogger("gavel_ng.worker.daemon")


class Backoff:
    def __init__(self, target: str, first: float = 0.5, cap: float = 10.0, clock=time.monotonic):
        self.target, self.first, self.cap, self.clock = target, first, cap, clock
        self.since: float | None = None      # when the current outage began
        self.failures = 0

    def failed(self, code: str) -> float:
        """Count one failed call; the pause before the next (first, doubling, at most cap)."""
        if self.since is None:
            self.since = self.clock()
            log.warning("scheduler %s unreachable (%s); retrying", self.target, code)
        self.failures += 1
        return min(self.first * 2 ** (self.failures - 1), self.cap)

    def succeeded(self) -> None:
        if self.since is not None:
            log.warning("scheduler %s reachable again after %.0f s (%d failed attempts)", self.target,
                        self.clock() - self.since, self.failures)
        self.since, self.failures = None, 0
