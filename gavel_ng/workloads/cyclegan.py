"""CycleGAN (Zhu et al. 2017) image-to-image translation on monet2photo-like 256x256 images.

Two ResNet generators (A->B, B->A) and two 70x70 PatchGAN discriminators. One optimizer
holds all four networks: the generator phase leaves discriminator gradients unset and
the discriminator phase leaves generator gradients unset, so each update touches only
the networks of its phase (Adam skips parameters without a gradient).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from .base import Batch, Workload, check_size, generator_for


@dataclass(frozen=True)
class CycleGANConfig:
    """Image size, generator/discriminator widths, residual blocks, PatchGAN depth, lr."""

    image: int
    ngf: int
    ndf: int
    res_blocks: int
    d_layers: int
    lr: float


CONFIGS = {
    "full": CycleGANConfig(256, 64, 64, 9, 3, 2e-4),
    "tiny": CycleGANConfig(32, 8, 8, 1, 2, 2e-3),
}
CYCLE, IDENTITY = 10.0, 5.0


def _conv_norm_relu(cin: int, cout: int, k: int, stride: int, pad: int) -> list[nn.Module]:
    return [nn.Conv2d(cin, cout, k, stride, pad), nn.InstanceNorm2d(cout), nn.ReLU(inplace=True)]


class _Res(nn.Module):
    def __init__(self, c: int) -> None:
        super().__init__()
        self.body = nn.Sequential(
            nn.ReflectionPad2d(1), *_conv_norm_relu(c, c, 3, 1, 0),
            nn.ReflectionPad2d(1), nn.Conv2d(c, c, 3), nn.InstanceNorm2d(c))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.body(x)


def generator(cfg: CycleGANConfig) -> nn.Module:
    """7x7 conv, two stride-2 downsamplings, residual blocks, two upsamplings, 7x7 conv."""
    g = cfg.ngf
    layers: list[nn.Module] = [nn.ReflectionPad2d(3), *_conv_norm_relu(3, g, 7, 1, 0)]
    layers += _conv_norm_relu(g, 2 * g, 3, 2, 1) + _conv_norm_relu(2 * g, 4 * g, 3, 2, 1)
    layers += [_Res(4 * g) for _ in range(cfg.res_blocks)]
    for cin, cout in ((4 * g, 2 * g), (2 * g, g)):
        layers += [nn.ConvTranspose2d(cin, cout, 3, 2, 1, output_padding=1),
                   nn.InstanceNorm2d(cout), nn.ReLU(inplace=True)]
    layers += [nn.ReflectionPad2d(3), nn.Conv2d(g, 3, 7), nn.Tanh()]
    return nn.Sequential(*layers)


def discriminator(cfg: CycleGANConfig) -> nn.Module:
    """PatchGAN: strided 4x4 convs with leaky ReLU, one logit per patch."""
    d = cfg.ndf
    layers: list[nn.Module] = [nn.Conv2d(3, d, 4, 2, 1), nn.LeakyReLU(0.2, inplace=True)]
    cin = d
    for i in range(1, cfg.d_layers + 1):
        cout = d * min(2 ** i, 8)
        stride = 2 if i < cfg.d_layers else 1
        layers += [nn.Conv2d(cin, cout, 4, stride, 1), nn.InstanceNorm2d(cout),
                   nn.LeakyReLU(0.2, inplace=True)]
        cin = cout
    layers.append(nn.Conv2d(cin, 1, 4, 1, 1))
    return nn.Sequential(*layers)


class CycleGAN(nn.Module):
    """Container of the four networks."""

    def __init__(self, cfg: CycleGANConfig) -> None:
        super().__init__()
        self.cfg = cfg
        self.g_ab, self.g_ba = generator(cfg), generator(cfg)
        self.d_a, self.d_b = discriminator(cfg), discriminator(cfg)


def build_model(size: str = "full") -> nn.Module:
    """Paper-sized CycleGAN for 256x256 images, or a tiny one."""
    return CycleGAN(CONFIGS[check_size(size)])


def make_batch(batch_size: int = 1, size: str = "full", seed: int | None = 0,
               device: torch.device | str = "cpu") -> dict[str, torch.Tensor]:
    """Unpaired images from domains A and B, scaled to [-1, 1]."""
    cfg = CONFIGS[check_size(size)]
    gen = generator_for(seed, device)
    shape = (batch_size, 3, cfg.image, cfg.image)
    return {"a": torch.rand(shape, generator=gen, device=device) * 2 - 1,
            "b": torch.rand(shape, generator=gen, device=device) * 2 - 1}


def make_optimizer(model: nn.Module) -> torch.optim.Optimizer:
    """Adam with beta1 = 0.5 over all four networks."""
    lr = model.cfg.lr if isinstance(model, CycleGAN) else 2e-4
    return torch.optim.Adam(model.parameters(), lr=lr, betas=(0.5, 0.999))


def _gan(pred: torch.Tensor, real: bool) -> torch.Tensor:
    target = torch.ones_like(pred) if real else torch.zeros_like(pred)
    return F.mse_loss(pred, target)


def loss_step(model: nn.Module, optimizer: torch.optim.Optimizer, batch: Batch) -> torch.Tensor:
    """Generator phase (adversarial + cycle + identity), then discriminator phase."""
    assert isinstance(model, CycleGAN)
    a, b = batch["a"], batch["b"]
    discs = list(model.d_a.parameters()) + list(model.d_b.parameters())
    optimizer.zero_grad(set_to_none=True)
    for p in discs:
        p.requires_grad_(False)
    fake_b, fake_a = model.g_ab(a), model.g_ba(b)
    g_loss = (_gan(model.d_b(fake_b), True) + _gan(model.d_a(fake_a), True)
              + CYCLE * (F.l1_loss(model.g_ba(fake_b), a) + F.l1_loss(model.g_ab(fake_a), b))
              + IDENTITY * (F.l1_loss(model.g_ab(b), b) + F.l1_loss(model.g_ba(a), a)))
    g_loss.backward()
    optimizer.step()
    for p in discs:
        p.requires_grad_(True)
    optimizer.zero_grad(set_to_none=True)
    d_loss = 0.5 * (_gan(model.d_a(a), True) + _gan(model.d_a(fake_a.detach()), False)
                    + _gan(model.d_b(b), True) + _gan(model.d_b(fake_b.detach()), False))
    d_loss.backward()
    optimizer.step()
    return g_loss.detach() + d_loss.detach()


WORKLOAD = Workload(
    family="CycleGAN",
    build_model=build_model, make_batch=make_batch,
    make_optimizer=make_optimizer, loss_step=loss_step)
