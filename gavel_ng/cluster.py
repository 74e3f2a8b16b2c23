"""The cluster: worker types, their GPU counts, server sizes and prices.

Prices ($/GPU-hour) are resolved in one place, `resolve_prices`: the list prices of the GPU
types gavel_ng.profiles knows, overridden by what the user gave. The simulator's policy,
its cost metric and the executor's per-job charges all read the prices resolved there,
and so does the scheduler service (with the configured prices only).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from types import MappingProxyType

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
        return price_vector(self.price_per_gpu_hour, self.worker_types)

    def priced(self, *given: Mapping[str, float]) -> Cluster:
        """This cluster with its prices resolved: list prices, then its own, then each of `given`."""
        return replace(self, price_per_gpu_hour=resolve_prices(self.worker_types, self.price_per_gpu_hour, *given))

    def server_size(self, worker_type: str) -> int:
        return self.gpus_per_server.get(worker_type, max(1, min(4, self.gpus[worker_type])))

    @classmethod
    def parse(cls, spec: str, gpus_per_server: int | None = None) -> Cluster:
        """Parse the CLI form: a name of `NAMED_CLUSTERS`, or 'TYPE=COUNT[:GPUS_PER_SERVER],...'
        (e.g. 't4=24:4,a100=16:8'). A type's own server size overrides `gpus_per_server`; a COUNT
        that is not a multiple of it leaves a smaller last server."""
        text = NAMED_CLUSTERS.get(spec.strip().lower(), spec) if isinstance(spec, str) else spec
        if not isinstance(text, str) or not text.strip():
            raise InputError("--cluster", spec, f"expected TYPE=COUNT[:GPUS_PER_SERVER],... or one of "
                                                f"{', '.join(NAMED_CLUSTERS)}")
        gpus: dict[str, int] = {}
        per: dict[str, int] = {}
        for part in text.split(","):
            name, sep, rest = part.strip().partition("=")
            name = name.strip()
            if not sep or not name:
                raise InputError("--cluster", part, "expected TYPE=COUNT[:GPUS_PER_SERVER] (or a named cluster: "
                                                    f"{', '.join(NAMED_CLUSTERS)})")
            if name in gpus:
                raise InputError("--cluster", part, f"worker type {name} listed twice")
            count, colon, size = rest.partition(":")
            gpus[name] = _cli_int(count, part, "GPU count must be an integer >= 0", 0)
            if colon:
                per[name] = _cli_int(size, part, "GPUs per server must be an integer >= 1", 1)
            elif gpus_per_server:
                per[name] = gpus_per_server
        return cls(gpus=gpus, gpus_per_server=per)


# Named clusters (`--cluster NAME`): Sia (Jayaram Subramanya et al., SOSP'23). §4.3 lists its
# three settings; §4.2 the node types: t4 = AWS g4dn.12xlarge (4 T4), rtx = 8 RTX 2080 Ti,
# a100 = DGX-A100 (8 A100), quad = 4 Quadro RTX 6000.
NAMED_CLUSTERS: MappingProxyType[str, str] = MappingProxyType({
    "sia": "t4=24:4,rtx2080ti=24:8,a100=16:8",            # heterogeneous: 6 t4, 3 rtx, 2 a100 nodes (64 GPUs)
    "sia-physical": "rtx2080ti=24:8,a100=16:8,rtx6000=4:4",  # physical: 3 rtx, 2 a100, 1 quad node (44 GPUs)
    "sia-homogeneous": "t4=64:4",                          # homogeneous: 16 t4 nodes (64 GPUs)
})


def _cli_int(text: str, part: str, reason: str, minimum: int) -> int:
    try:
        value = int(text)
    except ValueError:
        raise InputError("--cluster", part, reason) from None
    if value < minimum:
        raise InputError("--cluster", part, reason)
    return value


def resolve_prices(worker_types: Sequence[str], *given: Mapping[str, float],
                   list_prices: bool = True) -> dict[str, float]:
    """$/GPU-hour of each worker type that has a price: the list price of the GPU types
    gavel_ng.profiles knows (unless `list_prices` is False), overridden by each of `given` in
    turn. A type with no price is absent."""
    prices: dict[str, float] = {}
    if list_prices:
        from .profiles.gpus import GPUS

        prices = {w: GPUS[w.lower()].dollars_per_hour for w in worker_types if w.lower() in GPUS}
    for layer in given:
        prices.update(layer)
    return prices


def price_vector(prices: Mapping[str, float], columns: Sequence[str]) -> np.ndarray | None:
    """The prices of `columns` as a vector, or None when one of them has no price."""
    if not all(c in prices for c in columns):
        return None
    return np.array([prices[c] for c in columns], dtype=float)


def _is_number(x: object) -> bool:
    return isinstance(x, (int, float, np.floating, np.integer)) and not isinstance(x, bool) and np.isfinite(x)
