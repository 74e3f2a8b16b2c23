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

Bounded loss and fencing: with lease renewals the job checkpoints without stopping at
least every `checkpoint_every_rounds` rounds (the worker's setting), and on SIGTERM
(the worker's stop, a grace period before SIGKILL) it checkpoints at the next step and
stops. An attempt the scheduler wrote off (a stale renewal reply) stops at once and
commits nothing: its relaunch may already run. Each attempt commits under its own name.
"""

from __future__ import annotations

import json
import logging
import os
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterable
from pathlib import Path

from . import checkpoint as ckpt
from .lease import JobEnv, LeaseClient

log = logging.getLogger(__name__)
GO, STOP, DONE, ABORT, SAVE = 0, 1, 2, 3, 4   # ABORT: a stale attempt; SAVE: checkpoint and go on
EMA = 0.2


class _Sync:
    """Broadcasts rank 0's decisions to every rank (no-op for one process)."""

    def __init__(self) -> None:
        self.rank, self.world, self.group = 0, 1, None
        if "torch.distributed" not in sys.modules:   # never imported: no group, and no torch to load (paced jobs)
            return
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
        self._attempt = self.env.attempt if self.env is not None else 0
        self._identity = self.env.identity if self.env is not None else ""
        self._terminated = False     # SIGTERM seen: checkpoint and stop at the next step
        self._old_handler = None
        self._committed = -1         # newest step this run committed

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
        found = ckpt.latest(self.checkpoint_dir, self._identity) if self._sync.rank == 0 else None
        step, attempt = self._sync.broadcast(found[0] if found else -1, ckpt.attempt_of(found[1]) if found else 0)
        if step >= 0:
            path = ckpt.checkpoint_path(self.checkpoint_dir, step, attempt)
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
            self._install_sigterm()
        self._every = (self.env.checkpoint_every_rounds * self.lease.round_seconds
                       if self.env is not None and self.lease is not None else 0.0)
        self._last_save = time.monotonic()
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
        if decision == SAVE:
            self._checkpoint()
            decision = GO
        if decision == ABORT:
            log.warning("the scheduler wrote this attempt off: stopping at step %d without a checkpoint", self.step)
            self._finish(False, commit=False)
            raise StopIteration
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
        """Rank 0: go on, checkpoint and go on, stop (lease end, SIGTERM), abort (stale) or done."""
        if self._done_by_total():
            return DONE
        lease = self.lease
        if self._terminated:
            return STOP
        if lease is None:
            return GO
        if lease.stale:
            return ABORT
        compute = time.monotonic() - self._t0
        lease.maybe_renew(self.step, compute, self.adaptive.report if self.adaptive is not None else None)
        if time.monotonic() + self._step_time <= lease.deadline:
            if self._every > 0 and time.monotonic() - self._last_save >= self._every and self.step > self.start_step:
                return SAVE
            return GO
        lease.wait_pending(lease.deadline)
        if lease.stale:
            return ABORT
        return GO if time.monotonic() + self._step_time <= lease.deadline else STOP

    # ----- the end of a run ---------------------------------------------------------------------------
    def _finish(self, done: bool, commit: bool = True) -> None:
        self._finished = True
        self.done = done
        self._restore_sigterm()
        compute = (self._last - self._t0) if self._t0 is not None else 0.0
        committed = self.start_step if self.step == self.start_step and self._has_checkpoint() else -1
        if commit and self.step > max(self.start_step, self._committed):
            self._checkpoint()
        if self._committed >= 0:
            committed = self._committed
        self._sync.barrier()
        if self.lease is not None and commit:      # the job's own word on its progress, before its worker's
            self.lease.final(self.step, compute, max(committed, 0))
        why = "done" if done else "terminated" if self._terminated else "lease ended" if commit else "stale"
        log.info("stopping at step %d (%s)", self.step, why)
        if self.env is not None and self.env.result_file is not None:
            self.env.result_file.write_text(json.dumps({
                "step": committed, "done": done, "steps_run": self.step - self.start_step,
                "compute_seconds": compute, "start_step": self.start_step}))
        if self.lease is not None:
            self.lease.close()

    def _checkpoint(self) -> None:
        """Save and commit the current step (every rank calls it); rank 0 commits only while
        the lease allows (LeaseClient.may_commit), and tells every rank whether it did."""
        if self.checkpoint_dir is None:
            return
        if self.save_on_all_ranks:
            ok = self._save_all()
        elif self._sync.rank == 0:
            tmp = ckpt.begin(self.checkpoint_dir, self.step, self._attempt)
            self._save(tmp)
            ok = self._commit(tmp)
        else:
            ok = False
        ok, _ = self._sync.broadcast(int(ok))
        if ok:
            self._committed = self.step
        self._last_save = time.monotonic()

    def _commit(self, tmp: Path) -> bool:
        """Rank 0: commit tmp as this attempt's checkpoint, unless the attempt became stale."""
        if self.lease is not None and not self.lease.may_commit():
            log.warning("not committing step %d: the lease ran out or the attempt was written off", self.step)
            import shutil

            shutil.rmtree(tmp, ignore_errors=True)
            return False
        ckpt.commit(self.checkpoint_dir, tmp, self.step, attempt=self._attempt, identity=self._identity)
        if self.lease is not None:
            self.lease.checkpoint_step = self.step
        return True

    def _save_all(self) -> bool:
        """Every rank saves into rank 0's directory, which rank 0 commits after a barrier."""
        import torch.distributed as dist

        tmp = ckpt.begin(self.checkpoint_dir, self.step, self._attempt) if self._sync.rank == 0 else None
        names = [str(tmp) if tmp is not None else ""]
        if self._sync.group is not None:
            dist.broadcast_object_list(names, src=0, group=self._sync.group)
        self._save(Path(names[0]))
        self._sync.barrier()
        return self._commit(tmp) if self._sync.rank == 0 else False

    # ----- SIGTERM: the worker's stop, SIGKILL follows a grace period later ---------------------------
    def _install_sigterm(self) -> None:
        if threading.current_thread() is not threading.main_thread():
            return
        try:
            self._old_handler = signal.signal(signal.SIGTERM, self._on_sigterm)
        except (ValueError, OSError):
            self._old_handler = None

    def _on_sigterm(self, signum, frame) -> None:
        self._terminated = True           # acted on at the next step: a handler must not save

    def _restore_sigterm(self) -> None:
        if self._old_handler is not None:
            signal.signal(signal.SIGTERM, self._old_handler)
            self._old_handler = None

    def _has_checkpoint(self) -> bool:
        return ckpt.latest(self.checkpoint_dir, self._identity) is not None if self.checkpoint_dir is not None \
            else False
