"""Recommendation autoencoder (Recoder-style) on MovieLens-20M-like user vectors.

A user is a vector of ratings over all items; the model is a denoising autoencoder with
one hidden layer, trained to reconstruct the observed ratings.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from .base import Batch, Workload, check_size, generator_for


@dataclass(frozen=True)
class RecConfig:
    """Item count (ML-20M has 26,744 movies), hidden width, rating density, learning rate."""

    items: int
    hidden: int
    density: float
    lr: float


CONFIGS = {
    "full": RecConfig(26744, 200, 0.0054, 1e-3),
    "tiny": RecConfig(200, 16, 0.1, 1e-2),
}


class Autoencoder(nn.Module):
    """Dropout-noised input -> tanh hidden layer -> linear reconstruction of all items."""

    def __init__(self, cfg: RecConfig) -> None:
        super().__init__()
        self.cfg = cfg
        self.noise = nn.Dropout(0.5)
        self.encode = nn.Linear(cfg.items, cfg.hidden)
        self.decode = nn.Linear(cfg.hidden, cfg.items)

    def forward(self, ratings: torch.Tensor) -> torch.Tensor:
        return self.decode(torch.tanh(self.encode(self.noise(ratings))))


def build_model(size: str = "full") -> nn.Module:
    """Item-vector autoencoder with a 200-unit bottleneck, or a tiny one."""
    return Autoencoder(CONFIGS[check_size(size)])


def make_batch(batch_size: int, size: str = "full", seed: int | None = 0,
               device: torch.device | str = "cpu") -> dict[str, torch.Tensor]:
    """Dense user-item rating vectors (1-5 stars) at ML-20M's density, zeros elsewhere."""
    cfg = CONFIGS[check_size(size)]
    gen = generator_for(seed, device)
    shape = (batch_size, cfg.items)
    observed = torch.rand(shape, generator=gen, device=device) < cfg.density
    stars = torch.randint(1, 6, shape, generator=gen, device=device).float()
    return {"ratings": stars * observed}


def make_optimizer(model: nn.Module) -> torch.optim.Optimizer:
    """Adam."""
    lr = model.cfg.lr if isinstance(model, Autoencoder) else 1e-3
    return torch.optim.Adam(model.parameters(), lr=lr)


def loss_step(model: nn.Module, optimizer: torch.optim.Optimizer, batch: Batch) -> torch.Tensor:
    """Mean squared error on the observed ratings only."""
    optimizer.zero_grad(set_to_none=True)
    ratings = batch["ratings"]
    mask = (ratings > 0).float()
    err = (model(ratings) - ratings) * mask
    loss = err.pow(2).sum() / mask.sum().clamp(min=1.0)
    loss.backward()
    optimizer.step()
    return loss


WORKLOAD = Workload(
    family="Recommendation",
    build_model=build_model, make_batch=make_batch,
    make_optimizer=make_optimizer, loss_step=loss_step)
