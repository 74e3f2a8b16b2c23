"""PyTorch definitions of the seven model families of Gavel's Table 2 and their 26 job types.

The names, batch sizes and parsing are plain data in `gavel_ng.jobtypes` (no torch), re-exported here.

Each family has a paper-sized (``"full"``) and a ``"tiny"`` model, a synthetic batch
generator and a training step, so the profiler can count work per iteration and the
deployment runtime can run them as real jobs without datasets.
"""

from __future__ import annotations

from types import MappingProxyType

from ..jobtypes import JOB_TYPES, get_family, job_type_name, list_families, parse_job_type
from . import a3c, cyclegan, lstm_lm, recommendation, resnet18, resnet50, transformer
from .base import SIZES, Batch, Workload

_WORKLOADS: MappingProxyType[str, Workload] = MappingProxyType({
    w.family: w for w in (resnet18.WORKLOAD, resnet50.WORKLOAD, transformer.WORKLOAD,
                          lstm_lm.WORKLOAD, recommendation.WORKLOAD, a3c.WORKLOAD,
                          cyclegan.WORKLOAD)
})


def get_workload(family: str) -> Workload:
    """Look a family up by its Gavel name or a loose alias ('resnet18', 'lstm', ...)."""
    return _WORKLOADS[get_family(family).name]


__all__ = ["JOB_TYPES", "SIZES", "Batch", "Workload", "get_workload", "job_type_name",
           "list_families", "parse_job_type"]
