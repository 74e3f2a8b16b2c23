"""The garbage collector's passes kept short in a scheduler that holds tens of thousands of jobs (issue 42).

A full pass of CPython's collector walks every tracked object while holding the GIL. With 20,000 jobs and
1,250 workers such a pass took 100-270 ms (measured with a gc callback in the scheduler of
experiments/bench_runtime_scale.py), several a second at a round's boundary, where allocation peaks; every
heartbeat in flight waited that long. Almost none of it is garbage: the jobs, attempts and workers are the
state. `GcPacer.tick` moves what has survived into the permanent generation (`gc.freeze`, a constant-time
list splice) every `freeze_s`, so a pass walks only what is new since; every `full_s`, at a moment the
caller says is quiet, it walks everything once (`gc.unfreeze`, `gc.collect`), so a reference cycle that
became garbage after it was frozen is still reclaimed, late.

FREEZE_S was 10 s: the collector's oldest-generation passes between two freezes still walked up to ten
seconds of a boundary's survivors, 90-230 ms each (issue 42's sixth pass, a gc callback in the bench's
scheduler at 20,000 jobs). Every second they take 20-53 ms; a freeze costs the same whenever it runs.
"""

from __future__ import annotations

import gc
import logging
import time
from collections.abc import Callable

log = logging.getLogger(__name__)
FREEZE_S = 1.0
FULL_S = 900.0


class GcPacer:
    def __init__(self, freeze_s: float = FREEZE_S, full_s: float = FULL_S,
                 clock: Callable[[], float] = time.monotonic):
        self.freeze_s, self.full_s, self.clock = freeze_s, full_s, clock
        self.frozen = self.full = clock()
        self.passes = 0                   # full passes made (tests, logs)

    def tick(self, quiet: bool) -> None:
        """The executor's loop, every few tens of milliseconds; `quiet`: no boundary's calls are expected now."""
        now = self.clock()
        if quiet and now - self.full >= self.full_s:
            start = time.perf_counter()
            gc.unfreeze()
            found = gc.collect()
            self.full, self.passes = now, self.passes + 1
            log.debug("full garbage collection: %d objects freed in %.0f ms", found,
                      1e3 * (time.perf_counter() - start))
        if now - self.frozen >= self.freeze_s:
            gc.freeze()
            self.frozen = now
