"""Adaptive jobs: what a job declares, its statistical efficiency, and how it progresses.

Statistical efficiency (Pollux, OSDI'21, Eq. 6). Training at total batch size ``M``
instead of the job's initial batch size ``M0`` needs ``1/E`` times as many examples for
the same progress, with

    E(M) = (phi + M0) / (phi + M),

where ``phi`` is the (pre-conditioned) gradient noise scale. ``E(M0) = 1``; ``E``
decreases in ``M`` and tends to ``(phi + M0)/M``; a larger ``phi`` makes large batches
more efficient. ``phi`` grows as training proceeds; here it follows a geometric curve of
the training progress ``p`` in [0, 1]:

    phi(p) = phi0 * growth ** p,

so ``phi(0) = phi0`` and ``phi(1) = phi0 * growth``. The per-family values of ``phi0``
and ``growth`` and where they come from are in :mod:`gavel_ng.elastic.families`.

Progress is counted in *M0-equivalent examples*. One optimizer step at total batch ``M``
with efficiency ``E`` advances the job by ``M * E`` M0-equivalent examples, i.e. by
``M * E / M0`` steps at ``M0``. A job declares the total it needs (``work``, in
M0-equivalent examples: epochs x dataset size of the run at ``M0``) and finishes when
it has made that much progress, whatever batch sizes it ran at. The progress fraction
``p = done / work`` drives ``phi``. With throughput ``X`` (examples/s) the job's goodput
``X * E`` is its rate of progress in M0-equivalent examples/s, so ``dp/dt = X E(M, p) /
work``; at a fixed configuration this integrates in closed form (`seconds_to_progress`)
and `progress_after` inverts it.

LR scaling rules (Pollux's SCALE_LR plug-in): ``adascale`` (SGD), ``sqrt`` (square-root
scaling, Adam-type optimizers), ``linear``. They decide how the learning rate follows
the batch size; the scheduler only needs to know that one exists. ``none`` means the job
cannot change its batch size: its batch stays at ``M0`` (``E = 1``) and only its GPU
count adapts, Pollux's "non-adaptive job".

A measured noise scale (`PhiTable`) is piecewise geometric instead: log-linear between
measured points, so each piece integrates in the same closed form. Both curve classes
answer ``curve(p)`` and ``curve.integral(p1, p2, M0)``, all that progress needs.

Profile sets (``AdaptiveSpec.profiles``, `PROFILE_SETS`): ``modeled`` reads every
throughput parameter off the built-in performance model; ``sia`` uses the parameters and
noise scale fitted to the Sia artifact's measurements (:mod:`gavel_ng.elastic.profile_sets`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from gavel_ng.errors import InputError

LR_SCALING_RULES = ("adascale", "sqrt", "linear", "none")
PROFILE_SETS = ("modeled", "sia")
"""Throughput and noise-scale profile sets by name; ``modeled`` is the default."""


@dataclass(frozen=True)
class PhiCurve:
    """Gradient noise scale over training: ``phi(p) = phi0 * growth ** p``, p in [0, 1]."""

    phi0: float
    growth: float = 1.0

    def __post_init__(self) -> None:
        if not (_finite(self.phi0) and self.phi0 >= 0):
            raise InputError("phi0", self.phi0, "must be a finite number >= 0")
        if not (_finite(self.growth) and self.growth > 0):
            raise InputError("phi_growth", self.growth, "must be a finite number > 0")

    def __call__(self, progress: float | np.ndarray) -> float | np.ndarray:
        """phi at progress fraction(s); progress is clipped to [0, 1]."""
        p = np.clip(progress, 0.0, 1.0)
        out = self.phi0 * np.power(self.growth, p)
        return float(out) if np.ndim(out) == 0 else out

    def integral(self, p_from: np.ndarray, p_to: np.ndarray, init_batch: float) -> np.ndarray:
        """Integral of ``dp / (phi(p) + M0)`` from p_from to p_to (both in [0, 1], p_to >= p_from)."""
        m0 = float(init_batch)
        p1, p2 = np.asarray(p_from, float), np.asarray(p_to, float)
        if self.growth == 1.0:
            return (p2 - p1) / (self.phi0 + m0)
        ln_g = math.log(self.growth)
        phi1 = self.phi0 * np.power(self.growth, p1)
        phi2 = self.phi0 * np.power(self.growth, p2)
        return ((p2 - p1) - np.log((phi2 + m0) / (phi1 + m0)) / ln_g) / m0

    def to_dict(self) -> dict:
        return {"phi0": self.phi0, "growth": self.growth}


class PiecewiseIntegral:
    """The integral of a piecewise noise-scale curve, from its cumulative ``_from_zero(p, M0)``
    (shared by a measured table here and the gradient statistics' curves in grad_stats)."""

    def integral(self, p_from: np.ndarray, p_to: np.ndarray, init_batch: float) -> np.ndarray:
        """Integral of ``dp / (phi(p) + M0)`` from p_from to p_to (both in [0, 1], p_to >= p_from)."""
        m0 = float(init_batch)
        p1, p2 = np.asarray(p_from, float), np.asarray(p_to, float)
        return np.maximum(self._from_zero(p2, m0) - self._from_zero(p1, m0), 0.0)


@dataclass(frozen=True)
class PhiTable(PiecewiseIntegral):
    """A measured noise scale: ``phi`` at increasing progress fractions, log-linear in between and
    constant outside them (``phi(p) = phi[0]`` before the first point, ``phi[-1]`` after the last)."""

    progress: tuple[float, ...]
    phi: tuple[float, ...]

    def __post_init__(self) -> None:
        p, v = self.progress, self.phi
        if not (isinstance(p, (tuple, list)) and isinstance(v, (tuple, list)) and len(p) == len(v) >= 1):
            raise InputError("phi.progress", p, "needs as many progress points as phi values, at least one")
        if not all(_finite(x) and 0.0 <= x <= 1.0 for x in p) or any(b <= a for a, b in zip(p, p[1:])):
            raise InputError("phi.progress", p, "must increase strictly within [0, 1]")
        if not all(_finite(x) and x > 0 for x in v):
            raise InputError("phi.phi", v, "must be finite numbers > 0")
        object.__setattr__(self, "progress", tuple(float(x) for x in p))
        object.__setattr__(self, "phi", tuple(float(x) for x in v))
        # knots from 0 to 1 (the constant ends made explicit) and the integral's value at each knot, per M0
        x = np.unique(np.concatenate([[0.0], self.progress, [1.0]]))
        y = np.log(np.interp(x, self.progress, self.phi))
        object.__setattr__(self, "_x", x)
        object.__setattr__(self, "_logphi", y)
        object.__setattr__(self, "_cum", {})

    def __call__(self, progress: float | np.ndarray) -> float | np.ndarray:
        """phi at progress fraction(s); progress is clipped to [0, 1]."""
        out = np.exp(np.interp(np.clip(progress, 0.0, 1.0), self._x, self._logphi))
        return float(out) if np.ndim(out) == 0 else out

    def _piece(self, i: np.ndarray, a: np.ndarray, b: np.ndarray, m0: float) -> np.ndarray:
        """Integral of dp / (phi + M0) from a to b, both within piece i (closed form of a geometric piece)."""
        x, y = self._x, self._logphi
        width = x[i + 1] - x[i]
        rate = (y[i + 1] - y[i]) / np.where(width > 0, width, 1.0)
        phi_a = np.exp(y[i] + rate * (a - x[i]))
        phi_b = np.exp(y[i] + rate * (b - x[i]))
        flat = np.abs(rate) < 1e-12
        with np.errstate(divide="ignore", invalid="ignore"):
            curved = ((b - a) - np.log((phi_b + m0) / (phi_a + m0)) / np.where(flat, 1.0, rate)) / m0
        return np.where(flat, (b - a) / (phi_a + m0), curved)

    def _from_zero(self, p: np.ndarray, m0: float) -> np.ndarray:
        cum = self._cum.get(m0)
        if cum is None:
            k = np.arange(len(self._x) - 1)
            cum = np.concatenate([[0.0], np.cumsum(self._piece(k, self._x[:-1], self._x[1:], m0))])
            self._cum[m0] = cum
        i = np.clip(np.searchsorted(self._x, p, side="right") - 1, 0, len(self._x) - 2)
        return cum[i] + self._piece(i, self._x[i], p, m0)

    def invert(self, init_batch: float, batch: np.ndarray, scale: np.ndarray, p_from: np.ndarray,
               target: np.ndarray) -> np.ndarray:
        """The progress p at which ``scale [(p - p_from) + (M - M0) integral(p_from, p)]`` reaches
        ``target`` (1-D arrays; the caller keeps target below its value at p = 1).

        The knots' values pick each root's piece at once, and within a piece phi is geometric, so
        Newton's method runs on the piece's closed form from the secant between its ends, kept in
        the piece by the same bracket as `progress_after`'s. Each iteration costs a few ufuncs and
        there are 3-5 instead of `progress_after`'s 8-12 (each of which locates pieces again)."""
        m0 = float(init_batch)
        x, y = self._x, self._logphi
        last = len(x) - 2
        cum = self._cum.get(m0)
        if cum is None:
            self._from_zero(np.zeros(1), m0)
            cum = self._cum[m0]
        f0 = self._from_zero(p_from, m0)
        gain = (batch - m0)[:, None]
        at_knots = scale[:, None] * ((x[None, :] - p_from[:, None]) + gain * (cum[None, :] - f0[:, None]))
        i = np.clip(np.sum(at_knots <= target[:, None], axis=1) - 1, 0, last)
        i = np.maximum(i, np.clip(np.searchsorted(x, p_from, side="right") - 1, 0, last))
        rows = np.arange(len(i))
        lo = np.maximum(x[i], p_from)
        hi = x[i + 1]
        t_lo = np.where(x[i] > p_from, at_knots[rows, i], 0.0)
        t_hi = at_knots[rows, i + 1]
        base = cum[i] - f0   # integral from p_from to the piece's start (negative when p_from is inside)
        with np.errstate(divide="ignore", invalid="ignore"):
            p = np.where(t_hi > t_lo, lo + (target - t_lo) / (t_hi - t_lo) * (hi - lo), lo)
        p = np.clip(p, lo, hi)
        width = x[i + 1] - x[i]
        rate = (y[i + 1] - y[i]) / np.where(width > 0, width, 1.0)
        active = np.ones(len(p), bool)
        for _ in range(100):
            a = np.flatnonzero(active)
            if not len(a):
                break
            pa, ia = p[a], i[a]
            t = scale[a] * ((pa - p_from[a]) + gain[a, 0] * (base[a] + self._piece(ia, x[ia], pa, m0)))
            below = t < target[a]
            lo[a] = np.where(below, pa, lo[a])
            hi[a] = np.where(below, hi[a], pa)
            phi = np.exp(y[ia] + rate[a] * (pa - x[ia]))
            new = pa + (target[a] - t) / (scale[a] * (phi + batch[a]) / (phi + m0))
            new = np.where((new >= lo[a]) & (new <= hi[a]), new, 0.5 * (lo[a] + hi[a]))
            p[a] = new
            active[a[(np.abs(new - pa) <= 1e-12) | (hi[a] - lo[a] <= 1e-12)]] = False
        return p

    def to_dict(self) -> dict:
        return {"progress": list(self.progress), "phi": list(self.phi)}


def parse_phi(data: object, where: str = "phi") -> PhiCurve | PhiTable:
    """A noise-scale curve from its JSON object, by its shape: ``{"phi0", "growth"}`` or
    ``{"progress": [...], "phi": [...]}``."""
    if isinstance(data, dict) and set(data) <= {"phi0", "growth"} and "phi0" in data:
        return PhiCurve(data["phi0"], data.get("growth", 1.0))
    if isinstance(data, dict) and set(data) == {"progress", "phi"}:
        try:
            return PhiTable(tuple(data["progress"]) if isinstance(data["progress"], list) else data["progress"],
                            tuple(data["phi"]) if isinstance(data["phi"], list) else data["phi"])
        except InputError as exc:
            raise InputError(exc.field.replace("phi", where, 1), exc.value, exc.reason) from None
    raise InputError(where, data, "must be an object {\"phi0\": ..., \"growth\": ...} or "
                                  "{\"progress\": [...], \"phi\": [...]}")


def efficiency(batch: float | np.ndarray, init_batch: float,
               phi: float | np.ndarray) -> float | np.ndarray:
    """Pollux's statistical efficiency ``(phi + M0) / (phi + M)`` (vectorized)."""
    out = (np.asarray(phi, float) + init_batch) / (np.asarray(phi, float) + np.asarray(batch, float))
    return float(out) if np.ndim(out) == 0 else out


def progress_per_step(batch: float | np.ndarray, init_batch: float,
                      phi: float | np.ndarray) -> float | np.ndarray:
    """M0-equivalent examples one optimizer step at total batch ``batch`` makes: ``M * E(M)``."""
    out = np.asarray(batch, float) * efficiency(batch, init_batch, phi)
    return float(out) if np.ndim(out) == 0 else out


@dataclass(frozen=True)
class AdaptiveSpec:
    """How a job may adapt. A job without one is today's fixed job.

    ``family`` names an entry of :data:`gavel_ng.elastic.families.FAMILIES` (its
    throughput model and gradient-noise curve); ``init_batch`` (M0) and ``max_batch`` are
    total batch sizes in the family's examples; ``min_gpus``/``max_gpus`` bound the GPU
    count (``max_gpus`` None: as many as the batch allows); ``min_local_batch`` and
    ``max_local_batch`` bound the per-GPU batch (``max_local_batch`` None: the GPU's
    memory decides); ``accumulation`` allows gradient accumulation; ``phi`` overrides
    the family's gradient-noise curve; ``profiles`` names the profile set (`PROFILE_SETS`)
    its throughput parameters and noise scale come from.
    """

    family: str
    init_batch: int
    max_batch: int
    min_gpus: int = 1
    max_gpus: int | None = None
    lr_scaling: str = "adascale"
    min_local_batch: int = 1
    max_local_batch: int | None = None
    accumulation: bool = True
    phi: PhiCurve | PhiTable | None = None
    profiles: str = "modeled"

    def __post_init__(self) -> None:
        f = "adaptive"
        if self.profiles not in PROFILE_SETS:
            raise InputError(f"{f}.profiles", self.profiles, f"unknown profile set; known: {', '.join(PROFILE_SETS)}")
        _require_int(self.init_batch, f"{f}.init_batch", 1)
        _require_int(self.max_batch, f"{f}.max_batch", 1)
        if self.max_batch < self.init_batch:
            raise InputError(f"{f}.max_batch", self.max_batch, f"must be >= init_batch ({self.init_batch})")
        _require_int(self.min_gpus, f"{f}.min_gpus", 1)
        if self.max_gpus is not None:
            _require_int(self.max_gpus, f"{f}.max_gpus", 1)
            if self.max_gpus < self.min_gpus:
                raise InputError(f"{f}.max_gpus", self.max_gpus, f"must be >= min_gpus ({self.min_gpus})")
        if self.lr_scaling not in LR_SCALING_RULES:
            raise InputError(f"{f}.lr_scaling", self.lr_scaling, f"must be one of {', '.join(LR_SCALING_RULES)}")
        _require_int(self.min_local_batch, f"{f}.min_local_batch", 1)
        if self.max_local_batch is not None:
            _require_int(self.max_local_batch, f"{f}.max_local_batch", 1)
            if self.max_local_batch < self.min_local_batch:
                raise InputError(f"{f}.max_local_batch", self.max_local_batch,
                                 f"must be >= min_local_batch ({self.min_local_batch})")

    FIELDS = ("family", "init_batch", "max_batch", "min_gpus", "max_gpus", "lr_scaling", "min_local_batch",
              "max_local_batch", "accumulation", "phi", "profiles")

    @classmethod
    def from_dict(cls, data: object, where: str = "adaptive", family: str | None = None) -> AdaptiveSpec:
        """A job file's (or a submission's) ``adaptive`` object; `family` is the default family.
        Errors name ``where.field``; `families.parse_adaptive` also checks the family exists."""
        if not isinstance(data, dict):
            raise InputError(where, data, "expected an object")
        for key in data:
            if key not in cls.FIELDS:
                raise InputError(f"{where}.{key}", data[key], f"unknown field; known: {', '.join(cls.FIELDS)}")
        fam = data.get("family", family)
        if not isinstance(fam, str) or not fam:
            raise InputError(f"{where}.family", fam, "required: the job type maps to no adaptive family")
        for key in ("init_batch", "max_batch"):
            if key not in data:
                raise InputError(f"{where}.{key}", None, "required")
        if not isinstance(data.get("accumulation", True), bool):
            raise InputError(f"{where}.accumulation", data["accumulation"], "must be true or false")
        if not isinstance(data.get("lr_scaling", "adascale"), str):
            raise InputError(f"{where}.lr_scaling", data["lr_scaling"], "must be a string")
        if not isinstance(data.get("profiles", "modeled"), str):
            raise InputError(f"{where}.profiles", data["profiles"], "must be a string")
        phi = data.get("phi")
        if phi is not None:
            phi = parse_phi(phi, f"{where}.phi")
        kw = {k: data[k] for k in cls.FIELDS if k in data and k not in ("family", "phi")}
        try:
            return cls(family=fam.strip().lower(), phi=phi, **kw)
        except InputError as exc:      # the dataclass names its fields "adaptive.x": say where
            field = exc.field.replace("adaptive", where, 1) if exc.field.startswith("adaptive") else exc.field
            raise InputError(field, exc.value, exc.reason) from None

    def to_dict(self) -> dict:
        out = {k: getattr(self, k) for k in self.FIELDS if k not in ("phi", "profiles")}
        if self.phi is not None:
            out["phi"] = self.phi.to_dict()
        if self.profiles != "modeled":  # the default stays implicit: older readers take these dicts
            out["profiles"] = self.profiles
        return out

    @property
    def batch_limit(self) -> int:
        """The largest total batch the job may use: ``max_batch``, or ``M0`` when it cannot scale its LR."""
        return self.init_batch if self.lr_scaling == "none" else self.max_batch

    def efficiency(self, batch: float | np.ndarray, phi: float | np.ndarray) -> float | np.ndarray:
        """E(M) of this job at noise scale phi."""
        return efficiency(batch, self.init_batch, phi)


def seconds_to_progress(curve: PhiCurve | PhiTable, init_batch: float, batch: float | np.ndarray,
                        throughput: float | np.ndarray, work: float | np.ndarray,
                        p_from: float | np.ndarray, p_to: float | np.ndarray) -> float | np.ndarray:
    """Seconds a job needs to go from progress fraction ``p_from`` to ``p_to``.

    At a fixed configuration: total batch ``batch``, ``throughput`` examples/s, ``work``
    M0-equivalent examples in all. ``dp/dt = X E(M, phi(p)) / W``, so with
    ``1/E = 1 + (M - M0)/(phi + M0)``

        t = W/X [ (p2 - p1) + (M - M0) * I ],   I = integral of dp / (phi(p) + M0)

    and ``I`` in closed form (`PhiCurve.integral`: for the geometric curve
    ``((p2 - p1) - ln((phi(p2) + M0)/(phi(p1) + M0)) / ln g) / M0``, ``(p2 - p1)/(phi0 + M0)``
    for ``g = 1``; `PhiTable.integral` sums the same over its pieces). Zero throughput gives +inf.
    """
    m0 = float(init_batch)
    p1 = np.clip(np.asarray(p_from, float), 0.0, 1.0)
    p2 = np.clip(np.asarray(p_to, float), 0.0, 1.0)
    dp = np.maximum(p2 - p1, 0.0)
    p2 = p1 + dp
    integral = curve.integral(p1, p2, m0)
    x = np.asarray(throughput, float)
    with np.errstate(divide="ignore", invalid="ignore"):
        out = np.where(x > 0, np.asarray(work, float) / x * (dp + (np.asarray(batch, float) - m0) * integral),
                       np.where(dp > 0, np.inf, 0.0))
    return float(out) if np.ndim(out) == 0 else out


def progress_after(curve: PhiCurve | PhiTable, init_batch: float, batch: float | np.ndarray,
                   throughput: float | np.ndarray, work: float | np.ndarray,
                   p_from: float | np.ndarray, seconds: float | np.ndarray) -> float | np.ndarray:
    """Progress fraction after running ``seconds`` at a fixed configuration (capped at 1).

    Inverts `seconds_to_progress` by Newton's method, safeguarded: t(p) is increasing, so
    each iterate narrows a bracket [lo, hi] around the root (from [p_from, 1]) and a Newton
    step that leaves it is replaced by the bracket's midpoint. For a geometric curve with
    M >= M0, t is concave and the Newton iterates rise to the root without overshooting;
    a measured curve (`PhiTable`) may fall in places, where the bracket keeps it safe.
    """
    p0 = np.clip(np.asarray(p_from, float), 0.0, 1.0)
    target = np.maximum(np.asarray(seconds, float), 0.0)
    x = np.asarray(throughput, float)
    b = np.asarray(batch, float)
    w = np.asarray(work, float)
    shape = np.broadcast(p0, target, x, b, w).shape
    p0, target, x, b, w = (np.broadcast_to(a, shape).astype(float).ravel() for a in (p0, target, x, b, w))
    t_end = seconds_to_progress(curve, init_batch, b, x, w, p0, 1.0)
    done = np.asarray(t_end <= target)
    if isinstance(curve, PhiTable):
        p = p0.copy()
        go = ~done & (x > 0) & (target > 0)
        if go.any():
            p[go] = curve.invert(init_batch, b[go], w[go] / x[go], p0[go], target[go])
        out = np.where(done, 1.0, p).reshape(shape)
        return float(out) if np.ndim(out) == 0 else out
    p = p0.copy()
    lo, hi = p0.copy(), np.ones_like(p0)
    active = ~done & (x > 0) & (target > 0)
    for _ in range(100):
        if not active.any():
            break
        a = np.flatnonzero(active)
        t = np.asarray(seconds_to_progress(curve, init_batch, b[a], x[a], w[a], p0[a], p[a]))
        below = t < target[a]
        lo[a] = np.where(below, p[a], lo[a])
        hi[a] = np.where(below, hi[a], p[a])
        phi = np.asarray(curve(p[a]), float)
        slope = w[a] / x[a] * (phi + b[a]) / (phi + init_batch)
        new = p[a] + (target[a] - t) / slope
        new = np.where((new >= lo[a]) & (new <= hi[a]), new, 0.5 * (lo[a] + hi[a]))
        step = new - p[a]
        p[a] = new
        active[a[(np.abs(step) <= 1e-12) | (hi[a] - lo[a] <= 1e-12)]] = False
    out = np.where(done, 1.0, p).reshape(shape)
    return float(out) if np.ndim(out) == 0 else out


def _finite(x: object) -> bool:
    return isinstance(x, (int, float, np.floating, np.integer)) and not isinstance(x, bool) and math.isfinite(x)


def _require_int(x: object, field: str, minimum: int) -> None:
    if not (isinstance(x, (int, np.integer)) and not isinstance(x, bool) and x >= minimum):
        raise InputError(field, x, f"must be an integer >= {minimum}")
