"""Which GPUs a worker offers and of which type (`gavel-ng worker --gpus auto --gpu-type auto`).

Sources, so a worker needs no flags where clusters run it: NVML (package nvidia-ml-py) for the
devices and their product names; CUDA_VISIBLE_DEVICES, else a Slurm allocation, for which of them
this process may use; $GAVEL_NG_GPU_PRODUCT (Kubernetes: the node label nvidia.com/gpu.product,
passed by the manifest) for the product where NVML cannot answer. Product names map to worker
types through PRODUCT_TYPES, extended by a user's JSON map. Everything here but query_nvml() is
pure, so it is tested on machines without a GPU. Light imports: the worker daemon loads this.
"""

from __future__ import annotations

import logging
import os
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from ..errors import InputError, read_json

log = logging.getLogger(__name__)

PRODUCT_ENV = "GAVEL_NG_GPU_PRODUCT"     # a product name, e.g. the Kubernetes node label's value
TYPE_MAP_ENV = "GAVEL_NG_GPU_TYPE_MAP"   # a JSON file {"product pattern": "type"}, like --gpu-type-map
GRANT_ENVS = ("CUDA_VISIBLE_DEVICES", "SLURM_STEP_GPUS", "SLURM_JOB_GPUS")   # id lists, in this order

# Product name pattern -> worker type, first match wins. Names and patterns are compared normalized
# (lower case, each run of other characters one space) and a pattern matches whole words, so "a10"
# does not match "A100" nor "l4" "L40S": "Tesla V100-SXM2-16GB" is "tesla v100 sxm2 16gb" -> v100.
PRODUCT_TYPES: tuple[tuple[str, str], ...] = (
    ("gh200", "gh200"), ("h200", "h200"), ("h100", "h100"), ("h800", "h800"), ("b200", "b200"),
    ("a100", "a100"), ("a800", "a800"), ("a10g", "a10g"), ("a10", "a10"), ("a30", "a30"), ("a40", "a40"),
    ("l40s", "l40s"), ("l40", "l40"), ("l4", "l4"),
    ("v100", "v100"), ("v100s", "v100"), ("p100", "p100"), ("p40", "p40"), ("p4", "p4"), ("t4", "t4"),
    ("k80", "k80"),
    ("rtx 6000 ada", "rtx6000ada"), ("rtx a6000", "a6000"), ("rtx 6000", "rtx6000"),
    ("rtx 2080 ti", "rtx2080ti"), ("rtx 2080ti", "rtx2080ti"), ("rtx 3090", "rtx3090"), ("rtx 4090", "rtx4090"),
)


def normalize(name: str) -> str:
    return " ".join(re.split(r"[^a-z0-9]+", name.lower())).strip()


def product_type(name: str, user: Mapping[str, str] | None = None) -> str | None:
    """The worker type of a product name: the user's patterns first, then PRODUCT_TYPES. None when
    unknown, and for a MIG slice (a fraction of a GPU is not its type) unless the user maps it."""
    words = f" {normalize(name)} "
    for pattern, kind in (user or {}).items():
        if f" {normalize(pattern)} " in words:
            return kind
    if " mig " in words:
        return None
    return next((kind for pattern, kind in PRODUCT_TYPES if f" {pattern} " in words), None)


def load_type_map(path: str | None, env: Mapping[str, str] = os.environ) -> dict[str, str]:
    """The user's {pattern: type} map from --gpu-type-map, else $GAVEL_NG_GPU_TYPE_MAP ({} without)."""
    field = "--gpu-type-map" if path else f"${TYPE_MAP_ENV}"
    path = path or env.get(TYPE_MAP_ENV)
    if not path:
        return {}
    data = read_json(path, field)
    if not isinstance(data, dict) or not data or not all(
            isinstance(k, str) and normalize(k) and isinstance(v, str) and v.strip() for k, v in data.items()):
        raise InputError(field, path, 'must be a JSON object {"product name pattern": "worker type", ...}')
    return {k: v.strip().lower() for k, v in data.items()}


@dataclass(frozen=True)
class Device:
    index: int       # NVML's index
    name: str        # product name, e.g. "NVIDIA A100-SXM4-80GB"
    uuid: str = ""


@dataclass(frozen=True)
class NvmlReport:
    devices: tuple[Device, ...] = ()
    error: str | None = None     # why NVML could not answer (no library, no driver, ...)


def query_nvml() -> NvmlReport:
    """This machine's NVIDIA devices as NVML lists them, or why it cannot."""
    try:
        import pynvml
    except ImportError:
        return NvmlReport(error="nvidia-ml-py not installed")
    try:
        pynvml.nvmlInit()
    except pynvml.NVMLError as exc:
        return NvmlReport(error=str(exc))
    try:
        found = []
        for i in range(pynvml.nvmlDeviceGetCount()):
            handle = pynvml.nvmlDeviceGetHandleByIndex(i)
            found.append(Device(i, _text(pynvml.nvmlDeviceGetName(handle)), _text(pynvml.nvmlDeviceGetUUID(handle))))
        return NvmlReport(tuple(found))
    except pynvml.NVMLError as exc:
        return NvmlReport(error=str(exc))
    finally:
        pynvml.nvmlShutdown()


def _text(value) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


