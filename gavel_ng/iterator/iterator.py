"""GavelIterator: a data-loader wrapper that runs a training job inside its lease.

    it = GavelIterator(train_loader, load_checkpoint, save_checkpoint)
    for batch in it:
        train_step(batch)

Under a gavel_ng worker it restores the newest checkpoint, runs across epochs until the
lease ends or the job reached its total steps, renews the lease in the background near
its end (granted when the job keeps its GPUs next round), and otherwise saves a
checkpoint and stops. Outside a worker it iterates the loader once (or `max_steps`).

Adaptive jobs (`adaptive=AdaptiveTraining(...)`, gavel_ng.iterator.adaptive): a step is a
step at the job's initial batch M0, so the job's total means the same work whatever batch
and GPU count it runs at; an optimizer step at batch M counts M E(M) / M0 of them (Pollux's
M0-equivalent progress), and every lease renewal carries the job's report (batch, noise
scale, fitted throughput model) to the scheduler.

Distributed jobs: rank 0 alone talks to the scheduler and decides, before every step,
whether the job goes on; the decision is broadcast on a dedicated gloo group, so every
rank stops at the same step (Blox's two-phase expiry, with the exit step fixed before
any rank starts it). load_checkpoint runs on every rank, save_checkpoint on rank 0 only
unless `save_on_all_ranks`.
"""

from __future__ import annotations

import json
import logging
import os
import time
from collections.abc import Callable, Iterable
from pathlib import Path

from . import checkpoint as ckpt
from .lease import JobEnv, LeaseClient

log = logging.getLogger(__name__)
GO, STOP, DONE = 0, 1, 2
EMA = 0.2


class _Sync:
    """Broadcasts rank 0's decisions to every rank (no-op for one process)."""

    def __init__(self) -> None:
        self.rank, self.world, self.group = 0, 1, None
        try:
            import torch.distributed as dist
        except ImportError:
            return
        if dist.is_available() and dist.is_initialized() and dist.get_world_size() > 1:
            self.dist = dist
            self.rank, self.world = dist.get_rank(), dist.get_world_size()
            self.group = dist.new_group(backend="gloo")

    def broadcast(self, a: int, b: int = 0) -> tuple[int, int]:
        if self.group is None:
            return a, b
        import torch

        t = torch.tensor([a, b], dtype=torch.int64)
        self.dist.broadcast(t, src=0, group=self.group)
        return int(t[0]), int(t[1])

    def barrier(self) -> None:
        if self.group is not None:
            self.dist.barrier(group=self.group)


