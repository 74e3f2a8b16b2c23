"""Fit the performance model's constants to a measured throughput table and score the fit.

Stages, each a small least-squares problem in log space (errors are relative):
1. compute/host constants on single-GPU throughputs;
2. all-reduce constants on multi-GPU throughputs (consolidated and not);
3. interference ``kappa`` on the space-sharing pairs;
4. ``memory_scale`` by how well 'does not fit' reproduces the impossible pairs.
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass, replace

import numpy as np
from scipy.optimize import least_squares, minimize_scalar
from scipy.stats import spearmanr

from gavel_ng.throughputs import UNCONSOLIDATED, ThroughputTable

from .gpus import get_gpu
from .model import ModelConstants, iteration_time, pair_fits, pair_slowdowns, throughput
from .records import WorkloadProfile, load_workload_profiles

log = logging.getLogger(__name__)

MEASURED_TYPES = ("k80", "p100", "v100")
STAGE1 = ("eta_c", "eta_conv", "eta_m", "kernel_s", "step_s", "host_bytes_per_s",
          "env_step_s", "eff:k80", "eff:p100", "conv:k80", "conv:p100", "host:k80", "host:p100")
STAGE2 = ("eta_comm", "latency_s")
BOUNDS = {"eta_c": (0.02, 1.0), "eta_m": (0.02, 1.0), "kernel_s": (1e-7, 1e-3),
          "step_s": (1e-5, 0.5), "host_bytes_per_s": (1e7, 1e11), "eta_comm": (1e-3, 1.0),
          "latency_s": (1e-7, 1e-2), "env_step_s": (1e-5, 0.1), "eff:k80": (0.05, 2.0), "eta_conv": (0.02, 3.0),
          "conv:k80": (0.05, 2.0), "conv:p100": (0.05, 2.0),
          "eff:p100": (0.05, 2.0), "host:k80": (0.1, 10.0), "host:p100": (0.1, 10.0)}
_MAPS = {"eff": "gpu_efficiency", "conv": "conv_efficiency", "host": "host_speed"}


def _get(c: ModelConstants, name: str) -> float:
    if ":" in name:
        kind, gpu = name.split(":")
        return getattr(c, _MAPS[kind]).get(gpu, 1.0)
    return float(getattr(c, name))


@dataclass(frozen=True)
class TypeScore:
    """Agreement of modeled and measured single-GPU throughputs on one GPU type."""

    gpu: str
    spearman: float
    median_abs_log_error: float


@dataclass(frozen=True)
class CalibrationReport:
    """Per-type scores, speedup ordering, and the multi-GPU / pair fits."""

    types: tuple[TypeScore, ...]
    speedup_spearman: float  # of V100-over-K80 speedups across the job types
    multi_gpu_median_abs_log_error: float
    pair_median_abs_log_error: float
    impossible_pair_accuracy: float  # single-GPU pairs: predicted (0, 0) iff measured (0, 0)


def _fitted(c: ModelConstants, names: tuple[str, ...], x: np.ndarray) -> ModelConstants:
    flat: dict[str, object] = {}
    maps = {m: dict(getattr(c, m)) for m in _MAPS.values()}
    for n, v in zip(names, x, strict=True):
        if ":" in n:
            kind, gpu = n.split(":")
            maps[_MAPS[kind]][gpu] = float(math.exp(v))
        else:
            flat[n] = float(math.exp(v))
    return replace(c, **flat, **maps)  # type: ignore[arg-type]


def _single(p: WorkloadProfile, gpu: str, c: ModelConstants) -> float:
    return 1.0 / iteration_time(p, get_gpu(gpu), c).total_s


def _fit(c: ModelConstants, names: tuple[str, ...], residuals: object) -> ModelConstants:
    x0 = np.log([_get(c, n) for n in names])
    lo = np.log([BOUNDS[n][0] for n in names])
    hi = np.log([BOUNDS[n][1] for n in names])
    res = least_squares(lambda x: residuals(_fitted(c, names, x)),  # type: ignore[operator]
                        np.clip(x0, lo + 1e-9, hi - 1e-9), bounds=(lo, hi), loss="soft_l1",
                        f_scale=0.3)
    return _fitted(c, names, res.x)


def fit_constants(measured: ThroughputTable, network_gbps: float = 10.0,
                  start: ModelConstants | None = None) -> ModelConstants:
    """Fit all constants to ``measured`` (a Gavel-format table with k80/p100/v100)."""
    profiles = load_workload_profiles()
    c = start or ModelConstants()
    single = [(profiles[k[0]], w, v) for w in MEASURED_TYPES
              for k, v in measured.isolated[w].items() if k[1] == 1 and v > 0]

    def r1(cc: ModelConstants) -> np.ndarray:
        return np.array([math.log(_single(p, w, cc) / v) for p, w, v in single])

    c = _fit(c, STAGE1, r1)
    net = network_gbps * 1e9 / 8
    multi = [(profiles[k[0]], w, k[1], not w.endswith(UNCONSOLIDATED), v)
             for w, per in measured.isolated.items() for k, v in per.items()
             if k[1] > 1 and v > 0 and w.removesuffix(UNCONSOLIDATED) in MEASURED_TYPES]

    def r2(cc: ModelConstants) -> np.ndarray:
        big = replace(cc, memory_scale=0.0)
        return np.array([math.log(max(throughput(p, get_gpu(w), sf, cons, net, big)[0], 1e-9) / v)
                         for p, w, sf, cons, v in multi])

    c = _fit(c, STAGE2, r2)
    c = replace(c, kappa=_fit_kappa(measured, c))
    c = replace(c, memory_scale=_fit_memory(measured, c))
    log.info("fitted constants: %s", c)
    return c


def _pair_samples(measured: ThroughputTable, c: ModelConstants
                  ) -> list[tuple[float, float, float]]:
    """(modeled GPU-busy fraction of self, of partner, measured slowdown of self) per pair."""
    profiles = load_workload_profiles()
    free = replace(c, memory_scale=0.0)
    out = []
    for w in MEASURED_TYPES:
        gpu = get_gpu(w)
        for a, row in measured.pairs.get(w, {}).items():
            iso = measured.get(a, w)
            if a[1] != 1 or iso <= 0:
                continue
            ua = throughput(profiles[a[0]], gpu, 1, True, 1e9, free)[1]
            for b, (va, _) in row.items():
                if b[1] == 1 and va > 0:
                    ub = throughput(profiles[b[0]], gpu, 1, True, 1e9, free)[1]
                    out.append((ua, ub, iso / va))
    return out


def _fit_kappa(measured: ThroughputTable, c: ModelConstants) -> float:
    samples = _pair_samples(measured, c)

    def loss(kappa: float) -> float:
        cc = replace(c, kappa=kappa)
        errs = [math.log(pair_slowdowns(ua, ub, cc)[0] / s) for ua, ub, s in samples]
        return float(np.sum(np.abs(errs)))

    return float(minimize_scalar(loss, bounds=(0.0, 3.0), method="bounded").x)


def _impossible_accuracy(measured: ThroughputTable, c: ModelConstants) -> float:
    profiles = load_workload_profiles()
    hits = total = 0
    for w in MEASURED_TYPES:
        for a, row in measured.pairs.get(w, {}).items():
            for b, (va, vb) in row.items():
                if a[1] != 1:  # multi-GPU pairs were mostly left unmeasured, not impossible
                    continue
                impossible = va == 0 and vb == 0
                predicted = not pair_fits(profiles[a[0]], profiles[b[0]], get_gpu(w), c)
                hits += impossible == predicted
                total += 1
    return hits / max(total, 1)


def _fit_memory(measured: ThroughputTable, c: ModelConstants) -> float:
    """Best pair accuracy among scales at which every measured single job fits."""
    profiles = load_workload_profiles()
    need = max(profiles[k[0]].peak_bytes / (get_gpu(w).mem_bytes - c.context_bytes)
               for w in MEASURED_TYPES for k, v in measured.isolated[w].items() if v > 0)
    grid = [float(m) for m in np.round(np.arange(0.3, 2.01, 0.02), 2) if m * need <= 1.0]
    scores = [_impossible_accuracy(measured, replace(c, memory_scale=m)) for m in grid]
    return grid[int(np.argmax(scores))]


def score(measured: ThroughputTable, c: ModelConstants, network_gbps: float = 10.0
          ) -> CalibrationReport:
    """How well constants ``c`` reproduce ``measured`` (see CalibrationReport)."""
    profiles = load_workload_profiles()
    types = []
    speedups: dict[str, list[float]] = {"model": [], "measured": []}
    for w in MEASURED_TYPES:
        keys = [k for k, v in measured.isolated[w].items() if k[1] == 1 and v > 0]
        model = np.array([_single(profiles[k[0]], w, c) for k in keys])
        real = np.array([measured.get(k, w) for k in keys])
        rho = float(spearmanr(model, real).statistic)
        types.append(TypeScore(w, rho, float(np.median(np.abs(np.log(model / real))))))
    for k, v in measured.isolated["v100"].items():
        k80 = measured.get(k, "k80")
        if k[1] == 1 and v > 0 and k80 > 0:
            p = profiles[k[0]]
            speedups["model"].append(_single(p, "v100", c) / _single(p, "k80", c))
            speedups["measured"].append(v / k80)
    net = network_gbps * 1e9 / 8
    multi = [math.log(throughput(profiles[k[0]], get_gpu(w), k[1],
                                 not w.endswith(UNCONSOLIDATED), net, replace(c, memory_scale=0))[0] / v)
             for w, per in measured.isolated.items() for k, v in per.items()
             if k[1] > 1 and v > 0 and w.removesuffix(UNCONSOLIDATED) in MEASURED_TYPES]
    pairs = [math.log(pair_slowdowns(ua, ub, c)[0] / s) for ua, ub, s in _pair_samples(measured, c)]
    return CalibrationReport(
        types=tuple(types),
        speedup_spearman=float(spearmanr(speedups["model"], speedups["measured"]).statistic),
        multi_gpu_median_abs_log_error=float(np.median(np.abs(multi))),
        pair_median_abs_log_error=float(np.median(np.abs(pairs))),
        impossible_pair_accuracy=_impossible_accuracy(measured, c))
