"""LSTM word language model on WikiText-2-like shapes (33,278-word vocabulary, BPTT 35).

Two-layer LSTM with tied input/output embeddings (the 'medium' setting of Zaremba et al.),
trained with plain SGD and gradient-norm clipping as in the classic recipe.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from .base import Batch, Workload, check_size, generator_for


@dataclass(frozen=True)
class LMConfig:
    """Vocabulary, width (embedding = hidden, tied), depth, BPTT length, learning rate."""

    vocab: int
    hidden: int
    layers: int
    bptt: int
    lr: float


CONFIGS = {
    "full": LMConfig(33278, 650, 2, 35, 20.0),
    "tiny": LMConfig(100, 32, 1, 8, 5.0),
}
CLIP = 0.25


class LSTMLanguageModel(nn.Module):
    """Embedding -> LSTM -> tied linear decoder."""

    def __init__(self, cfg: LMConfig) -> None:
        super().__init__()
        self.cfg = cfg
        self.emb = nn.Embedding(cfg.vocab, cfg.hidden)
        dropout = 0.5 if cfg.layers > 1 else 0.0
        self.lstm = nn.LSTM(cfg.hidden, cfg.hidden, cfg.layers, dropout=dropout)
        self.drop = nn.Dropout(0.5)
        self.decoder = nn.Linear(cfg.hidden, cfg.vocab)
        self.decoder.weight = self.emb.weight

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        out, _ = self.lstm(self.drop(self.emb(tokens)))
        return self.decoder(self.drop(out))


def build_model(size: str = "full") -> nn.Module:
    """Two-layer 650-unit LSTM LM, or a tiny one for tests."""
    return LSTMLanguageModel(CONFIGS[check_size(size)])


def make_batch(batch_size: int, size: str = "full", seed: int | None = 0,
               device: torch.device | str = "cpu") -> dict[str, torch.Tensor]:
    """A (bptt, batch) window of token ids and the next-token targets (time-major)."""
    cfg = CONFIGS[check_size(size)]
    gen = generator_for(seed, device)
    seq = torch.randint(0, cfg.vocab, (cfg.bptt + 1, batch_size), generator=gen, device=device)
    return {"tokens": seq[:-1].contiguous(), "targets": seq[1:].contiguous()}


def make_optimizer(model: nn.Module) -> torch.optim.Optimizer:
    """Plain SGD with a large step, as usual for this model."""
    lr = model.cfg.lr if isinstance(model, LSTMLanguageModel) else 20.0
    return torch.optim.SGD(model.parameters(), lr=lr)


def loss_step(model: nn.Module, optimizer: torch.optim.Optimizer, batch: Batch) -> torch.Tensor:
    """Next-token cross entropy, truncated BPTT from a zero state, clipped gradients."""
    optimizer.zero_grad(set_to_none=True)
    logits = model(batch["tokens"])
    loss = F.cross_entropy(logits.flatten(0, 1), batch["targets"].flatten())
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), CLIP)
    optimizer.step()
    return loss


WORKLOAD = Workload(
    family="LM",
    build_model=build_model, make_batch=make_batch,
    make_optimizer=make_optimizer, loss_step=loss_step)
