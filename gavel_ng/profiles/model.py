"""Analytical performance model: throughput of each job type on each GPU type.

Per training iteration of one replica (all times in seconds):

* GPU time: matmul-class kernels go through a roofline per arithmetic-intensity bin,
  ``max(flops / (eta_c * peak), bytes / (eta_m * bandwidth))``; all other kernels are
  memory-bound, ``bytes / (eta_m * bandwidth)``; each kernel costs at least
  ``kernel_s`` (launch and tail effects, which dominate small models).
* Host time: a fixed ``step_s`` (Python, data loader) plus the input pipeline,
  ``input_bytes / host_bytes_per_s``, plus simulator steps (A3C's emulator),
  ``env_steps * env_step_s``; divided by the speed of the GPU type's host servers.
* Data-parallel jobs add a ring all-reduce of the parameters, ``2 (n-1)/n * bytes /
  (eta_comm * bw) + 2 (n-1) * latency``, over the intra-server link when consolidated
  and over the network when spread over servers; throughput counts all replicas' steps.
* Space sharing: each job keeps its GPU busy a fraction ``u`` of its iteration. Sharing
  slows job i by ``max(1 + kappa * u_j, u_i + u_j)``: mild interference while the GPU
  has idle time, a fair split of the GPU once it is saturated. Pairs whose estimated
  peak memory does not fit are impossible, ``(0, 0)``.

The constants are fitted to measured throughputs by ``scripts/calibrate_profiles.py``
and stored in ``data/constants.json``; only datasheet figures distinguish GPU types, so
the model extends to types never measured (T4, A100, H100).
"""

from __future__ import annotations

import json
import logging
from dataclasses import asdict, dataclass, field, fields
from functools import cache
from importlib import resources

from gavel_ng.throughputs import UNCONSOLIDATED, JobKey, ThroughputTable

from .gpus import GpuSpec, get_gpu
from .records import WorkloadProfile, load_workload_profiles

log = logging.getLogger(__name__)

CONSTANTS_FILE = "constants.json"
# Families Gavel trains data-parallel (scale factors 1, 2, 4, 8); the rest use one GPU.
DISTRIBUTED_FAMILIES = ("ResNet-18", "ResNet-50", "Transformer", "LM")
SCALE_FACTORS = (1, 2, 4, 8)
GPUS_PER_SERVER = 8


@dataclass(frozen=True)
class ModelConstants:
    """The model's free constants (see the module docstring for where each enters).

    ``gpu_efficiency`` scales a GPU type's attainable FLOP/s and bandwidth relative to
    ``eta_c``/``eta_m`` (older architectures reach less of their peak with the same
    software), ``conv_efficiency`` its convolution rate on top of that (convolution
    algorithms differ most between generations); ``host_speed`` scales the host work of the servers a GPU type sits in.
    Types absent from either mapping get 1.0 (the V100 generation's values).
    """

    eta_c: float = 0.5  # fraction of peak FP32 FLOP/s reached by matmul kernels
    eta_conv: float = 0.5  # same for convolutions (direct-conv FLOPs; can pass 1 with Winograd)
    eta_m: float = 0.6  # fraction of peak DRAM bandwidth reached
    kernel_s: float = 10e-6  # minimum cost of one kernel
    step_s: float = 5e-3  # fixed host cost per iteration
    host_bytes_per_s: float = 3e9  # input pipeline rate
    env_step_s: float = 1e-3  # one simulator step (A3C's emulator)
    eta_comm: float = 0.5  # fraction of link bandwidth reached by the all-reduce
    latency_s: float = 50e-6  # per ring step
    kappa: float = 0.3  # space-sharing interference
    context_bytes: float = 0.5e9  # per-process CUDA context and allocator slack
    memory_scale: float = 1.0  # multiplier on the estimated peak memory
    gpu_efficiency: dict[str, float] = field(default_factory=dict)
    conv_efficiency: dict[str, float] = field(default_factory=dict)
    host_speed: dict[str, float] = field(default_factory=dict)

    def to_json(self) -> dict[str, object]:
        """Plain dict for the data file."""
        return asdict(self)

    @classmethod
    def from_json(cls, d: dict[str, object]) -> ModelConstants:
        """Known keys only, defaults for the rest."""
        out: dict[str, object] = {}
        for f in fields(cls):
            if f.name in d:
                v = d[f.name]
                out[f.name] = ({str(k): float(x) for k, x in v.items()}  # type: ignore[union-attr]
                               if isinstance(v, dict) else float(v))  # type: ignore[arg-type]
        return cls(**out)  # type: ignore[arg-type]


@cache
def load_constants() -> ModelConstants:
    """The fitted constants shipped with the package (defaults if the file is absent)."""
    path = resources.files(__package__).joinpath("data", CONSTANTS_FILE)
    if not path.is_file():
        log.warning("no fitted constants at %s; using defaults", path)
        return ModelConstants()
    return ModelConstants.from_json(json.loads(path.read_text())["constants"])


@dataclass(frozen=True)
class IterationTime:
    """One replica's iteration split into GPU-busy time and host time."""

    gpu_s: float
    host_s: float

    @property
    def total_s(self) -> float:
        """Seconds per iteration on one GPU (the two parts are not overlapped)."""
        return self.gpu_s + self.host_s