class GavelIterator:
    def __init__(self, loader: Iterable, load_checkpoint: Callable[[Path], object],
                 save_checkpoint: Callable[[Path], object], *, max_steps: int | None = None,
                 checkpoint_dir: str | Path | None = None, save_on_all_ranks: bool = False, adaptive=None):
        self.loader = loader
        self.adaptive = adaptive    # an AdaptiveTraining: steps count its progress, renewals carry its report
        self._load, self._save = load_checkpoint, save_checkpoint
        self.env = JobEnv.from_env()
        local = Path(checkpoint_dir) if checkpoint_dir else None
        self.checkpoint_dir = self.env.checkpoint_dir if self.env else local
        self.max_steps = max_steps
        self.save_on_all_ranks = save_on_all_ranks
        self.step = 0               # steps completed, counted across runs (restored from the checkpoint)
        self.epoch = 0
        self.done = False           # the job reached its total steps
        self.lease: LeaseClient | None = None
        self._started = self._finished = False

    @property
    def rank(self) -> int:
        return self._sync.rank if self._started else int(os.environ.get("RANK", "0"))

    # ----- iteration -----------------------------------------------------------------------------
    def __iter__(self):
        if not self._started:
            self._start()
        return self

    def _start(self) -> None:
        self._started = True
        self._sync = _Sync()
        found = ckpt.latest(self.checkpoint_dir) if self._sync.rank == 0 else None
        step, _ = self._sync.broadcast(found[0] if found else -1)
        if step >= 0:
            path = ckpt.checkpoint_path(self.checkpoint_dir, step)
            self._load(path)
            self.step = step
            log.info("restored step %d from %s", step, path)
        self.start_step = self.step
        self.total = self.max_steps
        if self.env is not None:
            self.total = self.env.steps
            if self._sync.rank == 0:
                self.lease = LeaseClient(self.env)
                self.lease.init(max(step, 0))
                self.total = self.lease.steps_total
        self._batches = iter(self.loader)
        log.info("rank %d of %d: training from step %d", self._sync.rank, self._sync.world, self.step)
        self._t0 = self._last = None
        self._step_time = 0.0

    def __next__(self):
        if self._finished:
            raise StopIteration
        now = time.monotonic()
        if self._t0 is None:
            self._t0 = now
        elif self._last is not None:
            dt = now - self._last
            self._step_time = dt if self._step_time == 0 else (1 - EMA) * self._step_time + EMA * dt
        self._last = now
        if self.adaptive is not None:      # the optimizer steps since the last batch, in steps at M0
            self.step += self.adaptive.take_progress()
        decision = self._decide() if self._sync.rank == 0 else GO
        decision, _ = self._sync.broadcast(decision)
        if decision == GO:
            batch = self._next_batch()
            if batch is not None:
                if self.adaptive is None:
                    self.step += 1
                return batch
            decision = STOP
        self._finish(decision == DONE or self._done_by_total())
        raise StopIteration

    def _next_batch(self):
        try:
            return next(self._batches)
        except StopIteration:
            if self.env is None and self.max_steps is None:
                return None                  # standalone without a step budget: one pass
            self.epoch += 1
            self._batches = iter(self.loader)
            try:
                return next(self._batches)
            except StopIteration:
                return None                  # an empty loader

    def _done_by_total(self) -> bool:
        return self.total is not None and self.step >= self.total

    def _decide(self) -> int:
        """Rank 0: go on, stop at the lease end, or done (lease checks only under a worker)."""
        if self._done_by_total():
            return DONE
        lease = self.lease
        if lease is None:
            return GO
        compute = time.monotonic() - self._t0
        lease.maybe_renew(self.step, compute, self.adaptive.report if self.adaptive is not None else None)
        if time.monotonic() + self._step_time <= lease.deadline:
            return GO
        lease.wait_pending(lease.deadline)
        return GO if time.monotonic() + self._step_time <= lease.deadline else STOP

    # ----- the end of a run ---------------------------------------------------------------------------
    def _finish(self, done: bool) -> None:
        self._finished = True
        self.done = done
        compute = (self._last - self._t0) if self._t0 is not None else 0.0
        committed = self.start_step if self.step == self.start_step and self._has_checkpoint() else -1
        if self.checkpoint_dir is not None and self.step > self.start_step:
            if self.save_on_all_ranks:
                self._save_all()
            elif self._sync.rank == 0:
                tmp = ckpt.begin(self.checkpoint_dir, self.step)
                self._save(tmp)
                ckpt.commit(self.checkpoint_dir, tmp, self.step)
            committed = self.step
        self._sync.barrier()
        log.info("stopping at step %d (%s)", self.step, "done" if done else "lease ended")
        if self.env is not None and self.env.result_file is not None:
            self.env.result_file.write_text(json.dumps({
                "step": committed, "done": done, "steps_run": self.step - self.start_step,
                "compute_seconds": compute, "start_step": self.start_step}))
        if self.lease is not None:
            self.lease.close()

    def _save_all(self) -> None:
        """Every rank saves into rank 0's directory, which rank 0 commits after a barrier."""
        import torch.distributed as dist

        tmp = ckpt.begin(self.checkpoint_dir, self.step) if self._sync.rank == 0 else None
        names = [str(tmp) if tmp is not None else ""]
        if self._sync.group is not None:
            dist.broadcast_object_list(names, src=0, group=self._sync.group)
        self._save(Path(names[0]))
        self._sync.barrier()
        if self._sync.rank == 0:
            ckpt.commit(self.checkpoint_dir, tmp, self.step)

    def _has_checkpoint(self) -> bool:
        return ckpt.latest(self.checkpoint_dir) is not None if self.checkpoint_dir is not None else False
