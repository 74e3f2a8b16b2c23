"""How many handler threads each caller may hold at once (the server's admission of calls).

A server has a fixed pool of handler threads; a caller that keeps many calls in flight
(a job hammering UpdateLease, a script polling status in a loop) would hold all of them
and starve the workers' heartbeats, so the scheduler would declare healthy workers dead.
Calls are put in classes, each with a cap per caller and a cap for the class as a whole;
a call over either cap is answered RESOURCE_EXHAUSTED at once. The caps of the job and
client classes together stay below the pool, so worker calls (RegisterWorker, Heartbeat,
ReportDone) always find a thread.
"""

from __future__ import annotations

import threading
from collections import Counter
from dataclasses import dataclass

WORKER_METHODS = frozenset({"RegisterWorker", "Heartbeat", "ReportDone", "ReportDones", "RunJob", "RunJobs",
                            "KillJob"})
MAX_BATCH = 256           # items in one ReportDones or RunJobs call (bounds its memory; senders split longer lists)
STATUS_JOBS, MAX_STATUS_JOBS = 100, 1000    # jobs listed by GetStatus: default, most
JOB_METHODS = frozenset({"InitJob", "UpdateLease"})


@dataclass(frozen=True)
class Caps:
    """Per-caller and per-class in-flight caps for a pool of `pool` threads."""

    pool: int
    per_job: int = 2          # one job attempt (its job token); its ranks renew one lease each
    per_client: int = 4       # one client connection on the cluster token (submit, status, cancel)
    # worker calls (heartbeat, register, report; RunJob/KillJob on a worker) are not capped: the
    # caps above keep threads free for them, and a refused RunJob would write the worker off

    @property
    def jobs(self) -> int:    # every job call together: half the pool
        return max(1, self.pool // 2)

    @property
    def clients(self) -> int:  # every client call together: a quarter of the pool
        return max(1, self.pool // 4)


class CallLimiter:
    """Counts calls in flight by (class, caller); `enter` says whether one more may start."""

    def __init__(self, caps: Caps):
        self.caps = caps
        self._lock = threading.Lock()
        self._by_caller: Counter = Counter()
        self._by_class: Counter = Counter()

    def classify(self, method: str, job: tuple[int, int] | None, peer: str) -> tuple[str, object]:
        """(class, caller key): job-token calls are keyed by (job, attempt), cluster-token ones by connection."""
        if job is not None or method in JOB_METHODS:
            return "job", job if job is not None else peer
        return ("worker" if method in WORKER_METHODS else "client"), peer

    def _caps(self, cls: str) -> tuple[int | None, int | None]:
        c = self.caps
        return {"job": (c.per_job, c.jobs), "client": (c.per_client, c.clients), "worker": (None, None)}[cls]

    def enter(self, cls: str, caller: object) -> str | None:
        """None when the call may run (then `leave` it), else why not."""
        per_caller, per_class = self._caps(cls)
        with self._lock:
            if per_caller is not None and self._by_caller[(cls, caller)] >= per_caller:
                return f"at most {per_caller} {cls} calls in flight per caller"
            if per_class is not None and self._by_class[cls] >= per_class:
                return f"at most {per_class} {cls} calls in flight in all"
            self._by_caller[(cls, caller)] += 1
            self._by_class[cls] += 1
        return None

    def leave(self, cls: str, caller: object) -> None:
        with self._lock:
            self._by_caller[(cls, caller)] -= 1
            if self._by_caller[(cls, caller)] <= 0:
                del self._by_caller[(cls, caller)]
            self._by_class[cls] -= 1
