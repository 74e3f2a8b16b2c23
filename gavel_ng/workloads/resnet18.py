"""ResNet-18 image classification on CIFAR-10 shapes (32x32x3 images, 10 classes).

The CIFAR stem: no 7x7 convolution, no max-pool; basic blocks; SGD, lr 0.1, momentum 0.9.
"""

from __future__ import annotations

from .resnet import ResNetConfig, resnet_workload

CONFIGS = {
    "full": ResNetConfig(False, (2, 2, 2, 2), (64, 128, 256, 512), 32, 10, False),
    "tiny": ResNetConfig(False, (1, 1, 1, 1), (8, 16, 32, 32), 16, 10, False),
}
WORKLOAD = resnet_workload("ResNet-18", CONFIGS)
