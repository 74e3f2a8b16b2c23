"""The 26 job types of Gavel's Table 2 as plain data: seven model families and their batch sizes.

The scheduler checks a submitted job's type against these names and the worker turns a name into
a model to train; the PyTorch definitions live in `gavel_ng.workloads`, which reads this table, so
that the scheduler accepts a built-in job without torch installed.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from types import MappingProxyType


@dataclass(frozen=True)
class Family:
    """One model family of Table 2: its Gavel name, what it learns, on what, at which batch sizes."""

    name: str
    task: str
    dataset: str
    batch_sizes: tuple[int, ...]
    sized: bool = True          # whether its job-type names carry the batch size (A3C and CycleGAN have one each)


FAMILIES: MappingProxyType[str, Family] = MappingProxyType({f.name: f for f in (
    Family("ResNet-18", "image classification", "CIFAR-10", (16, 32, 64, 128, 256)),
    Family("ResNet-50", "image classification", "ImageNet", (16, 32, 64, 128)),
    Family("Transformer", "language translation", "Multi30k (de-en)", (16, 32, 64, 128, 256)),
    Family("LM", "language modeling", "WikiText-2", (5, 10, 20, 40, 80)),
    Family("Recommendation", "recommendation", "ML-20M", (512, 1024, 2048, 4096, 8192)),
    Family("A3C", "deep reinforcement learning", "Pong", (4,), sized=False),
    Family("CycleGAN", "image-to-image translation", "monet2photo", (1,), sized=False),
)})
_ALIASES = {re.sub(r"[^a-z0-9]", "", name.lower()): name for name in FAMILIES}
_ALIASES.update({"lstm": "LM", "recoder": "Recommendation", "autoencoder": "Recommendation"})
_NAME = re.compile(r"^(?P<family>.+?) \(batch size (?P<bs>\d+)\)$")


def list_families() -> list[str]:
    """The seven family names, spelled as in Gavel's job-type strings."""
    return list(FAMILIES)


def get_family(name: str) -> Family:
    """Look a family up by its Gavel name or a loose alias ('resnet18', 'lstm', ...)."""
    if name in FAMILIES:
        return FAMILIES[name]
    key = re.sub(r"[^a-z0-9]", "", name.lower())
    if key in _ALIASES:
        return FAMILIES[_ALIASES[key]]
    raise KeyError(f"unknown workload family {name!r}; known: {list_families()}")


def job_type_name(family: str, batch_size: int) -> str:
    """Gavel's job-type string, e.g. 'ResNet-18 (batch size 16)' or 'A3C'."""
    f = get_family(family)
    if batch_size not in f.batch_sizes:
        raise ValueError(f"{f.name} has no batch size {batch_size}")
    return f"{f.name} (batch size {batch_size})" if f.sized else f.name


def parse_job_type(name: str) -> tuple[str, int]:
    """Split a Gavel job-type string into (family, batch size); A3C -> 4, CycleGAN -> 1."""
    match = _NAME.match(name.strip())
    if match:
        family, batch_size = match["family"], int(match["bs"])
    elif name.strip() in FAMILIES and not FAMILIES[name.strip()].sized:
        family = name.strip()
        batch_size = FAMILIES[family].batch_sizes[0]
    else:
        raise ValueError(f"not a Gavel job type: {name!r}")
    if family not in FAMILIES or batch_size not in FAMILIES[family].batch_sizes:
        raise ValueError(f"not one of the 26 Gavel job types: {name!r}")
    return family, batch_size


JOB_TYPES: tuple[str, ...] = tuple(job_type_name(f.name, bs) for f in FAMILIES.values() for bs in f.batch_sizes)
