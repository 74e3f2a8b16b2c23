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
  few as possible, keeping its GPUs when it keeps running (`mechanism.Placer`). A type
  where the job cannot run at all (memory) is never chosen.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

from gavel_ng.errors import InputError
from gavel_ng.mechanism import Placer, RoundPlan
from gavel_ng.topology import Topology

from .rounds import Entry, RoundPolicy

if TYPE_CHECKING:
    from .execution import ElasticExecutor, ElasticState

DEFAULT_THRESHOLD = 16 * 3600.0   # GPU-seconds between Q0 and Q1 (16 GPU-hours; see the module docstring)


class TiresiasPolicy(RoundPolicy):
    """Discretized two-dimensional LAS (module docstring)."""

    def __init__(self, state: ElasticState, topology: Topology, executor: ElasticExecutor, seed: int = 0,
                 thresholds: Sequence[float] = (DEFAULT_THRESHOLD,), promote_knob: float | None = None):
        super().__init__(state, topology, executor, seed)
        th = [float(t) for t in thresholds]
        if any(not (math.isfinite(t) and t > 0) for t in th) or th != sorted(set(th)):
            raise InputError("tiresias.thresholds", list(thresholds),
                             "must be increasing positive GPU-seconds (finite, no repeats)")
        if promote_knob is not None and not (math.isfinite(promote_knob) and promote_knob > 0):
            raise InputError("tiresias.promote_knob", promote_knob, "must be a positive number (or None: off)")
        if state.adaptive.any():
            raise InputError("adaptive", int(state.adaptive.sum()), "tiresias runs fixed jobs only")
        self.thresholds = np.array(th)
        self.knob = promote_knob
        M = len(state.adaptive)
        self.attained = np.zeros(M)       # GPU-seconds since the last promotion
        self.executed = np.zeros(M)       # seconds run in all
        self.last_end = state.arrival.astype(float).copy()   # when it last stopped running (arrival: never ran)
        self.placer = Placer(topology, consolidate=True)
        self.per_server = [np.array([len(topology.server_gpus[s]) for s in topology.type_servers[t]])
                           for t in range(len(topology.worker_types))]

    def queue(self, jobs: np.ndarray) -> np.ndarray:
        """Queue index of each job: how many thresholds its attained service has reached."""
        return np.searchsorted(self.thresholds, self.attained[jobs], side="right")

    def decide(self, now: float) -> list[Entry]:
        st = self.state
        jobs = np.fromiter(self.active, np.int64, len(self.active))
        if self.knob is not None:
            starved = (self.executed[jobs] > 0) & (now - self.last_end[jobs] > self.knob * self.executed[jobs])
            self.attained[jobs[starved]] = 0.0
        order = jobs[np.lexsort((jobs, st.arrival[jobs], self.queue(jobs)))]
        free = [p.copy() for p in self.per_server]          # free GPUs per server of each type
        prev_type = {m: int(self.topo.gpu_type[g[0]]) for m, g in self.last.items()}
        chosen: list[tuple[int, int]] = []
        for m in order.tolist():
            k = int(st.sf[m])
            t = self._pick_type(m, k, free, prev_type.get(m))
            if t is not None:
                _take(free[t], k)
                chosen.append((m, t))
        if not chosen:
            return []
        keys = [(m,) for m, _ in chosen]
        placed = self.placer.place(keys, [t for _, t in chosen], [int(st.sf[m]) for m, _ in chosen])
        return [Entry(m, t, g) for (m, t), g in zip(chosen, placed.gpus)]

    def _pick_type(self, m: int, k: int, free: list[np.ndarray], prev: int | None) -> int | None:
        runs = self.state.T[m] > 0
        fits = [t for t in range(len(free)) if runs[t] and free[t].sum() >= k]
        if not fits:
            return None
        if prev in fits:
            return prev
        return min(fits, key=lambda t: (_servers_needed(free[t], k), -int(free[t].sum()), t))

    def record(self, plan: RoundPlan, occupied: np.ndarray) -> None:
        if not plan.num_entries:
            return
        jobs = plan.member_job
        occupied = np.asarray(occupied, float)
        self.attained[jobs] += plan.sfs * occupied
        self.executed[jobs] += occupied
        self.last_end[jobs] = self.clock()   # the executor has moved on to the round's end


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
