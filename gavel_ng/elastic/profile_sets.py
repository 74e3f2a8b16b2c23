"""Profile sets of adaptive jobs, selectable by name (`PROFILE_SETS`, ``AdaptiveSpec.profiles``).

* ``modeled`` (the default): every throughput parameter is read off gavel_ng's performance model
  (:mod:`gavel_ng.elastic.goodput`), the noise scale is the family's geometric curve.
* ``sia``: Pollux's parameters fitted per (application, GPU type) to the Sia artifact's measured
  step and sync times, and the noise scale measured over training (:mod:`gavel_ng.elastic.measured`
  fitted them; ``data/sia.json`` holds the result with its provenance and fit errors).

This module only loads and checks a measured set; `goodput.throughput_params` turns its entries
into `ThroughputParams` and bootstraps the types it did not measure.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from functools import cache
from importlib import resources
from types import MappingProxyType

from gavel_ng.errors import InputError

from .efficiency import PROFILE_SETS, AdaptiveSpec, PhiCurve, PhiTable
from .families import FAMILIES, get_family

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
    """A measured profile set: entries by (application, GPU type), noise scale by application."""

    name: str
    entries: MappingProxyType  # (app, gpu) -> MeasuredEntry
    phi: MappingProxyType  # app -> PhiTable
    provenance: MappingProxyType  # source, files, date, method, notice

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


@cache
def _load(name: str) -> MeasuredSet:
    text = resources.files("gavel_ng.elastic").joinpath("data", DATA_FILES[name]).read_text()
    return parse_set(json.loads(text), f"elastic/data/{DATA_FILES[name]}")


def parse_set(data: object, where: str) -> MeasuredSet:
    """A measured set from its JSON object (what `measured.fit_directory` writes), checked."""
    if not (isinstance(data, dict) and isinstance(data.get("fits"), dict) and isinstance(data.get("phi"), dict)):
        raise InputError(where, type(data).__name__, "expected an object with 'fits' and 'phi'")
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
    phi = {}
    for app, table in data["phi"].items():
        if app not in FAMILIES or not isinstance(table, dict):
            raise InputError(f"{where}.phi", app, "expected an application's {progress, phi}")
        try:
            phi[app] = PhiTable(tuple(table.get("progress", ())), tuple(table.get("phi", ())))
        except InputError as exc:
            raise InputError(f"{where}.phi.{app}.{exc.field.split('.')[-1]}", exc.value, exc.reason) from None
    provenance = {k: v for k, v in data.items() if k not in ("fits", "phi")}
    return MeasuredSet(str(data.get("name", where)), MappingProxyType(entries), MappingProxyType(phi),
                       MappingProxyType(provenance))


def phi_curve(spec: AdaptiveSpec) -> PhiCurve | PhiTable:
    """The noise-scale curve a job follows: its own override, else its set's measured curve for the
    family, else the family's modeled curve."""
    if spec.phi is not None:
        return spec.phi
    if spec.profiles != MODELED:
        table = measured_set(spec.profiles).phi.get(spec.family)
        if table is not None:
            return table
    return get_family(spec.family).phi
