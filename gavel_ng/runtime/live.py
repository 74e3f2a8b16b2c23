"""Live attempts and fences indexed by worker and by GPU, jobs counted by status, so that no call
scans the whole queue.

A heartbeat needs the attempts of one worker, a launch the attempts on some GPUs, a
measurement the attempts sharing one attempt's GPUs, a restart check the attempts restored
from the store: with 20,000 queued jobs a scan of every job per call made each heartbeat cost
the queue (issue 42). `LiveIndex` is kept by `JobState.live` and `JobState.fence` themselves
and `JobState.status` (their setters), so no code path can change an attempt, a fence or a status and
leave the index behind.
Used under ClusterState's lock, like the jobs it indexes.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable


class LiveIndex:
    def __init__(self):
        self.version = 0                                     # grows with every change: something may launch now
        self.live: set[int] = set()                          # jobs with a live attempt
        self.by_worker: dict[str, set[int]] = {}             # worker id -> jobs with a live attempt there
        self.by_gpu: dict[tuple[str, int], set[int]] = {}    # (worker id, local GPU) -> jobs live on it
        self.restored: set[int] = set()                      # jobs whose live attempt came from the store
        self.fenced_on: dict[str, set[int]] = {}             # worker id -> jobs whose fence waits for it
        self.counts: Counter = Counter()                     # jobs by status
        self.unfinished: set[int] = set()                    # jobs neither done, cancelled nor failed

    # ----- kept by JobState's setters ---------------------------------------------------------
    def live_changed(self, job_id: int, old, new) -> None:
        """`old`, `new`: the job's jobs.Attempt before and after (None: none); jobs.py calls this, so no import back."""
        self.version += 1
        if old is not None:
            self.live.discard(job_id)
            for w in old.workers:
                _discard(self.by_worker, w, job_id)
            for p in old.placement:
                _discard(self.by_gpu, tuple(p), job_id)
            self.restored.discard(job_id)
        if new is not None:
            self.live.add(job_id)
            for w in new.workers:
                self.by_worker.setdefault(w, set()).add(job_id)
            for p in new.placement:
                self.by_gpu.setdefault(tuple(p), set()).add(job_id)
            if new.restored:
                self.restored.add(job_id)

    def fence_changed(self, job_id: int, old, new) -> None:
        """`old`, `new`: the job's jobs.Fence before and after (None: none)."""
        self.version += 1
        if old is not None:
            for w in old.workers:
                _discard(self.fenced_on, w, job_id)
        if new is not None:
            for w in new.workers:
                self.fenced_on.setdefault(w, set()).add(job_id)

    def status_changed(self, job_id: int, old: str | None, new: str, finished: bool) -> None:
        if old is not None:
            self.counts[old] -= 1
            if not self.counts[old]:
                del self.counts[old]
        self.counts[new] += 1
        if finished:
            self.unfinished.discard(job_id)
        else:
            self.unfinished.add(job_id)

    def touch(self) -> None:
        """Something a launch decision depends on changed besides an attempt or a fence (a job finished)."""
        self.version += 1

    def fence_confirmed(self, job_id: int, worker_id: str) -> None:
        _discard(self.fenced_on, worker_id, job_id)

    # ----- lookups ----------------------------------------------------------------------------
    def on_worker(self, worker_id: str) -> list[int]:
        """Jobs with a live attempt on the worker, in id order."""
        return sorted(self.by_worker.get(worker_id, ()))

    def on_gpus(self, placement: Iterable[tuple[str, int]]) -> set[int]:
        """Jobs with a live attempt on any of these GPUs."""
        out: set[int] = set()
        for p in placement:
            out |= self.by_gpu.get(tuple(p), set())
        return out

    def taken(self, placement: Iterable[tuple[str, int]], allowed: set[int]) -> bool:
        """Whether a live attempt of a job not in `allowed` holds any of these GPUs."""
        for p in placement:
            s = self.by_gpu.get(tuple(p))
            if s and not s <= allowed:
                return True
        return False

    def first_unfinished(self, n: int) -> list[int]:
        """The n lowest ids of unfinished jobs."""
        return sorted(self.unfinished)[:n]          # a C sort: faster than nsmallest's Python loop

    def fences_on(self, worker_id: str) -> list[int]:
        return sorted(self.fenced_on.get(worker_id, ()))


def _discard(index: dict, key, job_id: int) -> None:
    s = index.get(key)
    if s is not None:
        s.discard(job_id)
        if not s:
            del index[key]
