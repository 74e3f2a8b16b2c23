"""ResNet-50 image classification on ImageNet shapes (224x224x3 images, 1000 classes).

Bottleneck blocks with the ImageNet stem; SGD, lr 0.1, momentum 0.9.
"""

from __future__ import annotations

from .resnet import ResNetConfig, resnet_workload

CONFIGS = {
    "full": ResNetConfig(True, (3, 4, 6, 3), (64, 128, 256, 512), 224, 1000, True),
    "tiny": ResNetConfig(True, (1, 1, 1, 1), (8, 8, 16, 16), 32, 10, True),
}
WORKLOAD = resnet_workload("ResNet-50", CONFIGS)
