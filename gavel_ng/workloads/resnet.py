"""Residual networks (He et al. 2016) shared by the ResNet-18 and ResNet-50 families.

Written from the paper's description: basic blocks (two 3x3 convolutions) for the
18-layer net, bottleneck blocks (1x1, 3x3, 1x1 with 4x expansion) for the 50-layer net.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from .base import Batch, Workload, check_size, generator_for


@dataclass(frozen=True)
class ResNetConfig:
    """Depth, width and input shape of one ResNet variant."""

    bottleneck: bool
    blocks: tuple[int, int, int, int]
    widths: tuple[int, int, int, int]
    image: int
    classes: int
    imagenet_stem: bool  # 7x7/2 conv + max-pool (ImageNet) or a single 3x3 conv (CIFAR)


class _Basic(nn.Module):
    expansion = 1

    def __init__(self, cin: int, width: int, stride: int) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(cin, width, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(width)
        self.conv2 = nn.Conv2d(width, width, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(width)
        self.short = _shortcut(cin, width, stride)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = F.relu(self.bn1(self.conv1(x)))
        y = self.bn2(self.conv2(y))
        return F.relu(y + self.short(x))


class _Bottleneck(nn.Module):
    expansion = 4

    def __init__(self, cin: int, width: int, stride: int) -> None:
        super().__init__()
        cout = width * self.expansion
        self.conv1 = nn.Conv2d(cin, width, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(width)
        self.conv2 = nn.Conv2d(width, width, 3, stride, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(width)
        self.conv3 = nn.Conv2d(width, cout, 1, bias=False)
        self.bn3 = nn.BatchNorm2d(cout)
        self.short = _shortcut(cin, cout, stride)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = F.relu(self.bn1(self.conv1(x)))
        y = F.relu(self.bn2(self.conv2(y)))
        y = self.bn3(self.conv3(y))
        return F.relu(y + self.short(x))


def _shortcut(cin: int, cout: int, stride: int) -> nn.Module:
    if stride == 1 and cin == cout:
        return nn.Identity()
    return nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))


class ResNet(nn.Module):
    """Stem, four stages of residual blocks, global average pool, linear classifier."""

    def __init__(self, cfg: ResNetConfig) -> None:
        super().__init__()
        block = _Bottleneck if cfg.bottleneck else _Basic
        stem_width = cfg.widths[0]
        if cfg.imagenet_stem:
            self.stem = nn.Sequential(
                nn.Conv2d(3, stem_width, 7, 2, 3, bias=False), nn.BatchNorm2d(stem_width),
                nn.ReLU(inplace=True), nn.MaxPool2d(3, 2, 1))
        else:
            self.stem = nn.Sequential(
                nn.Conv2d(3, stem_width, 3, 1, 1, bias=False), nn.BatchNorm2d(stem_width),
                nn.ReLU(inplace=True))
        layers: list[nn.Module] = []
        cin = stem_width
        for stage, (n, width) in enumerate(zip(cfg.blocks, cfg.widths, strict=True)):
            for i in range(n):
                stride = 2 if stage > 0 and i == 0 else 1
                layers.append(block(cin, width, stride))
                cin = width * block.expansion
        self.body = nn.Sequential(*layers)
        self.fc = nn.Linear(cin, cfg.classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.body(self.stem(x))
        return self.fc(torch.flatten(F.adaptive_avg_pool2d(y, 1), 1))


def image_batch(cfg: ResNetConfig, batch_size: int, seed: int | None,
                device: torch.device | str) -> dict[str, torch.Tensor]:
    """Random normalised images and random labels of the configured shape."""
    gen = generator_for(seed, device)
    shape = (batch_size, 3, cfg.image, cfg.image)
    images = torch.randn(shape, generator=gen, device=device)
    labels = torch.randint(0, cfg.classes, (batch_size,), generator=gen, device=device)
    return {"images": images, "labels": labels}


def sgd(model: nn.Module, lr: float = 0.1) -> torch.optim.Optimizer:
    """SGD with momentum and weight decay, the usual recipe for both ResNets."""
    return torch.optim.SGD(model.parameters(), lr=lr, momentum=0.9, weight_decay=1e-4)


def classification_step(model: nn.Module, optimizer: torch.optim.Optimizer,
                        batch: Batch) -> torch.Tensor:
    """Cross-entropy step shared by the image classifiers."""
    optimizer.zero_grad(set_to_none=True)
    loss = F.cross_entropy(model(batch["images"]), batch["labels"])
    loss.backward()
    optimizer.step()
    return loss


def resnet_workload(family: str, configs: dict[str, ResNetConfig]) -> Workload:
    """A ResNet family: only the per-size configurations differ between 18 and 50."""

    def build_model(size: str = "full") -> nn.Module:
        return ResNet(configs[check_size(size)])

    def make_batch(batch_size: int, size: str = "full", seed: int | None = 0,
                   device: torch.device | str = "cpu") -> Batch:
        return image_batch(configs[check_size(size)], batch_size, seed, device)

    return Workload(family=family, build_model=build_model, make_batch=make_batch, make_optimizer=lambda m: sgd(m, 0.1),
                    loss_step=classification_step)
