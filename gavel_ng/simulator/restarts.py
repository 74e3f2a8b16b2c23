"""Measured restart delays: who pays one, and when (one ledger for fixed and adaptive jobs).

Where a trace's profile set measured each application's checkpoint-restore delay (the `sia`
set; `AdaptiveModels.restart`), every job pays its own on each start and each change of
placement, as the Sia artifact's simulator charges it: its job restarts when it resumes after
a round without GPUs, moves to another GPU type, or its placement's shape changes, the GPUs it
has on each server (4 on one server -> 2 + 2 on two, 4 -> 8); moving to other GPUs of the same
shape is free there (its ``job.reallocate`` compares per-node counts, not GPU ids), and so it is
here. During the delay the job holds its GPUs and makes no progress; what a round cannot hold is
owed in the next round if the placement stays. Jobs without a measured delay keep the simulator's
flat rules (`--realloc-delay` on a change of type or GPU count for adaptive jobs,
`--preemption-overhead` on a launch that is not a renewal for fixed ones), so that runs on the
modeled set are what they were.
"""

from __future__ import annotations

import numpy as np


class RestartLedger:
    """Each job's placement shape last round and the restart seconds it still owes (module docstring)."""

    def __init__(self, round_seconds: float, gpu_server: np.ndarray):
        self.L = float(round_seconds)
        self.gpu_server = np.asarray(gpu_server, np.int64)
        self.last: dict[int, tuple] = {}    # job -> shape in the previous round
        self.now: dict[int, tuple] = {}     # job -> shape in this round (so far)
        self.owed: dict[int, float] = {}    # job -> seconds still to pay

    def shape(self, worker_type: int, gpus) -> tuple:
        """(type, GPUs per server in decreasing order): what a change of placement compares."""
        per = np.bincount(self.gpu_server[np.asarray(gpus, np.int64)]) if len(gpus) else np.zeros(0, np.int64)
        return int(worker_type), tuple(sorted(per[per > 0].tolist(), reverse=True))

    def start(self, job: int, shape: tuple, delay: float, room: float | None = None) -> tuple[float, bool]:
        """(seconds of this round the job spends restarting, whether it restarts afresh); `room`: the
        seconds of the round it has (an entry started mid-round), the whole round by default."""
        fresh = self.last.get(job) != shape
        owed = delay if fresh else self.owed.pop(job, 0.0)
        self.owed.pop(job, None)
        start = min(owed, self.L if room is None else max(room, 0.0))
        if owed > start:
            self.owed[job] = owed - start
        self.now[job] = shape
        return start, fresh

    def end_round(self) -> None:
        """The round ran: its shapes are the next round's `last` (a job absent from it starts afresh, and
        owes nothing more of the restart it did not finish)."""
        self.owed = {m: v for m, v in self.owed.items() if m in self.now}
        self.last, self.now = self.now, {}
