"""Transformer translation model (Vaswani et al. 2017) on Multi30k-like (de-en) shapes.

Encoder-decoder with post-norm residual blocks. Attention is written with plain matmuls
so every FLOP is visible to the FLOP counter on any device.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from .base import Batch, Workload, check_size, generator_for


@dataclass(frozen=True)
class TransformerConfig:
    """Model width/depth, vocabulary sizes (Multi30k de/en with min. frequency 2) and lengths."""

    d_model: int
    heads: int
    d_ff: int
    layers: int
    src_vocab: int
    tgt_vocab: int
    src_len: int
    tgt_len: int
    lr: float


CONFIGS = {
    "full": TransformerConfig(512, 8, 2048, 6, 7853, 5893, 32, 32, 1e-4),
    "tiny": TransformerConfig(32, 2, 64, 1, 100, 90, 8, 8, 3e-3),
}
PAD = 0


class _Attention(nn.Module):
    def __init__(self, d: int, heads: int) -> None:
        super().__init__()
        self.heads = heads
        self.q, self.k, self.v, self.o = (nn.Linear(d, d) for _ in range(4))

    def forward(self, x: torch.Tensor, mem: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        b, n, d = x.shape
        h = self.heads

        def split(t: torch.Tensor) -> torch.Tensor:
            return t.view(b, -1, h, d // h).transpose(1, 2)

        q, k, v = split(self.q(x)), split(self.k(mem)), split(self.v(mem))
        scores = q @ k.transpose(-2, -1) / math.sqrt(d // h)
        attn = F.softmax(scores.masked_fill(mask, float("-inf")), dim=-1)
        return self.o((attn @ v).transpose(1, 2).reshape(b, n, d))


class _Block(nn.Module):
    def __init__(self, cfg: TransformerConfig, cross: bool) -> None:
        super().__init__()
        d = cfg.d_model
        self.self_attn = _Attention(d, cfg.heads)
        self.cross_attn = _Attention(d, cfg.heads) if cross else None
        self.ff = nn.Sequential(nn.Linear(d, cfg.d_ff), nn.ReLU(), nn.Linear(cfg.d_ff, d))
        self.norms = nn.ModuleList(nn.LayerNorm(d) for _ in range(3 if cross else 2))
        self.drop = nn.Dropout(0.1)

    def forward(self, x: torch.Tensor, mask: torch.Tensor,
                mem: torch.Tensor | None = None,
                mem_mask: torch.Tensor | None = None) -> torch.Tensor:
        x = self.norms[0](x + self.drop(self.self_attn(x, x, mask)))
        if self.cross_attn is not None and mem is not None and mem_mask is not None:
            x = self.norms[1](x + self.drop(self.cross_attn(x, mem, mem_mask)))
        return self.norms[-1](x + self.drop(self.ff(x)))


class Seq2SeqTransformer(nn.Module):
    """Encoder and decoder stacks with learned token and position embeddings."""

    def __init__(self, cfg: TransformerConfig) -> None:
        super().__init__()
        self.cfg = cfg
        d = cfg.d_model
        self.src_emb = nn.Embedding(cfg.src_vocab, d, padding_idx=PAD)
        self.tgt_emb = nn.Embedding(cfg.tgt_vocab, d, padding_idx=PAD)
        self.pos = nn.Embedding(max(cfg.src_len, cfg.tgt_len), d)
        self.encoder = nn.ModuleList(_Block(cfg, cross=False) for _ in range(cfg.layers))
        self.decoder = nn.ModuleList(_Block(cfg, cross=True) for _ in range(cfg.layers))
        self.out = nn.Linear(d, cfg.tgt_vocab, bias=False)

    def _embed(self, emb: nn.Embedding, tokens: torch.Tensor) -> torch.Tensor:
        pos = torch.arange(tokens.shape[1], device=tokens.device)
        return emb(tokens) * math.sqrt(self.cfg.d_model) + self.pos(pos)

    def forward(self, src: torch.Tensor, tgt: torch.Tensor) -> torch.Tensor:
        src_pad = (src == PAD)[:, None, None, :]
        n = tgt.shape[1]
        causal = torch.ones(n, n, dtype=torch.bool, device=tgt.device).triu(1)
        tgt_mask = causal[None, None] | (tgt == PAD)[:, None, None, :]
        mem = self._embed(self.src_emb, src)
        for block in self.encoder:
            mem = block(mem, src_pad)
        x = self._embed(self.tgt_emb, tgt)
        for block in self.decoder:
            x = block(x, tgt_mask, mem, src_pad)
        return self.out(x)


def build_model(size: str = "full") -> nn.Module:
    """Transformer-base sized (6+6 layers, d_model 512) or a tiny one for tests."""
    return Seq2SeqTransformer(CONFIGS[check_size(size)])


def make_batch(batch_size: int, size: str = "full", seed: int | None = 0,
               device: torch.device | str = "cpu") -> dict[str, torch.Tensor]:
    """Random sentence pairs padded to fixed lengths; tgt_in/tgt_out are the shifted target."""
    cfg = CONFIGS[check_size(size)]
    gen = generator_for(seed, device)
    src = torch.randint(1, cfg.src_vocab, (batch_size, cfg.src_len), generator=gen, device=device)
    tgt_shape = (batch_size, cfg.tgt_len + 1)
    tgt = torch.randint(1, cfg.tgt_vocab, tgt_shape, generator=gen, device=device)
    return {"src": src, "tgt_in": tgt[:, :-1].contiguous(), "tgt_out": tgt[:, 1:].contiguous()}


def make_optimizer(model: nn.Module) -> torch.optim.Optimizer:
    """Adam with the betas of the original paper."""
    lr = model.cfg.lr if isinstance(model, Seq2SeqTransformer) else 1e-4
    return torch.optim.Adam(model.parameters(), lr=lr, betas=(0.9, 0.98), eps=1e-9)


def loss_step(model: nn.Module, optimizer: torch.optim.Optimizer, batch: Batch) -> torch.Tensor:
    """Label-smoothed cross entropy over target tokens, padding ignored."""
    optimizer.zero_grad(set_to_none=True)
    logits = model(batch["src"], batch["tgt_in"])
    loss = F.cross_entropy(logits.flatten(0, 1), batch["tgt_out"].flatten(),
                           ignore_index=PAD, label_smoothing=0.1)
    loss.backward()
    optimizer.step()
    return loss


WORKLOAD = Workload(
    family="Transformer",
    build_model=build_model, make_batch=make_batch,
    make_optimizer=make_optimizer, loss_step=loss_step)
