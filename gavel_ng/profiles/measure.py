"""Count the work of one training iteration of each Gavel job type, without a GPU.

Everything runs on PyTorch's meta device: tensors carry shapes but no data, so a full
ResNet-50 step at batch 128 is counted in about a second. Per iteration (forward,
backward and optimizer update, measured on the second step so optimizer state exists):

* ``matmul_flops``: FLOPs of matmuls/convolutions/attention, from ``FlopCounterMode``;
* ``other_flops``: one FLOP per output element of every other kernel (activations,
  norms, losses, the optimizer's element-wise update);
* ``traffic_bytes``: bytes read plus written by every kernel (inputs + outputs), an
  upper bound on DRAM traffic that ignores cache reuse;
* ``kernels``: number of device kernels launched (non-view ops touching device tensors;
  optimizers use their multi-tensor ``foreach`` path, as on a GPU);
* ``conv_bins`` / ``gemm_bins``: convolution and other matmul-class kernels (mm, bmm,
  attention), grouped by arithmetic intensity (floor(log2(flops/byte))) as
  ``{bin: [flops, bytes]}``, so a roofline can be applied per GPU without storing every
  kernel; the two are kept apart because GPU generations differ most in convolution
  algorithms (e.g. Winograd);
* ``param_bytes``, ``input_bytes``, ``optimizer_bytes``;
* ``env_steps``: simulator steps the real job takes per iteration (A3C's rollouts);
* ``activation_bytes``: tensors saved for backward (via ``saved_tensors_hooks``),
  deduplicated by storage, parameters excluded;
* ``peak_bytes``: an estimate, since the meta device allocates nothing: weights +
  gradients + optimizer state + input batch + saved activations + twice the largest
  single kernel output (the transient working set of the biggest layer and its
  gradient). The CUDA context and allocator fragmentation are not included.
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass, field
from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten
from torch.utils.flop_counter import FlopCounterMode

from gavel_ng.workloads import JOB_TYPES, get_workload, parse_job_type

from .records import WorkloadProfile

log = logging.getLogger(__name__)

_aten = torch.ops.aten
# Ops that allocate or relabel memory but launch no kernel.
_NO_KERNEL = {
    _aten.empty.memory_format, _aten.empty_strided.default, _aten.empty_like.default,
    _aten.detach.default, _aten.alias.default, _aten.lift_fresh.default,
    _aten._local_scalar_dense.default, _aten.new_empty.default,
    _aten.new_empty_strided.default, _aten.set_.source_Storage_storage_offset,
}


def _nbytes(t: torch.Tensor) -> int:
    """Bytes a kernel touches for t: its elements, but no more than its storage (broadcasts)."""
    dense = t.numel() * t.element_size()
    try:
        return min(dense, t.untyped_storage().nbytes())
    except (RuntimeError, NotImplementedError):
        return dense


@dataclass
class _Counter:
    other_flops: int = 0
    traffic_bytes: int = 0
    kernels: int = 0
    largest_output: int = 0
    bins: dict[str, dict[int, list[int]]] = field(
        default_factory=lambda: {"conv": {}, "gemm": {}})


class _KernelMode(TorchDispatchMode):
    """Sees each op before FlopCounterMode does; attributes FLOPs and bytes per kernel."""

    def __init__(self, flops: FlopCounterMode, counter: _Counter) -> None:
        super().__init__()
        self.flops = flops
        self.c = counter

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        kwargs = kwargs or {}
        before = self.flops.get_total_flops()
        out = func(*args, **kwargs)
        if func.is_view or func in _NO_KERNEL:
            return out
        ins = [t for t in tree_flatten((args, kwargs))[0] if isinstance(t, torch.Tensor)]
        outs = [t for t in tree_flatten(out)[0] if isinstance(t, torch.Tensor)]
        if not any(t.device.type == "meta" for t in ins + outs):
            return out  # host-side bookkeeping such as Adam's step counter
        mm_flops = self.flops.get_total_flops() - before
        moved = sum(_nbytes(t) for t in ins) + sum(_nbytes(t) for t in outs)
        self.c.kernels += 1
        self.c.traffic_bytes += moved
        self.c.largest_output = max([self.c.largest_output] + [_nbytes(t) for t in outs])
        if mm_flops > 0:
            key = math.floor(math.log2(max(mm_flops / max(moved, 1), 2.0 ** -8)))
            kind = "conv" if "conv" in func.__name__ else "gemm"
            acc = self.c.bins[kind].setdefault(key, [0, 0])
            acc[0] += mm_flops
            acc[1] += moved
        else:
            self.c.other_flops += max([t.numel() for t in ins + outs] + [0])
        return out


def _use_foreach(optimizer: torch.optim.Optimizer) -> None:
    for group in optimizer.param_groups:
        if "foreach" in group:
            group["foreach"] = True


def measure_job_type(job_type: str, size: str = "full") -> WorkloadProfile:
    """Count one training iteration of ``job_type`` on the meta device."""
    family, batch_size = parse_job_type(job_type)
    w = get_workload(family)
    with torch.device("meta"):
        model = w.build_model(size)
    optimizer = w.make_optimizer(model)
    _use_foreach(optimizer)
    batch = w.make_batch(batch_size, size, seed=None, device="meta")
    w.loss_step(model, optimizer, batch)  # warm-up: creates optimizer state

    params = {p.untyped_storage()._cdata for p in model.parameters()}
    saved: dict[int, torch.Tensor] = {}

    def pack(t: torch.Tensor) -> torch.Tensor:
        key = t.untyped_storage()._cdata
        if key not in params:
            saved.setdefault(key, t)
        return t

    counter = _Counter()
    flop_mode = FlopCounterMode(display=False)
    with flop_mode, _KernelMode(flop_mode, counter), \
            torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        w.loss_step(model, optimizer, batch)

    param_bytes = sum(p.numel() * p.element_size() for p in model.parameters())
    input_bytes = sum(t.numel() * t.element_size() for t in batch.values())
    opt_bytes = sum(_nbytes(v) for state in optimizer.state.values() for v in state.values()
                    if isinstance(v, torch.Tensor) and v.device.type == "meta")
    act_bytes = sum(t.untyped_storage().nbytes() for t in saved.values())
    peak = 2 * param_bytes + opt_bytes + input_bytes + act_bytes + 2 * counter.largest_output
    profile = WorkloadProfile(
        job_type=job_type, family=family, batch_size=batch_size,
        matmul_flops=int(flop_mode.get_total_flops()), other_flops=counter.other_flops,
        traffic_bytes=counter.traffic_bytes, kernels=counter.kernels, param_bytes=param_bytes,
        input_bytes=input_bytes, optimizer_bytes=opt_bytes, activation_bytes=act_bytes,
        peak_bytes=peak,
        conv_bins={k: (v[0], v[1]) for k, v in sorted(counter.bins["conv"].items())},
        gemm_bins={k: (v[0], v[1]) for k, v in sorted(counter.bins["gemm"].items())},
        env_steps=w.env_steps_per_sample * batch_size)
    log.info("%s: %.3g GFLOP, %d kernels, peak %.2f GB", job_type, profile.flops / 1e9,
             profile.kernels, peak / 1e9)
    return profile


def measure_all(size: str = "full") -> list[WorkloadProfile]:
    """Profiles of all 26 job types, in registry order."""
    return [measure_job_type(j, size) for j in JOB_TYPES]
