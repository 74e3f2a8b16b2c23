"""Common shape of a workload family: model builder, synthetic batches, one training step.

Every family exposes the same five callables so that the profiler, the tests and the
deployment runtime can treat the seven Gavel model families uniformly.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass

import torch
from torch import nn

from ..jobtypes import FAMILIES

Batch = Mapping[str, torch.Tensor]
SIZES = ("full", "tiny")


def check_size(size: str) -> str:
    """Reject unknown size names early, so a typo never silently builds the full model."""
    if size not in SIZES:
        raise ValueError(f"unknown size {size!r}; expected one of {SIZES}")
    return size


@dataclass(frozen=True)
class Workload:
    """One model family of Gavel's Table 2.

    ``loss_step`` runs forward, backward and the optimizer update and returns the loss as a
    tensor (so it also works on the meta device, where no value can be read);
    ``train_step`` is the same step returning a Python float for real training loops.
    """

    family: str                 # a name of gavel_ng.jobtypes.FAMILIES, which says its task, data and batch sizes
    build_model: Callable[..., nn.Module]
    make_batch: Callable[..., dict[str, torch.Tensor]]
    make_optimizer: Callable[..., torch.optim.Optimizer]
    loss_step: Callable[[nn.Module, torch.optim.Optimizer, Batch], torch.Tensor]
    # Simulator (e.g. Atari emulator) steps per batch element and iteration: host work
    # that a real job does and a synthetic batch skips; the profiles record it.
    env_steps_per_sample: int = 0

    @property
    def batch_sizes(self) -> tuple[int, ...]:
        return FAMILIES[self.family].batch_sizes

    @property
    def task(self) -> str:
        return FAMILIES[self.family].task

    @property
    def dataset(self) -> str:
        return FAMILIES[self.family].dataset

    def train_step(self, model: nn.Module, optimizer: torch.optim.Optimizer,
                   batch: Batch) -> float:
        """Run one training iteration and return its loss as a float."""
        loss = float(self.loss_step(model, optimizer, batch).detach())
        if not math.isfinite(loss):
            raise FloatingPointError(f"{self.family}: non-finite loss {loss}")
        return loss


def generator_for(seed: int | None, device: torch.device | str) -> torch.Generator | None:
    """A seeded generator on CPU; None for the meta device, which needs no random numbers."""
    if seed is None or torch.device(device).type == "meta":
        return None
    return torch.Generator(device=torch.device(device)).manual_seed(seed)
