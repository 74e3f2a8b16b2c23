"""AdaptiveTraining: Pollux's agent inside a training job (opt-in, a few lines in the script).

    ada = AdaptiveTraining(model, optimizer, init_batch=64, max_batch=1024, lr_scaling="adascale")
    loader = ada.data_loader(dataset)                 # instead of DataLoader(dataset, batch_size=64)
    for x, y in GavelIterator(loader, load, save, adaptive=ada):
        loss_fn(model(x), y).backward()
        ada.step()                                    # instead of optimizer.step(); optimizer.zero_grad()

Under a gavel_ng worker the job spec's ``adaptive`` block (GAVEL_NG_ADAPTIVE) decides M0,
the largest batch and the LR rule, so that the job and the scheduler agree; the arguments
are for running the script on its own. GavelIterator then counts the job's steps in steps
at M0 (`take_progress`) and sends `report()` with every lease renewal.

Every call of `step` is one micro-batch; after ``accumulation + 1`` of them it averages the
gradients (over micro-batches and, when the job runs on several processes, over ranks, in
one all-reduce that also carries the local squared norm and the last step's time),
updates the gradient noise scale (`noise`), applies the LR rule for the current total
batch, steps the optimizer and clears the gradients. Every ``refit_every`` optimizer steps
(and at least ``refit_seconds`` apart: one L-BFGS-B fit takes milliseconds, Pollux
refits at a fixed interval) it refits the throughput model to the step times measured so
far (`fit`) and moves to the (per-GPU batch, accumulation) of best goodput on its current
GPUs (`gavel_ng.elastic.goodput.best_batch`); the loader's next batch has the new size.
Every rank sees the same averaged numbers and the same decision to refit (carried in the
same all-reduce), so every rank makes the same choice.

Loss per micro-batch is a mean over its examples; the script must not divide it by the
accumulation steps itself. Put `state_dict()` in the checkpoint so a relaunch (possibly
on another GPU count) keeps what the job learnt and picks its batch for the new GPUs.
"""

from __future__ import annotations

import json
import logging
import math
import time
from collections.abc import Callable
from dataclasses import replace

import torch

from gavel_ng.elastic.efficiency import AdaptiveSpec, efficiency
from gavel_ng.elastic.families import parse_adaptive
from gavel_ng.elastic.goodput import ThroughputParams, best_batch
from gavel_ng.errors import InputError

from ..lease import JobEnv
from .fit import Config, IterationTimes, fit_throughput
from .lr import lr_factor
from .noise import NoiseScale, differenced_estimate, two_batch_estimate

log = logging.getLogger(__name__)


