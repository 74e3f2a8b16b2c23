"""Measured gradient statistics by batch size: the noise scale a job trains with at its own total
batch, epoch by epoch, as the Sia artifact's simulator uses its validation runs.

The artifact published one validation run per total batch size B of each task
(``validation-B.csv``: per statistical epoch the gradient's squared norm ``sqr`` and variance
``var``, the variance normalized to the task's M0). Its simulator (facts from its code, see
``../shared/profiles/sia-artifact/README.md``) takes the statistics of a job at total batch M
during epoch e from row e of the two runs whose batch sizes bracket M, interpolating ``sqr``
and ``var`` linearly in the batch size (the run itself at a measured batch), and credits a step
with ``(var + sqr) / (var / scale + sqr)`` M0-steps, ``scale = M / M0``. With ``phi = M0 var /
sqr`` that is ``(M / M0) E(M)``, Pollux's efficiency at noise scale phi, so here a job's noise
scale at batch M and progress p is that phi, constant within an epoch. An epoch ends where the
least of the runs' ``progress`` columns puts it (the artifact's ``get_progress``).

`EpochPhi` is one such curve (one batch size): phi constant on each epoch, the same call and
integral as `efficiency.PhiCurve`, so `seconds_to_progress` and `progress_after` take it, and
its `invert` is exact (t(p) is piecewise linear). `BatchStats` holds every run of a task and
gives the curve at any batch (`curve`) or phi at arrays of (batch, progress) (`phi`).
"""

from __future__ import annotations

import math

import numpy as np

from gavel_ng.errors import InputError

from .efficiency import PiecewiseIntegral

PHI_CAP = 1e12
"""phi where the squared norm is 0 (the artifact's gain is then the full scale: E = 1)."""


class EpochPhi(PiecewiseIntegral):
    """A noise scale constant within epochs: ``phi[e]`` on ``(ends[e-1], ends[e]]`` (from 0 for
    e = 0) and ``phi[-1]`` after the last end. `ends` are progress fractions, increasing in (0, 1]."""

    def __init__(self, ends, phi):
        ends = tuple(float(x) for x in ends)
        phi = tuple(float(x) for x in phi)
        if not (len(ends) == len(phi) >= 1):
            raise InputError("phi.ends", ends, "needs as many epoch ends as phi values, at least one")
        if not all(math.isfinite(x) and 0.0 < x <= 1.0 for x in ends) or any(b <= a for a, b in zip(ends, ends[1:])):
            raise InputError("phi.ends", ends, "must increase strictly within (0, 1]")
        if not all(math.isfinite(x) and 0.0 <= x <= PHI_CAP for x in phi):
            raise InputError("phi.phi", phi, f"must be finite numbers in [0, {PHI_CAP:g}]")
        self.ends, self.phi = ends, phi
        tail = ends[-1] < 1.0
        self._x = np.array([0.0, *ends] + ([1.0] if tail else []))      # piece i is [x[i], x[i+1]]
        self._v = np.array(list(phi) + ([phi[-1]] if tail else []))     # phi on piece i
        self._cum: dict[float, np.ndarray] = {}

    def __eq__(self, other: object) -> bool:
        return isinstance(other, EpochPhi) and (self.ends, self.phi) == (other.ends, other.phi)

    def __hash__(self) -> int:
        return hash((self.ends, self.phi))

    def __repr__(self) -> str:
        return f"EpochPhi({len(self.ends)} epochs, phi {min(self.phi):.4g}..{max(self.phi):.4g})"

    def _pieces(self, p: np.ndarray) -> np.ndarray:
        return np.minimum(np.maximum(np.searchsorted(self._x, p, side="left") - 1, 0), len(self._v) - 1)

    def __call__(self, progress: float | np.ndarray) -> float | np.ndarray:
        """phi at progress fraction(s); progress is clipped to [0, 1]."""
        out = self._v[self._pieces(np.minimum(np.maximum(progress, 0.0), 1.0))]
        return float(out) if np.ndim(out) == 0 else out

    def _from_zero(self, p: np.ndarray, m0: float) -> np.ndarray:
        cum = self._cum.get(m0)
        if cum is None:
            cum = self._cum[m0] = np.concatenate([[0.0], np.cumsum(np.diff(self._x) / (self._v + m0))])
        i = self._pieces(p)
        return cum[i] + (p - self._x[i]) / (self._v[i] + m0)

    def invert(self, init_batch: float, batch: np.ndarray, scale: np.ndarray, p_from: np.ndarray,
               target: np.ndarray) -> np.ndarray:
        """The progress p at which ``scale [(p - p_from) + (M - M0) integral(p_from, p)]`` reaches
        ``target`` (1-D arrays; the caller keeps target below its value at p = 1). The time is linear
        within a piece, so the piece the knots name holds the answer in closed form."""
        m0 = float(init_batch)
        x, v = self._x, self._v
        f0 = self._from_zero(p_from, m0)
        gain = (batch - m0)[:, None]
        cum = self._cum[m0]
        at_knots = scale[:, None] * ((x[None, :] - p_from[:, None]) + gain * (cum[None, :] - f0[:, None]))
        i = np.clip(np.sum(at_knots <= target[:, None], axis=1) - 1, 0, len(v) - 1)
        i = np.maximum(i, self._pieces(p_from))
        start = np.maximum(x[i], p_from)
        t0 = scale * ((start - p_from) + (batch - m0) * (self._from_zero(start, m0) - f0))
        slope = scale * (v[i] + batch) / (v[i] + m0)
        return np.clip(start + (target - t0) / slope, start, x[i + 1])


