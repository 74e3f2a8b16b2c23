"""The cluster: worker types, their GPU counts, server sizes and prices."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from .errors import InputError, require


@dataclass(frozen=True)
class Cluster:
    """GPUs per worker type. Order of `gpus` is the column order of allocations."""

    gpus: dict[str, int]
    gpus_per_server: dict[str, int] = field(default_factory=dict)
    price_per_gpu_hour: dict[str, float] = field(default_factory=dict)

    def __post_init__(self) -> None:
        require(len(self.gpus) > 0, "cluster", self.gpus, "needs at least one worker type")
        for name, count in self.gpus.items():
            require(isinstance(name, str) and name != "", "cluster", name, "worker type must be a name")
            require(
                isinstance(count, (int, np.integer)) and not isinstance(count, bool) and count >= 0,
                f"cluster.{name}", count, "GPU count must be a non-negative integer",
            )
        for name, per in self.gpus_per_server.items():
            require(name in self.gpus, "gpus_per_server", name, "unknown worker type")
            require(isinstance(per, int) and per > 0, f"gpus_per_server.{name}", per, "must be a positive integer")
        for name, price in self.price_per_gpu_hour.items():
            require(name in self.gpus, "prices", name, "unknown worker type")
            require(_is_number(price) and price >= 0, f"prices.{name}", price, "must be a non-negative number")

    @property
    def worker_types(self) -> list[str]:
        return list(self.gpus)

    def capacity(self) -> np.ndarray:
        """GPU counts as a vector in worker-type order."""
        return np.array([self.gpus[w] for w in self.gpus], dtype=float)

    def prices(self) -> np.ndarray | None:
        """$/GPU-hour per worker type, or None when any type has no price."""
        if not all(w in self.price_per_gpu_hour for w in self.gpus):
            return None
        return np.array([self.price_per_gpu_hour[w] for w in self.gpus], dtype=float)

    def server_size(self, worker_type: str) -> int:
        return self.gpus_per_server.get(worker_type, max(1, min(4, self.gpus[worker_type])))

    @classmethod
    def parse(cls, spec: str, gpus_per_server: int | None = None) -> Cluster:
        """Parse 'v100=36,p100=36,k80=36' (the CLI form)."""
        gpus: dict[str, int] = {}
        for part in spec.split(","):
            name, sep, count = part.strip().partition("=")
            if not sep or not name:
                raise InputError("--cluster", part, "expected TYPE=COUNT")
            try:
                gpus[name.strip()] = int(count)
            except ValueError:
                raise InputError("--cluster", part, "GPU count must be an integer") from None
        per = {w: gpus_per_server for w in gpus} if gpus_per_server else {}
        return cls(gpus=gpus, gpus_per_server=per)


def _is_number(x: object) -> bool:
    return isinstance(x, (int, float, np.floating, np.integer)) and not isinstance(x, bool) and np.isfinite(x)
