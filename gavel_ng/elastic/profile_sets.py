"""Profile sets of adaptive jobs, selectable by name (`PROFILE_SETS`, ``AdaptiveSpec.profiles``).

* ``modeled`` (the default): every throughput parameter is read off gavel_ng's performance model
  (:mod:`gavel_ng.elastic.goodput`), the noise scale is the family's geometric curve.
* ``sia``: Pollux's parameters fitted per (application, GPU type) to the Sia artifact's measured
  step times, the gradient statistics of every measured batch size over training
  (:mod:`gavel_ng.elastic.grad_stats`), each application's measured restart delay and the
  artifact's calibration slowdown (:mod:`gavel_ng.elastic.measured` fitted and gathered them;
  ``data/sia.json`` holds the result with its provenance and fit errors).

A set may hold, per application: ``stats`` (gradient statistics by batch size; older sets: ``phi``,
the M0 run's noise scale alone), ``restart_seconds`` (what a start or a change of placement costs a
job: the simulator charges it to every job of the set, fixed ones included, instead of the run's
flat delays) and ``calibration`` (a slowdown applied to every measured time: the set's times are
faster than the jobs ran, see docs/elastic.md). The ``modeled`` set has none of them: its jobs
pay the run's flat ``--realloc-delay`` / ``--preemption-overhead`` (Pollux's simulator charges one
constant delay, 30 s, to every job; we keep that as the modeled set's documented estimate).

This module only loads and checks a measured set; `goodput.throughput_params` turns its entries
into `ThroughputParams` and bootstraps the types it did not measure.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from functools import cache
from importlib import resources
from types import MappingProxyType

from gavel_ng.errors import InputError

from .efficiency import PROFILE_SETS, AdaptiveSpec, PhiCurve, PhiTable
from .families import FAMILIES, get_family
from .grad_stats import BatchStats, EpochPhi

MODELED = "modeled"
DATA_FILES = MappingProxyType({"sia": "sia.json"})
"""Package data (gavel_ng/elastic/data/) of every measured set."""
THETA_ORDER = ("alpha_grad", "beta_grad", "alpha_local", "beta_local", "alpha_node", "beta_node", "gamma")


@dataclass(frozen=True)
class MeasuredEntry:
    """One (application, GPU type) of a measured set: Pollux's 7 parameters and the fit's quality."""

    theta: tuple[float, ...]
    max_local_batch: int
    rows: int
    median_error: float
    max_error: float
    node_measured: bool


@dataclass(frozen=True)
class MeasuredSet:
    """A measured profile set: entries by (application, GPU type), noise scale, restart delay and
    calibration by application (module docstring)."""

    name: str
    entries: MappingProxyType  # (app, gpu) -> MeasuredEntry
    phi: MappingProxyType  # app -> its noise scale at M0 (EpochPhi from `stats`, or an older set's PhiTable)
    provenance: MappingProxyType  # source, files, date, method, notice
    stats: MappingProxyType = field(default_factory=lambda: MappingProxyType({}))  # app -> BatchStats
    restart: MappingProxyType = field(default_factory=lambda: MappingProxyType({}))  # app -> s per (re)start
    calibration: MappingProxyType = field(default_factory=lambda: MappingProxyType({}))  # app -> slowdown >= 1

    def types_of(self, app: str) -> tuple[str, ...]:
        """GPU types the set measured the application on."""
        return tuple(gpu for a, gpu in self.entries if a == app)


def check_profiles(name: object, field: str = "profiles") -> str:
    """The set's name, or InputError naming the known ones."""
    if name not in PROFILE_SETS:
        raise InputError(field, name, f"unknown profile set; known: {', '.join(PROFILE_SETS)}")
    return str(name)


def measured_set(name: str) -> MeasuredSet:
    """A measured set by name (loaded once); InputError for ``modeled`` or an unknown name."""
    check_profiles(name)
    if name not in DATA_FILES:
        raise InputError("profiles", name, "is not a measured set")
    return _load(name)


def set_data(name: str) -> dict:
    """A shipped measured set's JSON object as stored (what `measured.fit_directory` wrote)."""
    measured_set(name)
    return json.loads(resources.files("gavel_ng.elastic").joinpath("data", DATA_FILES[name]).read_text())


@cache
def _load(name: str) -> MeasuredSet:
    text = resources.files("gavel_ng.elastic").joinpath("data", DATA_FILES[name]).read_text()
    return parse_set(json.loads(text), f"elastic/data/{DATA_FILES[name]}")