def iteration_time(p: WorkloadProfile, gpu: GpuSpec, c: ModelConstants) -> IterationTime:
    """Time of one single-GPU training iteration of profile p on gpu."""
    eff = c.gpu_efficiency.get(gpu.name, 1.0)
    flops_rate = eff * c.eta_c * gpu.fp32_flops
    bytes_rate = eff * c.eta_m * gpu.mem_bytes_per_s
    conv_rate = flops_rate * c.eta_conv / c.eta_c * c.conv_efficiency.get(gpu.name, 1.0)
    mm_bytes = 0
    gpu_s = 0.0
    for bins, rate in ((p.conv_bins, conv_rate), (p.gemm_bins, flops_rate)):
        for flops, nbytes in bins.values():
            gpu_s += max(flops / rate, nbytes / bytes_rate)
            mm_bytes += nbytes
    gpu_s += max(p.traffic_bytes - mm_bytes, 0) / bytes_rate
    gpu_s = max(gpu_s, p.kernels * c.kernel_s)
    host_s = c.step_s + p.input_bytes / c.host_bytes_per_s + p.env_steps * c.env_step_s
    host_s /= c.host_speed.get(gpu.name, 1.0)
    return IterationTime(gpu_s, host_s)


def allreduce_s(param_bytes: float, n: int, link_bytes_per_s: float, c: ModelConstants) -> float:
    """Ring all-reduce of the gradients across n replicas."""
    if n <= 1:
        return 0.0
    volume = 2 * (n - 1) / n * param_bytes
    return volume / (c.eta_comm * link_bytes_per_s) + 2 * (n - 1) * c.latency_s


def throughput(p: WorkloadProfile, gpu: GpuSpec, scale_factor: int, consolidated: bool,
               network_bytes_per_s: float, c: ModelConstants) -> tuple[float, float]:
    """(steps/s summed over replicas, GPU-busy fraction); (0, 0) if it does not fit."""
    if p.peak_bytes * c.memory_scale + c.context_bytes > gpu.mem_bytes:
        return 0.0, 0.0
    it = iteration_time(p, gpu, c)
    inside = consolidated and scale_factor <= GPUS_PER_SERVER
    link = gpu.link_bytes_per_s if inside else min(network_bytes_per_s, gpu.link_bytes_per_s)
    step = it.total_s + allreduce_s(p.param_bytes, scale_factor, link, c)
    return scale_factor / step, it.gpu_s / step


def pair_slowdowns(u_a: float, u_b: float, c: ModelConstants) -> tuple[float, float]:
    """Factors by which two co-located jobs slow down (see module docstring)."""
    saturated = u_a + u_b
    return max(1 + c.kappa * u_b, saturated), max(1 + c.kappa * u_a, saturated)


def pair_fits(a: WorkloadProfile, b: WorkloadProfile, gpu: GpuSpec, c: ModelConstants) -> bool:
    """Whether both jobs' estimated peak memory and contexts fit on one GPU."""
    need = (a.peak_bytes + b.peak_bytes) * c.memory_scale + 2 * c.context_bytes
    return need <= gpu.mem_bytes


def job_keys(profiles: dict[str, WorkloadProfile] | None = None) -> list[JobKey]:
    """(job type, scale factor) rows of the table, in Gavel's convention."""
    profiles = profiles or dict(load_workload_profiles())
    return [(name, sf) for name, p in profiles.items()
            for sf in (SCALE_FACTORS if p.family in DISTRIBUTED_FAMILIES else (1,))]


def build_table(gpus: list[str], network_gbps: float = 10.0, heterogeneity: float = 1.0,
                base: str | None = None, pairs: bool = True,
                constants: ModelConstants | None = None) -> ThroughputTable:
    """Modeled throughput table for the given GPU types.

    ``heterogeneity`` raises each job's speedup over the ``base`` type (default: the
    first of ``gpus``) to that power: 0 makes every type as fast as the base, 1 is the
    model, 2 exaggerates the differences. Worker types get ``_unconsolidated`` twins.
    """
    if not gpus:
        raise ValueError("need at least one GPU type")
    c = constants or load_constants()
    profiles = dict(load_workload_profiles())
    specs = {g: get_gpu(g) for g in gpus}
    base_spec = get_gpu(base or gpus[0])
    net = network_gbps * 1e9 / 8
    keys = job_keys(profiles)
    table = ThroughputTable()
    for name, spec in specs.items():
        for suffix, consolidated in (("", True), (UNCONSOLIDATED, False)):
            worker = name + suffix
            rates: dict[JobKey, tuple[float, float]] = {}
            for key in keys:
                p = profiles[key[0]]
                rate, util = throughput(p, spec, key[1], consolidated, net, c)
                ref, _ = throughput(p, base_spec, key[1], consolidated, net, c)
                if rate > 0 and ref > 0 and heterogeneity != 1.0:
                    rate = ref * (rate / ref) ** heterogeneity
                rates[key] = (rate, util)
            table.isolated[worker] = {k: r for k, (r, _) in rates.items()}
            if pairs:
                table.pairs[worker] = _pairs(keys, profiles, rates, spec, c)
    return table


def _pairs(keys: list[JobKey], profiles: dict[str, WorkloadProfile],
           rates: dict[JobKey, tuple[float, float]], spec: GpuSpec,
           c: ModelConstants) -> dict[JobKey, dict[JobKey, tuple[float, float]]]:
    """Pair entries between keys of equal scale factor, both orders, as Gavel stores them."""
    out: dict[JobKey, dict[JobKey, tuple[float, float]]] = {}
    for a in keys:
        row = out.setdefault(a, {})
        for b in keys:
            if a[1] != b[1]:
                continue
            (ra, ua), (rb, ub) = rates[a], rates[b]
            if ra <= 0 or rb <= 0 or not pair_fits(profiles[a[0]], profiles[b[0]], spec, c):
                row[b] = (0.0, 0.0)
                continue
            sa, sb = pair_slowdowns(ua, ub, c)
            row[b] = (ra / sa, rb / sb)
    return out
