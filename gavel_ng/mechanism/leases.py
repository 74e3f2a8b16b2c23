"""Last round's one-GPU placements, by job: what the placer remembers after a round whose entries
are each one job on one GPU (most rounds of a single-GPU trace).

Arrays indexed by job id (the type and GPU of each job's lease, -1 for none) let the next round find
its renewals with a few array operations, where a dict keyed by entry would take a lookup per
entry. A job backfilled mid-round (`hold`) takes its GPU's lease over, as in the dict form."""

from __future__ import annotations

import numpy as np


class JobLeases:
    """In use (`active`) while it, not the placer's dict, is the placer's memory."""

    def __init__(self) -> None:
        self.type_of = np.full(0, -1, np.int64)   # per job: the type of its lease, -1 if it holds none
        self.gpu_of = np.full(0, -1, np.int64)    # per job: the GPU of its lease
        self.jobs: np.ndarray | None = None       # jobs that may hold a lease; None: not in use

    @property
    def active(self) -> bool:
        return self.jobs is not None

    def lookup(self, jobs: np.ndarray, types: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(renewed, GPU): whether each job holds a lease on the type it runs on now, and that lease's
        GPU (a new array; meaningless where not renewed)."""
        try:
            return self.type_of[jobs] == types, self.gpu_of[jobs]
        except IndexError:   # a job beyond the arrays: they grow by doubling
            self._room(jobs)
            return self.type_of[jobs] == types, self.gpu_of[jobs]

    def store(self, jobs: np.ndarray, types: np.ndarray, gpus: np.ndarray, looked_up: bool = False) -> None:
        """This round's leases (one per job) replace the last ones. `looked_up`: these jobs were just
        looked up, so the arrays already have room for them."""
        if self.jobs is not None:   # (clear())
            self.type_of[self.jobs] = -1
        if not looked_up:
            self._room(jobs)
        self.type_of[jobs] = types
        self.gpu_of[jobs] = gpus
        self.jobs = jobs.copy()

    def hold(self, job: int, t: int, gpu: int) -> None:
        """`job` holds `gpu` (of type t) from now on; whoever held it lets go."""
        held = self.jobs[(self.gpu_of[self.jobs] == gpu) & (self.type_of[self.jobs] >= 0)]
        self.type_of[held] = -1
        self._room(np.array([job]))
        self.type_of[job], self.gpu_of[job] = t, gpu
        self.jobs = np.append(self.jobs, job)

    def as_dict(self, one_gpu: np.ndarray) -> dict[tuple[int, ...], tuple[int, tuple[int, ...]]]:
        """The leases as the placer's dict (key -> (type, GPUs)); `one_gpu[g]` is the tuple (g,).
        The arrays are then out of use."""
        hold = self.jobs[self.type_of[self.jobs] >= 0]
        out = {(m,): (t, g) for m, t, g in zip(hold.tolist(), self.type_of[hold].tolist(),
                                               one_gpu[self.gpu_of[hold]].tolist())}
        self.clear()
        return out

    def clear(self) -> None:
        if self.jobs is not None:
            self.type_of[self.jobs] = -1
            self.jobs = None

    def _room(self, jobs: np.ndarray) -> None:
        n = len(self.type_of)
        if len(jobs) and jobs.max() >= n:
            more = np.full(max(2 * n, int(jobs.max()) + 1) - n, -1, np.int64)
            self.type_of = np.concatenate([self.type_of, more])
            self.gpu_of = np.concatenate([self.gpu_of, more])


class Holders(dict):
    """The placer's dict form (key -> (type, GPUs)), which can also say who holds a GPU.

    A job backfilled mid-round takes over its GPUs' leases (`Placer.remember`): finding the old holders by
    a walk over every entry cost a round of 5,000 arrivals on 10,000 GPUs seconds. The index by GPU is
    built at the first such question and kept up to date by every write from then on."""

    def __init__(self, *args) -> None:
        super().__init__(*args)
        self._by_gpu: dict[int, set] | None = None

    def holding(self, gpus) -> set:
        """The keys holding any of `gpus`."""
        if self._by_gpu is None:
            self._by_gpu = {}
            for key, (_, held) in self.items():
                self._index(key, held)
        return {k for g in gpus for k in self._by_gpu.get(g, ())}

    def _index(self, key, gpus) -> None:
        for g in gpus:
            self._by_gpu.setdefault(g, set()).add(key)

    def _unindex(self, key) -> None:
        if self._by_gpu is not None and key in self:
            for g in dict.__getitem__(self, key)[1]:
                self._by_gpu[g].discard(key)

    def __setitem__(self, key, value) -> None:
        self._unindex(key)
        super().__setitem__(key, value)
        if self._by_gpu is not None:
            self._index(key, value[1])

    def __delitem__(self, key) -> None:
        self._unindex(key)
        super().__delitem__(key)

    def pop(self, key, *default):
        self._unindex(key)
        return super().pop(key, *default)

    def clear(self) -> None:
        super().clear()
        self._by_gpu = None

    def update(self, *args, **kwargs) -> None:
        for key, value in dict(*args, **kwargs).items():
            self[key] = value

    def __ior__(self, other):
        self.update(other)
        return self

    def setdefault(self, key, default=None):
        if key not in self:
            self[key] = default
        return self[key]

    def popitem(self):
        key = next(reversed(self))
        return key, self.pop(key)
