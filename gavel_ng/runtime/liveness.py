"""Liveness judged fairly: a worker is declared dead for missing its heartbeats, never for the
scheduler's own failure to hear them.

The scheduler can be unable to answer: its process stopped (SIGSTOP, a VM pause, swapping),
starved of CPU, or its handler threads all busy. Heartbeats then wait unserved and every worker
looks silent. `Stalls` measures such moments from the scheduler's side, three ways:

- a ticker thread sleeps TICK at a time and notes how late it wakes (the process, or its
  interpreter, did not run);
- `TimedPool`, the gRPC server's handler pool, notes how long each call waited for a thread;
- heartbeats and registrations note how long they waited for the state's lock.

A wait of `min_stall` seconds or more is a stall, also while it lasts (the oldest wait still in
progress, the ticker's lateness so far). After a stall every worker gets `worker_timeout` again,
counted from the stall's end (`quiet_since`): a worker is overdue only when the scheduler could
hear it for that long and did not. While the scheduler stays stalled, nobody is declared dead.
"""

from __future__ import annotations

import itertools
import logging
import math
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

log = logging.getLogger(__name__)
TICK = 0.05


class Stalls:
    def __init__(self, min_stall: float = 1.0, clock: Callable[[], float] = time.monotonic):
        self.min_stall = min_stall
        self.clock = clock
        self.total = 0.0                    # stalled seconds since start (gavel_scheduler_stall_seconds)
        self.count = 0                      # stalls since start
        self.last_end = -math.inf           # clock() at the end of the latest stall
        self.longest = 0.0                  # the longest since `take_longest` (for one log line per stall)
        self._covered = -math.inf           # stalls are counted once however many waits saw them
        self._lock = threading.Lock()
        self._waits: dict[int, float] = {}  # waits in progress: token -> start (insertion order = start order)
        self._tokens = itertools.count()
        self._ticked: float | None = None    # the ticker's last wake (None: no ticker runs)
        self.tick = TICK

    # ----- what the scheduler's parts report ----------------------------------------------------
    def stalled(self, start: float, end: float) -> None:
        """Heartbeats could not be served from `start` to `end` (clock()); counted if long enough."""
        if end - start < self.min_stall:
            return
        with self._lock:
            if end <= self._covered:
                return
            if start >= self._covered:
                self.count += 1
            self.total += end - max(start, self._covered)
            self._covered = end
            self.last_end = max(self.last_end, end)
            self.longest = max(self.longest, end - start)

    def begin(self) -> int:
        """A wait starts (for a thread, for the lock); `end(token)` when it is over."""
        token = next(self._tokens)
        with self._lock:
            self._waits[token] = self.clock()
        return token

    def end(self, token: int) -> None:
        now = self.clock()
        with self._lock:
            start = self._waits.pop(token, now)
        self.stalled(start, now)

    def run_ticker(self, stop: threading.Event) -> None:
        """The ticker thread's body: how late each wake is tells whether the process ran."""
        self._ticked = self.clock()
        while not stop.wait(self.tick):
            now = self.clock()
            self.stalled(self._ticked + self.tick, now)
            self._ticked = now
        self._ticked = None

    # ----- what liveness asks -------------------------------------------------------------------
    def quiet_since(self) -> float:
        """clock() at the end of the latest stall: now while one lasts."""
        now = self.clock()
        with self._lock:
            oldest = next(iter(self._waits.values()), now)
        ticked = self._ticked
        if ticked is not None:
            oldest = min(oldest, ticked + self.tick)
        return now if now - oldest >= self.min_stall else self.last_end

    def take_longest(self) -> float:
        """The longest stall since the last call (0: none)."""
        with self._lock:
            out, self.longest = self.longest, 0.0
        return out


class TimedPool(ThreadPoolExecutor):
    """The gRPC server's handler threads, timing how long each call waited for one (`Stalls.begin`).

    Calls to the methods of a `lane` (name, full method paths, threads) get threads of their own: at a
    round's end thousands of done reports, each waiting for the state's lock, filled the pool's queue,
    and a heartbeat (answered without that lock) or a status read waited behind them in it."""

    def __init__(self, max_workers: int, stalls: Stalls, thread_name_prefix: str = "grpc",
                 lanes: tuple[tuple[str, tuple[str, ...], int], ...] = ()):
        super().__init__(max_workers=max_workers, thread_name_prefix=thread_name_prefix)
        self.stalls = stalls
        self.lanes: dict[bytes, ThreadPoolExecutor] = {}
        self._own = []
        for name, methods, workers in lanes:
            pool = ThreadPoolExecutor(workers, thread_name_prefix=f"{thread_name_prefix}-{name}")
            self._own.append(pool)
            self.lanes.update((m.encode(), pool) for m in methods)

    def submit(self, fn, /, *args, **kwargs):
        token = self.stalls.begin()

        def run():
            self.stalls.end(token)
            return fn(*args, **kwargs)

        lane = self.lanes.get(_method(args)) if self.lanes else None
        if lane is not None:
            return lane.submit(run)
        return super().submit(run)

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        for pool in self._own:
            pool.shutdown(wait=wait, cancel_futures=cancel_futures)
        super().shutdown(wait=wait, cancel_futures=cancel_futures)


def _method(args: tuple) -> bytes | None:
    """The full method path of the call a gRPC server hands its pool (its request event's call details:
    grpc._server submits `context.run, handler, rpc_event, ...`); None when not found (the main pool)."""
    for a in args[:3]:
        details = getattr(a, "call_details", None)
        if details is not None:
            return getattr(details, "method", None)
    return None
