"""PyTorch definitions of the seven model families of Gavel's Table 2 and their 26 job types.

Each family has a paper-sized (``"full"``) and a ``"tiny"`` model, a synthetic batch
generator and a training step, so the profiler can count work per iteration and the
deployment runtime can run them as real jobs without datasets.
"""

from __future__ import annotations

import re
from types import MappingProxyType

from . import a3c, cyclegan, lstm_lm, recommendation, resnet18, resnet50, transformer
from .base import SIZES, Batch, Workload

_WORKLOADS: MappingProxyType[str, Workload] = MappingProxyType({
    w.family: w for w in (resnet18.WORKLOAD, resnet50.WORKLOAD, transformer.WORKLOAD,
                          lstm_lm.WORKLOAD, recommendation.WORKLOAD, a3c.WORKLOAD,
                          cyclegan.WORKLOAD)
})
# Families whose job-type name carries no batch size (one batch size each in Table 2).
_UNSIZED = ("A3C", "CycleGAN")
_ALIASES = {re.sub(r"[^a-z0-9]", "", f.lower()): f for f in _WORKLOADS}
_ALIASES.update({"lstm": "LM", "recoder": "Recommendation", "autoencoder": "Recommendation"})
_NAME = re.compile(r"^(?P<family>.+?) \(batch size (?P<bs>\d+)\)$")


def list_families() -> list[str]:
    """The seven family names, spelled as in Gavel's job-type strings."""
    return list(_WORKLOADS)


def get_workload(family: str) -> Workload:
    """Look a family up by its Gavel name or a loose alias ('resnet18', 'lstm', ...)."""
    if family in _WORKLOADS:
        return _WORKLOADS[family]
    key = re.sub(r"[^a-z0-9]", "", family.lower())
    if key in _ALIASES:
        return _WORKLOADS[_ALIASES[key]]
    raise KeyError(f"unknown workload family {family!r}; known: {list_families()}")


def job_type_name(family: str, batch_size: int) -> str:
    """Gavel's job-type string, e.g. 'ResNet-18 (batch size 16)' or 'A3C'."""
    workload = get_workload(family)
    if batch_size not in workload.batch_sizes:
        raise ValueError(f"{workload.family} has no batch size {batch_size}")
    if workload.family in _UNSIZED:
        return workload.family
    return f"{workload.family} (batch size {batch_size})"


def parse_job_type(name: str) -> tuple[str, int]:
    """Split a Gavel job-type string into (family, batch size); A3C -> 4, CycleGAN -> 1."""
    match = _NAME.match(name.strip())
    if match:
        family, batch_size = match["family"], int(match["bs"])
    elif name.strip() in _UNSIZED:
        family = name.strip()
        batch_size = _WORKLOADS[family].batch_sizes[0]
    else:
        raise ValueError(f"not a Gavel job type: {name!r}")
    if family not in _WORKLOADS or batch_size not in _WORKLOADS[family].batch_sizes:
        raise ValueError(f"not one of the 26 Gavel job types: {name!r}")
    return family, batch_size


JOB_TYPES: tuple[str, ...] = tuple(
    job_type_name(f, bs) for f, w in _WORKLOADS.items() for bs in w.batch_sizes)

__all__ = ["JOB_TYPES", "SIZES", "Batch", "Workload", "get_workload", "job_type_name",
           "list_families", "parse_job_type"]