def parse_set(data: object, where: str) -> MeasuredSet:
    """A measured set from its JSON object (what `measured.fit_directory` writes), checked."""
    if not (isinstance(data, dict) and isinstance(data.get("fits"), dict)
            and (isinstance(data.get("phi"), dict) or isinstance(data.get("stats"), dict))):
        raise InputError(where, type(data).__name__, "expected an object with 'fits' and 'stats' (or 'phi')")
    entries = {}
    for app, per in data["fits"].items():
        if app not in FAMILIES:
            raise InputError(f"{where}.fits", app, f"unknown application; known: {', '.join(FAMILIES)}")
        for gpu, f in per.items():
            at = f"{where}.fits.{app}.{gpu}"
            theta = f.get("theta") if isinstance(f, dict) else None
            if not (isinstance(theta, list) and len(theta) == 7
                    and all(isinstance(v, (int, float)) and math.isfinite(v) and v >= 0 for v in theta)
                    and 1.0 <= theta[6] <= 10.0 and theta[0] + theta[1] > 0):
                raise InputError(f"{at}.theta", theta, "expected 7 finite numbers >= 0 (gamma in [1, 10])")
            mlb = f.get("max_local_batch")
            if not (isinstance(mlb, int) and mlb >= 1):
                raise InputError(f"{at}.max_local_batch", mlb, "must be an integer >= 1")
            entries[(app, gpu.lower())] = MeasuredEntry(tuple(float(v) for v in theta), mlb, int(f.get("rows", 0)),
                                                        float(f.get("median_error", math.nan)),
                                                        float(f.get("max_error", math.nan)),
                                                        bool(f.get("node_measured", True)))
    phi: dict = {}
    for app, table in data.get("phi", {}).items():
        if app not in FAMILIES or not isinstance(table, dict):
            raise InputError(f"{where}.phi", app, "expected an application's {progress, phi}")
        try:
            phi[app] = PhiTable(tuple(table.get("progress", ())), tuple(table.get("phi", ())))
        except InputError as exc:
            raise InputError(f"{where}.phi.{app}.{exc.field.split('.')[-1]}", exc.value, exc.reason) from None
    stats = {}
    for app, table in data.get("stats", {}).items():
        at = f"{where}.stats.{app}"
        if app not in FAMILIES or not isinstance(table, dict):
            raise InputError(f"{where}.stats", app, "expected an application's {batches, ends, grad_sqr, grad_var}")
        try:
            stats[app] = BatchStats(FAMILIES[app].init_batch, table.get("batches", ()), table.get("ends", ()),
                                    table.get("grad_sqr", ()), table.get("grad_var", ()))
        except (InputError, ValueError, TypeError) as exc:
            field = f"{at}.{exc.field.split('.')[-1]}" if isinstance(exc, InputError) else at
            raise InputError(field, getattr(exc, "value", None), getattr(exc, "reason", str(exc))) from None
        phi[app] = stats[app].curve(FAMILIES[app].init_batch)
    restart = _per_app(data, "restart_seconds", where, 0.0, math.inf)
    calibration = _per_app(data, "calibration", where, 1.0, 100.0)
    provenance = {k: v for k, v in data.items() if k not in ("fits", "phi", "stats")}
    return MeasuredSet(str(data.get("name", where)), MappingProxyType(entries), MappingProxyType(phi),
                       MappingProxyType(provenance), MappingProxyType(stats), MappingProxyType(restart),
                       MappingProxyType(calibration))


def _per_app(data: dict, key: str, where: str, lo: float, hi: float) -> dict[str, float]:
    table = data.get(key, {})
    if not isinstance(table, dict):
        raise InputError(f"{where}.{key}", table, "expected an object: application -> number")
    out = {}
    for app, v in table.items():
        if app not in FAMILIES:
            raise InputError(f"{where}.{key}", app, f"unknown application; known: {', '.join(FAMILIES)}")
        if not (isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) and lo <= v < hi):
            raise InputError(f"{where}.{key}.{app}", v, f"must be a finite number in [{lo:g}, {hi:g})")
        out[app] = float(v)
    return out


def batch_stats(spec: AdaptiveSpec) -> BatchStats | None:
    """The measured gradient statistics by batch size the job trains with (None: its noise scale does not
    depend on its batch: a modeled set, an older measured set, or the job's own `phi`)."""
    if spec.phi is not None or spec.profiles == MODELED:
        return None
    return measured_set(spec.profiles).stats.get(spec.family)


def phi_curve(spec: AdaptiveSpec, batch: float | None = None) -> PhiCurve | PhiTable | EpochPhi:
    """The noise-scale curve a job follows at total batch `batch` (None: its M0): its own override, else its
    set's measured curve for the family (at that batch where the set measured several), else the family's
    modeled curve."""
    if spec.phi is not None:
        return spec.phi
    if spec.profiles != MODELED:
        ms = measured_set(spec.profiles)
        stats = ms.stats.get(spec.family)
        if stats is not None:
            return stats.curve(spec.init_batch if batch is None else batch)
        table = ms.phi.get(spec.family)
        if table is not None:
            return table
    return get_family(spec.family).phi


def restart_seconds(profiles: str, app: str) -> float | None:
    """Seconds a start or change of placement costs a job of `app` under the set (None: the set has no
    figure; the run's flat delays apply)."""
    if profiles == MODELED:
        return None
    return measured_set(profiles).restart.get(app)


def calibration(profiles: str, app: str) -> float:
    """The slowdown the set applies to every measured time of `app` (1: none)."""
    if profiles == MODELED:
        return 1.0
    return measured_set(profiles).calibration.get(app, 1.0)
