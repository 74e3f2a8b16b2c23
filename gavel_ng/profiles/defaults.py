"""The built-in throughput table: the performance model evaluated for chosen GPU types.

This is what gavel_ng uses when no measured table is given. Tables are cached per
argument set (building the full six-type table with pairs takes a fraction of a second)
and each call returns a copy, so a caller may edit its table freely. Nothing here
imports torch: the model only reads the stored workload profiles.
"""

from __future__ import annotations

import math
from functools import cache

from gavel_ng.errors import InputError
from gavel_ng.throughputs import ThroughputTable

from .gpus import GPUS
from .model import build_table

# The heterogeneity knob pivots on V100: trace durations are defined on one V100, so
# keeping its column fixed keeps every job's total work the same as the knob moves.
HETEROGENEITY_BASE = "v100"
DEFAULT_NETWORK_GBPS = 10.0


def parse_gpus(gpus: list[str] | str | None, field: str = "gpus") -> tuple[str, ...]:
    """Known GPU type names, lower-cased, in the given order, duplicates dropped.

    Accepts a list or a comma-separated string; None or "all" means every known type.
    """
    if gpus is None:
        return tuple(GPUS)
    items = gpus.split(",") if isinstance(gpus, str) else list(gpus)
    names = [str(g).strip().lower() for g in items if str(g).strip()]
    if names == ["all"]:
        return tuple(GPUS)
    if not names:
        raise InputError(field, gpus, "name at least one GPU type")
    for name in names:
        if name not in GPUS:
            raise InputError(field, name, f"unknown GPU type; known: {', '.join(GPUS)}")
    return tuple(dict.fromkeys(names))


def default_table(gpus: list[str] | None = None, heterogeneity: float = 1.0,
                  network_gbps: float = DEFAULT_NETWORK_GBPS) -> ThroughputTable:
    """The modeled table (isolated, unconsolidated twins and pairs) for these GPU types.

    ``gpus`` defaults to every known type. ``heterogeneity`` raises each job's speedup
    over V100 to that power (0: all types as fast as a V100, 1: the model, 2: the
    differences squared); ``network_gbps`` is the bandwidth between servers.
    """
    names = parse_gpus(gpus)
    if not (isinstance(heterogeneity, (int, float)) and math.isfinite(heterogeneity) and heterogeneity >= 0):
        raise InputError("heterogeneity", heterogeneity, "must be a finite number >= 0")
    if not (isinstance(network_gbps, (int, float)) and math.isfinite(network_gbps) and network_gbps > 0):
        raise InputError("network_gbps", network_gbps, "must be a finite number > 0")
    return copy_table(_cached(names, float(heterogeneity), float(network_gbps)))


@cache
def _cached(gpus: tuple[str, ...], heterogeneity: float, network_gbps: float) -> ThroughputTable:
    return build_table(list(gpus), network_gbps=network_gbps, heterogeneity=heterogeneity,
                       base=HETEROGENEITY_BASE, pairs=True)


def copy_table(table: ThroughputTable) -> ThroughputTable:
    """A copy sharing nothing mutable with the original (pair tuples are immutable)."""
    return ThroughputTable(
        isolated={w: dict(per) for w, per in table.isolated.items()},
        pairs={w: {k: dict(row) for k, row in per.items()} for w, per in table.pairs.items()},
    )