class AdaptiveTraining:
    """Adaptive batch size, accumulation and learning rate for one data-parallel job (module docstring)."""

    def __init__(self, model: torch.nn.Module, optimizer: torch.optim.Optimizer, init_batch: int | None = None,
                 max_batch: int | None = None, lr_scaling: str = "adascale", *, max_local_batch: int | None = None,
                 accumulation: bool = True, servers: int | None = None, refit_every: int = 50,
                 refit_seconds: float = 30.0, noise_decay: float = 0.9, name: str = "job",
                 clock: Callable[[], float] = time.perf_counter):
        env = JobEnv.from_env()
        if env is not None and env.adaptive:   # under a worker: the spec the scheduler schedules by
            spec = parse_adaptive(json.loads(env.adaptive), "", "GAVEL_NG_ADAPTIVE")
            self.spec = spec if spec.max_local_batch is not None else replace(spec, max_local_batch=max_local_batch)
            mine = (init_batch, max_batch, lr_scaling)
            theirs = (self.spec.init_batch, self.spec.max_batch, self.spec.lr_scaling)
            if init_batch is not None and mine != theirs:
                log.warning("the job spec's adaptive block (init_batch, max_batch, lr_scaling) = %s overrides "
                            "the script's %s", theirs, mine)
            servers = env.servers if servers is None else servers
        else:
            if init_batch is None or max_batch is None:
                raise InputError("init_batch" if init_batch is None else "max_batch", None,
                                 "required outside a gavel_ng worker (under one, the job spec's adaptive block)")
            self.spec = AdaptiveSpec(name, init_batch, max_batch, lr_scaling=lr_scaling,
                                     max_local_batch=max_local_batch, accumulation=accumulation)
        servers = 1 if servers is None else servers
        if not (isinstance(refit_every, int) and refit_every >= 1):
            raise InputError("refit_every", refit_every, "must be an integer >= 1")
        if not (isinstance(refit_seconds, (int, float)) and refit_seconds >= 0):
            raise InputError("refit_seconds", refit_seconds, "must be a number >= 0")
        if not (isinstance(servers, int) and servers >= 1):
            raise InputError("servers", servers, "must be an integer >= 1")
        self.optimizer = optimizer
        self.params = [p for p in model.parameters() if p.requires_grad]
        dist = torch.distributed
        self.dist = dist if dist.is_available() and dist.is_initialized() and dist.get_world_size() > 1 else None
        self.rank = self.dist.get_rank() if self.dist else 0
        self.gpus = self.dist.get_world_size() if self.dist else 1
        self.servers = min(servers, self.gpus)
        self.refit_every, self.refit_seconds = refit_every, float(refit_seconds)
        self._clock = clock                 # step times feed the throughput fit; a test can drive it
        self._last_fit = -math.inf
        self.noise = NoiseScale(noise_decay)
        self.times = IterationTimes()
        self.fitted: ThroughputParams | None = None
        self.steps = 0                      # optimizer steps taken (across relaunches)
        self.local_batch, self.accumulation = self._initial_config()
        self._micro = 0
        self._acc: torch.Tensor | None = None     # gradient sum before this micro-batch (accumulation)
        self._micro_sqr = 0.0                       # sum of micro-batch squared norms
        self._prev: torch.Tensor | None = None     # last step's gradient (differenced estimator)
        self._last_end: float | None = None
        self._pending = (None, 0.0)                 # (config, seconds) of the last full step, timed next step
        self._progress = 0.0                        # steps at M0 made and not yet taken (take_progress)

    # ----- configuration ---------------------------------------------------------------------
    @property
    def batch(self) -> int:
        """Total batch of one optimizer step: GPUs x per-GPU batch x (accumulation + 1)."""
        return self.gpus * self.local_batch * (self.accumulation + 1)

    @property
    def config(self) -> Config:
        return Config(self.gpus, self.servers, self.local_batch, self.accumulation)

    def _local_cap(self) -> int:
        cap = self.spec.max_local_batch
        return self.spec.batch_limit if cap is None else cap

    def _initial_config(self) -> tuple[int, int]:
        """The fewest accumulation steps that hold M0 on these GPUs within the per-GPU bound."""
        per_gpu = -(-self.spec.init_batch // self.gpus)
        s = -(-per_gpu // self._local_cap()) - 1 if self.spec.accumulation else 0
        return max(-(-per_gpu // (s + 1)), self.spec.min_local_batch), s

    # ----- the training step -------------------------------------------------------------------
    def _flat_grads(self) -> torch.Tensor:
        return torch.cat([(p.grad if p.grad is not None else torch.zeros_like(p)).reshape(-1)
                          for p in self.params])

    @torch.no_grad()
    def step(self) -> bool:
        """Call after backward(); True when this micro-batch completed an optimizer step."""
        flat = self._flat_grads()
        micro = flat if self._acc is None else flat - self._acc
        if self.accumulation > 0:
            self._micro_sqr += float(micro.dot(micro))
        if self._micro < self.accumulation:
            self._micro += 1
            self._acc = flat.clone()
            return False
        grad = flat / (self.accumulation + 1)
        local_sqr = float(grad.dot(grad))
        config, seconds = self._pending
        due = float((self.steps + 1) % self.refit_every == 0
                    and self._clock() - self._last_fit >= self.refit_seconds)
        if self.dist is not None:
            buf = torch.cat([grad, grad.new_tensor([local_sqr, seconds, due])])
            self.dist.all_reduce(buf)
            buf /= self.gpus
            grad, local_sqr, seconds, due = buf[:-3], float(buf[-3]), float(buf[-2]), float(buf[-1])
        if self.dist is not None or self.accumulation > 0:
            self._write_back(grad)
        if config is not None:
            self.times.add(config, seconds)
        self._update_noise(grad, local_sqr)
        self._optimizer_step()
        phi = self.noise.phi
        self._progress += self.batch / self.spec.init_batch * (1.0 if phi is None else efficiency(
            self.batch, self.spec.init_batch, phi))
        self._micro, self._acc, self._micro_sqr = 0, None, 0.0
        self.steps += 1
        now = self._clock()
        if self._last_end is not None:       # this step's interval, timed under this step's configuration
            self._pending = (self.config, now - self._last_end)
        self._last_end = now
        if due > 0:                          # any rank's clock says so: all ranks refit
            self.adapt()
            self._last_fit = self._clock()
        return True

    def _write_back(self, grad: torch.Tensor) -> None:
        i = 0
        for p in self.params:
            n = p.numel()
            if p.grad is None:
                p.grad = torch.zeros_like(p)
            p.grad.copy_(grad[i:i + n].view_as(p))
            i += n

    def _update_noise(self, grad: torch.Tensor, local_sqr: float) -> None:
        """One step's (|G|^2, tr(Sigma)) by the estimator this configuration allows (noise.py)."""
        big_sqr = float(grad.dot(grad))
        if self.gpus > 1:
            b = self.local_batch * (self.accumulation + 1)
            est = two_batch_estimate(local_sqr, b, big_sqr, b * self.gpus)
        elif self.accumulation > 0:
            est = two_batch_estimate(self._micro_sqr / (self.accumulation + 1), self.local_batch,
                                     big_sqr, self.local_batch * (self.accumulation + 1))
        else:
            prev, self._prev = self._prev, grad.clone()
            if prev is None:
                return
            diff = grad - prev
            est = differenced_estimate(float(diff.dot(diff)), float(grad.dot(prev)), self.local_batch)
        self.noise.update(*est)

    def _optimizer_step(self) -> None:
        """optimizer.step() at the rule's LR for this batch, then zero_grad; a user LR scheduler still works."""
        factor = lr_factor(self.spec.lr_scaling, self.batch, self.spec.init_batch, self.noise.phi)
        saved = [g["lr"] for g in self.optimizer.param_groups]
        for g in self.optimizer.param_groups:
            g["lr"] = g["lr"] * factor
        self.optimizer.step()
        for g, lr in zip(self.optimizer.param_groups, saved):
            g["lr"] = lr
        self.optimizer.zero_grad(set_to_none=False)

    # ----- adapting ------------------------------------------------------------------------------
    def adapt(self) -> None:
        """Refit the throughput model and move to the best (per-GPU batch, accumulation) here."""
        k, n, m, s, t = self.times.table()
        phi = self.noise.phi
        if t.size == 0 or phi is None:
            return
        self.fitted = fit_throughput(k, n, m, s, t, self._local_cap(), self.spec.family)
        _, m_new, s_new = best_batch(self.fitted, self.spec, phi, self.gpus, self.servers)
        if m_new > 0 and (m_new, s_new) != (self.local_batch, self.accumulation):
            log.info("batch %d -> %d (per-GPU %d, accumulation %d; phi %.3g)", self.batch,
                     self.gpus * m_new * (s_new + 1), m_new, s_new, phi)
            self.local_batch, self.accumulation = m_new, s_new
            self._prev = None          # the differenced estimator needs two steps at one batch

    def goodput(self) -> float | None:
        """Predicted M0-equivalent examples/s at the current configuration (None before a fit)."""
        phi = self.noise.phi
        if self.fitted is None or phi is None:
            return None
        c = self.config
        thr = float(self.fitted.throughput(c.local_batch, c.accumulation, c.gpus, c.servers))
        return thr * efficiency(self.batch, self.spec.init_batch, phi)

    def take_progress(self) -> int:
        """Whole steps at M0 made since the last call (Pollux's M E(M) / M0 per optimizer step; the
        fraction carries over and is checkpointed). GavelIterator counts the job's steps by it."""
        whole = math.floor(self._progress + 1e-9)
        self._progress -= whole
        return int(whole)

    def report(self) -> dict:
        """What the scheduler needs: where it runs, batch, noise scale, goodput and the fitted parameters."""
        p = self.fitted
        theta = None if p is None else [p.alpha_grad, p.beta_grad, p.alpha_local, p.beta_local,
                                        p.alpha_node, p.beta_node, p.gamma]
        return {"gpus": self.gpus, "servers": self.servers, "batch": self.batch, "local_batch": self.local_batch,
                "accumulation": self.accumulation, "phi": self.noise.phi, "goodput": self.goodput(),
                "params": theta, "fit_error": None if p is None else p.fit_error,
                "max_local_batch": self._local_cap()}

    # ----- data and checkpoints --------------------------------------------------------------------
    def data_loader(self, dataset, *, shuffle: bool = True, seed: int = 0, **kwargs) -> torch.utils.data.DataLoader:
        """A DataLoader whose batches follow `local_batch` (this rank's shard of each epoch)."""
        sampler = AdaptiveBatchSampler(self, len(dataset), shuffle=shuffle, seed=seed)
        return torch.utils.data.DataLoader(dataset, batch_sampler=sampler, **kwargs)

    def state_dict(self) -> dict:
        return {"noise": self.noise.state_dict(), "times": self.times.state_dict(), "steps": self.steps,
                "progress": self._progress}

    def load_state_dict(self, state: dict) -> None:
        """Restore what was learnt and choose the batch for the GPUs this run has."""
        self.noise.load_state_dict(state["noise"])
        self.times.load_state_dict(state["times"])
        self.steps = int(state["steps"])
        self._progress = float(state.get("progress", 0.0))
        self.adapt()


class AdaptiveBatchSampler:
    """Index batches of the job's current per-GPU size from this rank's shard of a shuffled epoch.

    Every rank gets an equal shard and reads the same `local_batch`, so all ranks yield the
    same number of batches. A trailing partial batch is dropped.
    """

    def __init__(self, ada: AdaptiveTraining, size: int, shuffle: bool = True, seed: int = 0):
        if not (isinstance(size, int) and size >= 1):
            raise InputError("dataset size", size, "must be an integer >= 1")
        self.ada, self.size, self.shuffle, self.seed = ada, size, shuffle, seed
        self.epoch = 0

    def __iter__(self):
        g = torch.Generator().manual_seed(self.seed + self.epoch)
        self.epoch += 1
        order = torch.randperm(self.size, generator=g) if self.shuffle else torch.arange(self.size)
        world = self.ada.gpus
        shard = order[: self.size - self.size % world][self.ada.rank::world].tolist()
        i = 0
        while i + self.ada.local_batch <= len(shard):
            m = self.ada.local_batch
            yield shard[i:i + m]
            i += m

    def __len__(self) -> int:
        return max(math.floor(self.size / self.ada.gpus / self.ada.local_batch), 0)
