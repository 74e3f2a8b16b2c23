"""Datasheet figures and list prices of the accelerator types gavel_ng models.

Peak numbers are the vendor's (boost clocks, dense math: no 2:4 sparsity); efficiency
below peak is the performance model's business, not this table's. Multi-chip boards are
described per schedulable GPU (a K80 board holds two GK210 GPUs that appear as two
devices, each with half the board's memory and bandwidth). ``link_bytes_per_s`` is one
GPU's per-direction bandwidth to its peers inside a server (NVLink where the usual
server has it, else PCIe 3.0 x16 at 15.75 GB/s).
"""

from __future__ import annotations

from dataclasses import dataclass
from types import MappingProxyType

_PCIE3_X16 = 15.75e9


@dataclass(frozen=True)
class GpuSpec:
    """Peak capabilities and price of one GPU type, with the source of each figure."""

    name: str
    fp32_flops: float  # FLOP/s, FP32 on CUDA cores
    tensor_flops: float  # FLOP/s, FP16 on tensor cores (FP16 rate where there are none)
    mem_bytes_per_s: float  # DRAM bandwidth, bytes/s
    mem_bytes: float  # DRAM capacity, bytes
    link_bytes_per_s: float  # intra-server GPU-GPU bandwidth per direction, bytes/s
    dollars_per_hour: float  # on-demand price of one GPU, USD
    source: str

    def __post_init__(self) -> None:
        for field in ("fp32_flops", "tensor_flops", "mem_bytes_per_s", "mem_bytes",
                      "link_bytes_per_s", "dollars_per_hour"):
            if not getattr(self, field) > 0:
                raise ValueError(f"{self.name}: {field} must be positive")


GPUS: MappingProxyType[str, GpuSpec] = MappingProxyType({g.name: g for g in (
    GpuSpec(
        "k80", 4.37e12, 4.37e12, 240.5e9, 12e9, _PCIE3_X16, 0.90,
        "NVIDIA Tesla K80 datasheet (board: 8.73 TFLOPS FP32 with boost, 480 GB/s, 24 GB "
        "GDDR5, two GK210 GPUs; halved per GPU, no FP16 speed-up); PCIe 3.0 x16; AWS EC2 "
        "p2.xlarge on-demand (one K80 GPU), us-east-1, $0.90/h"),
    GpuSpec(
        "p100", 9.3e12, 18.7e12, 732e9, 16e9, _PCIE3_X16, 1.46,
        "NVIDIA Tesla P100 PCIe 16 GB datasheet (9.3 TFLOPS FP32, 18.7 TFLOPS FP16, "
        "732 GB/s HBM2); PCIe 3.0 x16; Google Cloud GPU pricing, P100 $1.46 per GPU-hour "
        "(us-central1 on-demand)"),
    GpuSpec(
        "v100", 15.7e12, 125e12, 900e9, 16e9, 150e9, 3.06,
        "NVIDIA Tesla V100 SXM2 16 GB datasheet (15.7 TFLOPS FP32, 125 TFLOPS tensor, "
        "900 GB/s HBM2, NVLink 2.0 300 GB/s total = 150 GB/s per direction); AWS EC2 "
        "p3.2xlarge on-demand (one V100), us-east-1, $3.06/h"),
    GpuSpec(
        "t4", 8.1e12, 65e12, 320e9, 16e9, _PCIE3_X16, 0.35,
        "NVIDIA T4 datasheet (8.1 TFLOPS FP32, 65 TFLOPS FP16 tensor, 320 GB/s GDDR6, "
        "16 GB); PCIe 3.0 x16; Google Cloud GPU pricing, T4 $0.35 per GPU-hour "
        "(us-central1 on-demand)"),
    GpuSpec(
        "a100", 19.5e12, 312e12, 1555e9, 40e9, 300e9, 4.10,
        "NVIDIA A100 SXM4 40 GB datasheet (19.5 TFLOPS FP32, 312 TFLOPS FP16 tensor "
        "dense, 1,555 GB/s HBM2, NVLink 3 600 GB/s total = 300 GB/s per direction); AWS "
        "EC2 p4d.24xlarge on-demand $32.77/h for 8 GPUs, us-east-1"),
    GpuSpec(
        "h100", 67e12, 989e12, 3350e9, 80e9, 450e9, 12.29,
        "NVIDIA H100 SXM5 80 GB datasheet (67 TFLOPS FP32, 989 TFLOPS FP16 tensor dense, "
        "3.35 TB/s HBM3, NVLink 4 900 GB/s total = 450 GB/s per direction); AWS EC2 "
        "p5.48xlarge on-demand $98.32/h for 8 GPUs, us-east-1 (2024 list price)"),
    GpuSpec(
        "rtx2080ti", 13.4e12, 53.8e12, 616e9, 11e9, _PCIE3_X16, 0.046,
        "NVIDIA Turing architecture whitepaper, GeForce RTX 2080 Ti at the reference 1,545 MHz "
        "boost (13.4 TFLOPS FP32; FP16 tensor with FP32 accumulate 53.8 TFLOPS, half the "
        "107.6 TFLOPS of FP16 accumulate on GeForce boards; 616 GB/s GDDR6, 11 GB); PCIe 3.0 "
        "x16 (no NVLink bridge in Sia's 8-GPU nodes); not sold by the big clouds: amortized "
        "purchase price, the Founders Edition launch list price $1,199 (Sept 2018) over three "
        "years of continuous use = $0.046/h (GPU only: no host, power or margin)"),
    GpuSpec(
        "rtx6000", 16.3e12, 130.5e12, 672e9, 24e9, _PCIE3_X16, 0.50,
        "NVIDIA Quadro RTX 6000 datasheet (16.3 TFLOPS FP32, 130.5 TFLOPS FP16 tensor, "
        "672 GB/s GDDR6, 24 GB); PCIe 3.0 x16; Lambda GPU Cloud on-demand, 1x Quadro RTX "
        "6000 instance, $0.50/h"),
)})


def get_gpu(name: str) -> GpuSpec:
    """Look a GPU type up by its lower-case name; '_unconsolidated' suffixes are ignored."""
    gpu = name.lower().removesuffix("_unconsolidated")
    if gpu not in GPUS:
        raise KeyError(f"unknown GPU type {name!r}; known: {sorted(GPUS)}")
    return GPUS[gpu]
