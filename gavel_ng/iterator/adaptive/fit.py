"""Iteration times per configuration, and Pollux's online fit of the throughput model.

A job records the time of every optimizer step under its configuration (GPU count K,
servers N, per-GPU batch m, accumulation steps s); `fit_throughput` fits the 7-tuple
``(alpha_grad, beta_grad, alpha_local, beta_local, alpha_node, beta_node, gamma)`` to the
per-configuration mean times by minimizing the root mean squared logarithmic error with
L-BFGS-B under the paper's bounds (alphas and betas >= 0, gamma in [1, 10]). The model
itself is `gavel_ng.elastic.goodput.ThroughputParams` (Pollux's Eq. 9 is its kappa = 0).

Priors for what the job has not seen (Pollux's prior-driven exploration): it is assumed
to scale perfectly until it ran on more than one GPU (all sync terms 0), not to slow
down with more GPUs until it ran on more than two (betas 0), and to sync across servers
as fast as within one until it spanned servers (node terms = local terms); gamma is 1
until there is sync time to overlap.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy.optimize import minimize

from gavel_ng.elastic.goodput import ThroughputParams, make_params
from gavel_ng.errors import InputError

GAMMA_BOUNDS = (1.0, 10.0)


@dataclass(frozen=True, order=True)
class Config:
    """Where and how one optimizer step ran."""

    gpus: int
    servers: int
    local_batch: int
    accumulation: int


class IterationTimes:
    """Mean optimizer-step seconds per configuration; the first ``warmup`` steps of each are dropped."""

    def __init__(self, warmup: int = 1):
        self.warmup = warmup
        self.stats: dict[Config, list[float]] = {}   # config -> [steps seen, timed count, sum of seconds]

    def add(self, config: Config, seconds: float) -> None:
        st = self.stats.setdefault(config, [0, 0, 0.0])
        st[0] += 1
        if st[0] > self.warmup and math.isfinite(seconds) and seconds > 0:
            st[1] += 1
            st[2] += seconds

    def table(self) -> tuple[np.ndarray, ...]:
        """(gpus, servers, m, s, mean seconds) of the configurations with at least one timed step."""
        rows = [(c.gpus, c.servers, c.local_batch, c.accumulation, st[2] / st[1])
                for c, st in sorted(self.stats.items()) if st[1] > 0]
        if not rows:
            return tuple(np.zeros(0) for _ in range(5))
        return tuple(np.array(col, float) for col in zip(*rows))

    def state_dict(self) -> dict:
        return {"warmup": self.warmup,
                "stats": [[c.gpus, c.servers, c.local_batch, c.accumulation, *st] for c, st in self.stats.items()]}

    def load_state_dict(self, state: dict) -> None:
        self.warmup = int(state["warmup"])
        self.stats = {Config(*map(int, row[:4])): [int(row[4]), int(row[5]), float(row[6])]
                      for row in state["stats"]}


def fit_throughput(gpus, servers, m, s, seconds, max_local_batch: int, name: str = "job",
                   worker_type: str = "") -> ThroughputParams:
    """Fit Pollux's throughput parameters to measured step times (arrays, one entry per configuration).

    ``fit_error`` of the result is the RMSLE of the fit. Raises InputError without data.
    """
    k, n, mm, ss, t = (np.asarray(v, float).ravel() for v in (gpus, servers, m, s, seconds))
    if t.size == 0:
        raise InputError("seconds", [], "no iteration times to fit")
    if not (np.all(t > 0) and np.all(np.isfinite(t))):
        raise InputError("seconds", t.tolist(), "must be finite and > 0")
    t_scale = float(np.median(t))
    m_scale = float(np.median(mm))
    scale = np.array([t_scale, t_scale / m_scale, t_scale, t_scale, t_scale, t_scale, 1.0])
    multi, wide, spread = bool((k > 1).any()), bool((k > 2).any()), bool((n > 1).any())
    free = [True, True, multi, multi and wide, multi and spread, multi and wide and spread, multi]
    z_fixed = np.array([0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 1.0])
    log_t = np.log(t)

    def theta_of(z: np.ndarray) -> np.ndarray:
        full = np.where(free, 0.0, z_fixed)
        full[np.flatnonzero(free)] = z
        theta = full * scale
        if not spread:                         # node terms = local terms until it spanned servers
            theta[4], theta[5] = theta[2], theta[3]
        return theta

    def loss(z: np.ndarray) -> float:
        p = make_params(theta_of(z), max_local_batch)
        pred = p.t_iter(mm, ss, k, n)
        return float(np.mean((np.log(np.maximum(pred, 1e-300)) - log_t) ** 2))

    bounds = [b for b, f in zip([(0, None)] * 6 + [GAMMA_BOUNDS], free) if f]
    best = None
    for gamma0 in (1.0, 3.0) if multi else (1.0,):
        z0 = np.array([0.3, 0.5, 0.2, 0.02, 0.2, 0.02, gamma0])[free]
        res = minimize(loss, z0, method="L-BFGS-B", bounds=bounds)
        if best is None or res.fun < best.fun:
            best = res
    return make_params(theta_of(best.x), max_local_batch, name, worker_type, math.sqrt(best.fun))
