"""Gradient noise scale ``phi = tr(Sigma) / |G|^2`` estimated during training (Pollux §3.1).

``G`` is the true gradient and ``Sigma`` the covariance of per-example gradients, so a
gradient averaged over ``B`` examples has ``E|g_B|^2 = |G|^2 + tr(Sigma)/B``. Two batch
sizes ``b < B`` seen at the same step give unbiased estimates of both (McCandlish et al.,
"An Empirical Model of Large-Batch Training", App. A.1):

    |G|^2    ~ (B |g_B|^2 - b |g_b|^2) / (B - b)
    tr(Sigma) ~ (|g_b|^2 - |g_B|^2) / (1/b - 1/B)

* several data-parallel replicas: ``g_b`` is each replica's local gradient (``|g_b|^2``
  averaged over the replicas), ``g_B`` their average;
* one replica with gradient accumulation: ``g_b`` is each micro-batch's gradient, ``g_B``
  the accumulated one;
* one replica without accumulation (the *differenced* estimator): two consecutive
  gradients ``g_t, g_{t-1}`` of batch ``B`` have independent noise, so
  ``E|g_t - g_{t-1}|^2 = 2 tr(Sigma)/B`` and ``E[g_t . g_{t-1}] = |G|^2`` (biased only by
  how much the true gradient moved in one step).

Each step's estimates are noisy (and may be negative); as Pollux does, the two are
smoothed separately by bias-corrected exponential moving averages and ``phi`` is their
ratio.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from gavel_ng.errors import InputError

PHI_MAX = 1e12  # phi when the smoothed |G|^2 is not positive: the gradient is all noise


def two_batch_estimate(small_sqr: float, small_batch: float, big_sqr: float,
                       big_batch: float) -> tuple[float, float]:
    """Unbiased (|G|^2, tr(Sigma)) from squared norms at two batch sizes small < big."""
    if not small_batch < big_batch:
        raise InputError("big_batch", big_batch, f"must exceed small_batch ({small_batch})")
    grad_sqr = (big_batch * big_sqr - small_batch * small_sqr) / (big_batch - small_batch)
    trace = (small_sqr - big_sqr) / (1.0 / small_batch - 1.0 / big_batch)
    return grad_sqr, trace


def differenced_estimate(diff_sqr: float, dot: float, batch: float) -> tuple[float, float]:
    """(|G|^2, tr(Sigma)) from consecutive gradients: |g_t - g_{t-1}|^2 and g_t . g_{t-1}."""
    return dot, batch * diff_sqr / 2.0


@dataclass
class NoiseScale:
    """EMA-smoothed |G|^2 and tr(Sigma); ``phi`` is their ratio (None before any update)."""

    decay: float = 0.9
    grad_sqr: float = 0.0      # biased EMAs; `_corrected` removes the bias of starting at 0
    trace: float = 0.0
    weight: float = 0.0        # 1 - decay**updates

    def __post_init__(self) -> None:
        if not (isinstance(self.decay, (int, float)) and 0.0 <= self.decay < 1.0):
            raise InputError("noise_decay", self.decay, "must be a number in [0, 1)")

    def update(self, grad_sqr: float, trace: float) -> None:
        """Fold one step's estimates in; non-finite ones are skipped."""
        if not (math.isfinite(grad_sqr) and math.isfinite(trace)):
            return
        d = self.decay
        self.grad_sqr = d * self.grad_sqr + (1 - d) * grad_sqr
        self.trace = d * self.trace + (1 - d) * trace
        self.weight = d * self.weight + (1 - d)

    @property
    def phi(self) -> float | None:
        """The gradient noise scale, in examples; None before the first update."""
        if self.weight == 0.0:
            return None
        grad_sqr, trace = self.grad_sqr / self.weight, max(self.trace / self.weight, 0.0)
        if grad_sqr <= trace / PHI_MAX:
            return PHI_MAX
        return trace / grad_sqr

    def state_dict(self) -> dict:
        return {"decay": self.decay, "grad_sqr": self.grad_sqr, "trace": self.trace, "weight": self.weight}

    def load_state_dict(self, state: dict) -> None:
        self.decay, self.grad_sqr = float(state["decay"]), float(state["grad_sqr"])
        self.trace, self.weight = float(state["trace"]), float(state["weight"])
