"""ResNet-50 image classification on ImageNet shapes (224x224x3 images, 1000 classes)."""

from __future__ import annotations

import torch
from torch import nn

from .base import Workload, check_size
from .resnet import ResNet, ResNetConfig, classification_step, image_batch, sgd

CONFIGS = {
    "full": ResNetConfig(True, (3, 4, 6, 3), (64, 128, 256, 512), 224, 1000, True),
    "tiny": ResNetConfig(True, (1, 1, 1, 1), (8, 8, 16, 16), 32, 10, True),
}


def build_model(size: str = "full") -> nn.Module:
    """ResNet-50: bottleneck blocks, ImageNet stem."""
    return ResNet(CONFIGS[check_size(size)])


def make_batch(batch_size: int, size: str = "full", seed: int | None = 0,
               device: torch.device | str = "cpu") -> dict[str, torch.Tensor]:
    """Synthetic ImageNet batch."""
    return image_batch(CONFIGS[check_size(size)], batch_size, seed, device)


def make_optimizer(model: nn.Module) -> torch.optim.Optimizer:
    """SGD, lr 0.1, momentum 0.9."""
    return sgd(model, 0.1)


WORKLOAD = Workload(
    family="ResNet-50", task="image classification", dataset="ImageNet",
    batch_sizes=(16, 32, 64, 128), build_model=build_model, make_batch=make_batch,
    make_optimizer=make_optimizer, loss_step=classification_step)