@dataclass(frozen=True)
class GpuGrant:
    """The GPUs this process was granted: `ids` (entries as given), else only a `count`."""

    source: str                       # e.g. "CUDA_VISIBLE_DEVICES='2,3'"
    ids: tuple[str, ...] | None = None
    count: int | None = None


def read_grant(env: Mapping[str, str] = os.environ) -> GpuGrant | None:
    """CUDA_VISIBLE_DEVICES (set, even empty), else SLURM_STEP_GPUS / SLURM_JOB_GPUS, else
    SLURM_GPUS_ON_NODE; None outside any. As CUDA does, a list ends at its first entry that is
    not an index or a GPU UUID ("-1", Slurm's "NoDevFiles": no GPU)."""
    for var in GRANT_ENVS:
        value = env.get(var)
        if value is None or (var != "CUDA_VISIBLE_DEVICES" and not value.strip()):
            continue
        ids = []
        for item in (s.strip() for s in value.split(",")):
            if not (item.isdigit() or item.startswith("GPU-")):
                break
            ids.append(item)
        return GpuGrant(f"{var}={value!r}", ids=tuple(ids))
    value = env.get("SLURM_GPUS_ON_NODE", "").strip()
    if value.isdigit():
        return GpuGrant(f"SLURM_GPUS_ON_NODE={value!r}", count=int(value))
    return None


@dataclass(frozen=True)
class Choice:
    gpu_type: str
    gpu_ids: tuple[int, ...]
    note: str                     # where it came from, for the log


def choose(gpus: str, gpu_type: str, gpu_ids: list[int] | None, type_map: Mapping[str, str],
           env: Mapping[str, str] = os.environ, query: Callable[[], NvmlReport] = query_nvml) -> Choice:
    """The worker's type and GPU ids from its flags ("auto" or explicit; explicit wins) and what
    the machine, the allocation and the environment say. An InputError when they cannot tell."""
    alloc = read_grant(env)
    need_nvml = "auto" in (gpus, gpu_type) or bool(alloc and alloc.ids and any(i.startswith("GPU-")
                                                                                for i in alloc.ids))
    nvml = query() if need_nvml else NvmlReport(error="not asked")
    names = {d.index: d.name for d in nvml.devices}
    found, source = _granted(alloc, nvml)
    if gpu_ids:
        if gpus != "auto" and int(gpus) != len(gpu_ids):
            raise InputError("--gpu-ids", ",".join(map(str, gpu_ids)), f"must list --gpus={gpus} GPUs")
        ids, source = list(gpu_ids), "--gpu-ids"
    elif gpus == "auto":
        if not found:
            why = alloc.source if alloc else f"NVML: {nvml.error or 'no devices'}"
            raise InputError("--gpus", "auto", f"no NVIDIA GPU found ({why}); pass --gpu-type and --gpus")
        ids = found
    else:
        n = int(gpus)
        if alloc is not None and n > len(found):
            raise InputError("--gpus", n, f"the allocation grants only {len(found)} GPUs ({alloc.source})")
        ids, source = (found[:n], source) if alloc is not None else (list(range(n)), "--gpus")
    if gpu_type != "auto":
        return Choice(gpu_type.lower(), tuple(ids), f"{len(ids)} x {gpu_type} (--gpu-type), ids from {source}")
    products = sorted({names[i] for i in ids if i in names})
    if not products and env.get(PRODUCT_ENV, "").strip():
        products, source = [env[PRODUCT_ENV].strip()], f"{source}, product from ${PRODUCT_ENV}"
    if not products:
        raise InputError("--gpu-type", "auto", f"no NVIDIA GPU product found (NVML: {nvml.error or 'no devices'}; "
                                               f"${PRODUCT_ENV} unset); pass --gpu-type and --gpus")
    kinds = {p: product_type(p, type_map) for p in products}
    unknown = [p for p, k in kinds.items() if k is None]
    if unknown:
        raise InputError("GPU product", unknown[0], f"no worker type for it: pass --gpu-type TYPE, or map it in "
                                                    f'--gpu-type-map FILE.json ({{"{unknown[0]}": "TYPE"}})')
    if len(set(kinds.values())) > 1:
        which = ", ".join(f"{p} ({k}) ids {[i for i in ids if names.get(i) == p]}" for p, k in kinds.items())
        raise InputError("--gpu-type", "auto", f"this machine mixes GPU products: {which}; run one worker per "
                                               "type, each with --gpu-ids and --gpu-type")
    kind = next(iter(kinds.values()))
    return Choice(kind, tuple(ids), f"{len(ids)} x {', '.join(products)} -> {kind}, ids from {source}")


def _granted(alloc: GpuGrant | None, nvml: NvmlReport) -> tuple[list[int], str]:
    """The GPU ids this process may use, and where that came from (UUIDs resolved through NVML)."""
    if alloc is None:
        return [d.index for d in nvml.devices], "NVML"
    if alloc.ids is None:
        return list(range(alloc.count or 0)), alloc.source
    ids = []
    for item in alloc.ids:
        if item.isdigit():
            ids.append(int(item))
            continue
        match = [d.index for d in nvml.devices if d.uuid.startswith(item)]
        if len(match) != 1:
            raise InputError(alloc.source.partition("=")[0], item, f"NVML lists no single GPU with this UUID "
                                                                   f"({nvml.error or f'{len(match)} match'})")
        ids.append(match[0])
    return ids, alloc.source
