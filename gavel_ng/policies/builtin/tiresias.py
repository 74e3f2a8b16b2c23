"""`tiresias`: two-dimensional LAS with discretized priority queues (Tiresias, NSDI'19).

What it decides, every round, for fixed jobs (each at its tuned GPU count and batch):

* **Priority: attained service in two dimensions**, GPUs x seconds the job has held
  GPUs (its gang size times its run time), so a wide job ages as fast as its width.
* **Discretized queues.** ``thresholds`` (GPU-seconds, increasing) cut attained service
  into K+1 queues; a job sits in the queue of the thresholds it has passed (Q0 first).
  The default is Pollux's configuration of Tiresias: two queues, one threshold, tuned
  for the workload. `DEFAULT_THRESHOLD`, 16 GPU-hours, had the lowest average JCT of
  0.25, 1, 4, 16, 64 and 256 GPU-hours on the pollux workload (seeds 0 and 1) on 64 T4s,
  in rounds of 60 s and of 360 s.
* **FIFO within a queue** by arrival time (ties by job id).
* **Starvation prevention (PromoteKnob).** With ``promote_knob`` = P > 0, a job that has
  waited (since it last ran, or since it arrived) longer than P times the seconds it has
  executed so far goes back to Q0: its attained service restarts from 0. Pollux disabled
  it in its comparison, and so does the default (None): on a finite trace every job ends.
* **Selection and placement.** Jobs in priority order each take their whole gang when
  it fits (a job that does not fit is skipped and later ones may run: work-conserving,
  preemptive every round). Blind to GPU type: a job stays on the type it ran on if its
  gang fits there, else goes to the type that fits it on the fewest servers (then the
  one with most free GPUs); consolidated: on one server when one has room, else on as
  few as possible, keeping its GPUs when it keeps running (the planner's placer). A type
  where the job cannot run at all (memory) is never chosen.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from ...errors import InputError
from ..registry import FIXED, round_policy
from ..rounds import Entry, RoundContext

DEFAULT_THRESHOLD = 16 * 3600.0   # GPU-seconds between Q0 and Q1 (16 GPU-hours; see the module docstring)


@round_policy("tiresias", "two-dimensional LAS (GPUs x time attained) in discretized priority queues, FIFO within "
              "a queue, consolidated placement; fixed jobs at their tuned GPU count", jobs=FIXED, round_seconds=60.0,
              type_aware=False)
class Tiresias:
    """Discretized two-dimensional LAS (module docstring)."""

    def __init__(self, thresholds: Sequence[float] = (DEFAULT_THRESHOLD,), promote_knob: float | None = None):
        th = [float(t) for t in thresholds]
        if any(not (math.isfinite(t) and t > 0) for t in th) or th != sorted(set(th)):
            raise InputError("tiresias.thresholds", list(thresholds),
                             "must be increasing positive GPU-seconds (finite, no repeats)")
        if promote_knob is not None and not (math.isfinite(promote_knob) and promote_knob > 0):
            raise InputError("tiresias.promote_knob", promote_knob, "must be a positive number (or None: off)")
        self.thresholds = np.array(th)
        self.knob = promote_knob
        self.promoted: dict[int, float] = {}   # job -> GPU-seconds it had attained when last promoted to Q0

    def history(self) -> dict:
        """The promotions, which a restarted scheduler must keep (the planner keeps the service attained)."""
        return {"promoted": [[m, v] for m, v in sorted(self.promoted.items())]}

    def restore_history(self, data: dict) -> None:
        self.promoted = {int(m): float(v) for m, v in data.get("promoted", [])}

    def queue(self, attained: np.ndarray) -> np.ndarray:
        """Queue index of each job: how many thresholds its attained service has reached."""
        return np.searchsorted(self.thresholds, attained, side="right")

    def decide(self, ctx: RoundContext) -> list[Entry]:
        jobs = ctx.jobs
        if len(self.promoted) > 2 * len(jobs) + 64:     # forget jobs gone for good: bounded memory
            live = set(jobs.tolist())
            self.promoted = {m: v for m, v in self.promoted.items() if m in live}
        base = np.array([self.promoted.get(m, 0.0) for m in jobs.tolist()])
        if self.knob is not None:
            starved = (ctx.executed > 0) & (ctx.now - ctx.last_end > self.knob * ctx.executed)
            for i in np.flatnonzero(starved).tolist():
                self.promoted[int(jobs[i])] = base[i] = ctx.attained[i]
        order = np.lexsort((jobs, ctx.arrival, self.queue(ctx.attained - base)))
        topo = ctx.topology
        free = [np.array([len(topo.server_gpus[s]) for s in topo.type_servers[t]])   # free GPUs per server
                for t in range(len(topo.worker_types))]
        rows, cols = [], []
        for i in order.tolist():
            k = int(ctx.scale_factors[i])
            prev = int(ctx.current_type[i])
            t = _pick_type(ctx.throughputs[i] > 0, k, free, prev if prev >= 0 else None)
            if t is not None:
                _take(free[t], k)
                rows.append(i)
                cols.append(t)   # the type's own column: the job's scale factor of GPUs
        return ctx.place(rows, cols) if rows else []


def _pick_type(runs: np.ndarray, k: int, free: list[np.ndarray], prev: int | None) -> int | None:
    fits = [t for t in range(len(free)) if runs[t] and free[t].sum() >= k]
    if not fits:
        return None
    if prev in fits:
        return prev
    return min(fits, key=lambda t: (_servers_needed(free[t], k), -int(free[t].sum()), t))


def _servers_needed(free: np.ndarray, k: int) -> int:
    """Fewest servers whose free GPUs hold k (one, if any server has room)."""
    if (free >= k).any():
        return 1
    return int(np.searchsorted(np.cumsum(np.sort(free)[::-1]), k) + 1)


def _take(free: np.ndarray, k: int) -> None:
    """Book k GPUs as the placer will: the fullest server that holds them all, else most room first."""
    fits = np.flatnonzero(free >= k)
    if len(fits):
        free[fits[np.argmin(free[fits])]] -= k
        return
    for s in np.argsort(-free, kind="stable"):
        take = min(int(free[s]), k)
        free[s] -= take
        k -= take
        if k == 0:
            return
