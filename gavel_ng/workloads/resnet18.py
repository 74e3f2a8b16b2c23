"""ResNet-18 image classification on CIFAR-10 shapes (32x32x3 images, 10 classes)."""

from __future__ import annotations

import torch
from torch import nn

from .base import Workload, check_size
from .resnet import ResNet, ResNetConfig, classification_step, image_batch, sgd

CONFIGS = {
    "full": ResNetConfig(False, (2, 2, 2, 2), (64, 128, 256, 512), 32, 10, False),
    "tiny": ResNetConfig(False, (1, 1, 1, 1), (8, 16, 32, 32), 16, 10, False),
}


def build_model(size: str = "full") -> nn.Module:
    """ResNet-18 with the CIFAR stem (no 7x7 conv, no max-pool)."""
    return ResNet(CONFIGS[check_size(size)])


def make_batch(batch_size: int, size: str = "full", seed: int | None = 0,
               device: torch.device | str = "cpu") -> dict[str, torch.Tensor]:
    """Synthetic CIFAR-10 batch."""
    return image_batch(CONFIGS[check_size(size)], batch_size, seed, device)


def make_optimizer(model: nn.Module) -> torch.optim.Optimizer:
    """SGD, lr 0.1, momentum 0.9."""
    return sgd(model, 0.1)


WORKLOAD = Workload(
    family="ResNet-18", task="image classification", dataset="CIFAR-10",
    batch_sizes=(16, 32, 64, 128, 256), build_model=build_model, make_batch=make_batch,
    make_optimizer=make_optimizer, loss_step=classification_step)
