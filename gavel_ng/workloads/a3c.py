"""A3C actor-critic (Mnih et al. 2016) on Pong-like inputs (4 stacked 84x84 frames, 6 actions).

One training iteration is one actor update: an n-step rollout of ``rollout`` sequential
forward passes (one per environment step, as the actor acts) over ``batch_size`` parallel
environments, then the policy-gradient + value + entropy loss and one optimizer step.
The environment is replaced by pre-drawn frames, actions and rewards.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from .base import Batch, Workload, check_size, generator_for


@dataclass(frozen=True)
class A3CConfig:
    """Frame size, stacked frames, actions, rollout length, widths, learning rate."""

    frame: int
    stack: int
    actions: int
    rollout: int
    channels: tuple[int, int]
    hidden: int
    lr: float


CONFIGS = {
    "full": A3CConfig(84, 4, 6, 20, (16, 32), 256, 1e-4),
    "tiny": A3CConfig(20, 2, 3, 4, (4, 8), 16, 1e-3),
}
GAMMA = 0.99
ENTROPY = 0.01
VALUE = 0.5


class ActorCritic(nn.Module):
    """Two conv layers and a dense layer shared by the policy and value heads."""

    def __init__(self, cfg: A3CConfig) -> None:
        super().__init__()
        self.cfg = cfg
        c1, c2 = cfg.channels
        self.conv = nn.Sequential(
            nn.Conv2d(cfg.stack, c1, 8, 4), nn.ReLU(), nn.Conv2d(c1, c2, 4, 2), nn.ReLU(),
            nn.Flatten())
        side = ((cfg.frame - 8) // 4 + 1 - 4) // 2 + 1
        flat = c2 * side * side
        self.fc = nn.Linear(flat, cfg.hidden)
        self.policy = nn.Linear(cfg.hidden, cfg.actions)
        self.value = nn.Linear(cfg.hidden, 1)

    def forward(self, obs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        h = F.relu(self.fc(self.conv(obs)))
        return self.policy(h), self.value(h).squeeze(-1)


def build_model(size: str = "full") -> nn.Module:
    """Feed-forward A3C network of the original paper, or a tiny one."""
    return ActorCritic(CONFIGS[check_size(size)])


def make_batch(batch_size: int = 4, size: str = "full", seed: int | None = 0,
               device: torch.device | str = "cpu") -> dict[str, torch.Tensor]:
    """A rollout: frames (T+1, B, C, H, W), actions and rewards (T, B), done flags."""
    cfg = CONFIGS[check_size(size)]
    gen = generator_for(seed, device)
    t, b = cfg.rollout, batch_size
    frames = torch.rand((t + 1, b, cfg.stack, cfg.frame, cfg.frame), generator=gen, device=device)
    actions = torch.randint(0, cfg.actions, (t, b), generator=gen, device=device)
    rewards = torch.randint(-1, 2, (t, b), generator=gen, device=device).float()
    return {"frames": frames, "actions": actions, "rewards": rewards}


def make_optimizer(model: nn.Module) -> torch.optim.Optimizer:
    """Adam (the shared-statistics RMSProp of the paper behaves alike for profiling)."""
    lr = model.cfg.lr if isinstance(model, ActorCritic) else 1e-4
    return torch.optim.Adam(model.parameters(), lr=lr)


def loss_step(model: nn.Module, optimizer: torch.optim.Optimizer, batch: Batch) -> torch.Tensor:
    """Sequential rollout forwards, n-step returns, actor-critic loss, one update."""
    optimizer.zero_grad(set_to_none=True)
    frames, actions, rewards = batch["frames"], batch["actions"], batch["rewards"]
    steps = actions.shape[0]
    logits, values = zip(*(model(frames[i]) for i in range(steps)), strict=True)
    with torch.no_grad():
        ret = model(frames[steps])[1]
    returns = []
    for i in reversed(range(steps)):
        ret = rewards[i] + GAMMA * ret
        returns.append(ret)
    returns_t = torch.stack(returns[::-1])
    logp = F.log_softmax(torch.stack(logits), dim=-1)
    value_t = torch.stack(values)
    advantage = returns_t - value_t
    chosen = logp.gather(-1, actions.unsqueeze(-1)).squeeze(-1)
    entropy = -(logp.exp() * logp).sum(-1)
    loss = (-(chosen * advantage.detach()) + VALUE * advantage.pow(2) - ENTROPY * entropy).mean()
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 40.0)
    optimizer.step()
    return loss


WORKLOAD = Workload(
    family="A3C",
    build_model=build_model, make_batch=make_batch,
    make_optimizer=make_optimizer, loss_step=loss_step,
    env_steps_per_sample=CONFIGS["full"].rollout)
