"""The per-iteration work record of one job type, and the stored records of the 26 job
types (``data/workloads.json``), kept free of torch so that loading them (for throughput
modeling) does not import PyTorch."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from functools import cache
from importlib import resources
from types import MappingProxyType
from typing import Any

DATA_FILE = "workloads.json"


@dataclass(frozen=True)
class WorkloadProfile:
    """Work and memory of one training iteration of one job type.

    The fields are defined in the docstring of gavel_ng.profiles.measure.
    """

    job_type: str
    family: str
    batch_size: int
    matmul_flops: int
    other_flops: int
    traffic_bytes: int
    kernels: int
    param_bytes: int
    input_bytes: int
    optimizer_bytes: int
    activation_bytes: int
    peak_bytes: int
    conv_bins: dict[int, tuple[int, int]]
    gemm_bins: dict[int, tuple[int, int]]
    env_steps: int = 0

    @property
    def flops(self) -> int:
        """All FLOPs of the iteration."""
        return self.matmul_flops + self.other_flops

    def to_json(self) -> dict[str, Any]:
        """Plain-JSON form (bin keys as strings)."""
        d = asdict(self)
        for name in ("conv_bins", "gemm_bins"):
            d[name] = {str(k): list(v) for k, v in sorted(getattr(self, name).items())}
        return d

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> WorkloadProfile:
        """Inverse of to_json."""
        bins = {name: {int(k): (int(v[0]), int(v[1])) for k, v in d[name].items()}
                for name in ("conv_bins", "gemm_bins")}
        return cls(**{**d, **bins})


@cache
def load_workload_profiles() -> MappingProxyType[str, WorkloadProfile]:
    """The stored per-iteration profiles of the 26 job types, keyed by job-type name."""
    text = resources.files(__package__).joinpath("data", DATA_FILE).read_text()
    rows = json.loads(text)["job_types"]
    return MappingProxyType({r["job_type"]: WorkloadProfile.from_json(r) for r in rows})