class BatchStats:
    """A task's gradient statistics at each measured total batch size (module docstring): `sqr` and
    `var` are (batch sizes, epochs) arrays, `ends` the epochs' ends as progress fractions."""

    def __init__(self, init_batch: int, batches, ends, sqr, var):
        self.init_batch = int(init_batch)
        self.batches = np.asarray(batches, float)
        self.ends = tuple(float(x) for x in ends)
        self.sqr = np.asarray(sqr, float)
        self.var = np.asarray(var, float)
        b, e = len(self.batches), len(self.ends)
        if b < 1 or np.any(np.diff(self.batches) <= 0) or self.batches[0] < 1:
            raise InputError("stats.batches", list(batches), "must be increasing batch sizes >= 1")
        if self.sqr.shape != (b, e) or self.var.shape != (b, e):
            raise InputError("stats.grad_sqr", list(self.sqr.shape), f"expected {b} batch sizes x {e} epochs")
        if not (np.isfinite(self.sqr).all() and np.isfinite(self.var).all() and (self.sqr >= 0).all()
                and (self.var >= 0).all() and ((self.sqr + self.var) > 0).all()):
            raise InputError("stats.grad_sqr", "...", "must be finite numbers >= 0, not both 0")
        EpochPhi(self.ends, np.zeros(e))   # checks the ends
        self._ends = np.asarray(self.ends)
        self._curves: dict[int, EpochPhi] = {}

    def _interpolated(self, batch: np.ndarray, epoch: np.ndarray) -> np.ndarray:
        """phi at total batches and epoch indexes (arrays of one shape)."""
        bs = self.batches
        b = np.minimum(np.maximum(np.asarray(batch, float), bs[0]), bs[-1])
        j = np.minimum(np.maximum(np.searchsorted(bs, b, side="right") - 1, 0), max(len(bs) - 2, 0))
        k = np.minimum(j + 1, len(bs) - 1)
        span = bs[k] - bs[j]
        w = (b - bs[j]) / np.where(span > 0, span, 1.0)
        sqr = (1 - w) * self.sqr[j, epoch] + w * self.sqr[k, epoch]
        var = (1 - w) * self.var[j, epoch] + w * self.var[k, epoch]
        return np.where(sqr * PHI_CAP > self.init_batch * var,
                        self.init_batch * var / np.where(sqr > 0, sqr, 1.0), PHI_CAP)

    def phi(self, batch: np.ndarray | float, progress: np.ndarray | float) -> np.ndarray:
        """phi of a job at total batch `batch` and progress fraction `progress` (broadcast)."""
        p = np.minimum(np.maximum(np.asarray(progress, float), 0.0), 1.0)
        epoch = np.minimum(np.searchsorted(self._ends, p, side="left"), len(self.ends) - 1)
        b, epoch = np.broadcast_arrays(np.asarray(batch, float), epoch)
        return self._interpolated(b, epoch)

    def curve(self, batch: float) -> EpochPhi:
        """The noise scale over training of a job that runs at this total batch (cached per batch)."""
        key = int(round(float(batch)))
        got = self._curves.get(key)
        if got is None:
            if len(self._curves) > 4096:
                self._curves.clear()
            epochs = np.arange(len(self.ends))
            got = self._curves[key] = EpochPhi(self.ends, self._interpolated(np.full(len(epochs), key), epochs))
        return got
