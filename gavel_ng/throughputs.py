"""Throughput tables: steps/s per (job type, scale factor) and worker type.

The in-memory form mirrors the Gavel JSON format so that a table loaded from it
writes back byte-for-byte equivalent: one entry per worker-type name, where
placement-sensitive twins carry the suffix `_unconsolidated`, and pair entries map
the partner's key to (this job's, the partner's) throughput on a shared GPU.

Built-in tables (`gavel-osdi20`, Gavel's measured K80/P100/V100 table, shipped as package
data) load by name (`ThroughputTable.builtin`); `gavel_ng.profiles.table_io.resolve_table`
is what every option that takes a table calls (a built-in name, a Gavel JSON or a CSV).
"""

from __future__ import annotations

import ast
import gzip
import json
import math
from dataclasses import dataclass, field
from functools import cache
from importlib import resources
from pathlib import Path

import numpy as np

from .errors import InputError, read_json

JobKey = tuple[str, int]
UNCONSOLIDATED = "_unconsolidated"
# Tables shipped as package data (gzip-compressed Gavel JSON), by the name users pass for a table
BUILTIN_TABLES = {"gavel-osdi20": "profiles/data/gavel-osdi20/simulation_throughputs.json.gz"}


@dataclass
class ThroughputTable:
    """isolated[worker][key] = steps/s; pairs[worker][key][partner] = (mine, partner's)."""

    isolated: dict[str, dict[JobKey, float]] = field(default_factory=dict)
    pairs: dict[str, dict[JobKey, dict[JobKey, tuple[float, float]]]] = field(default_factory=dict)

    # ----- queries -------------------------------------------------------------------
    @property
    def worker_types(self) -> list[str]:
        """Base worker types (placement twins folded in)."""
        return [w for w in self.isolated if not w.endswith(UNCONSOLIDATED)]

    @property
    def job_keys(self) -> list[JobKey]:
        keys: dict[JobKey, None] = {}
        for per in self.isolated.values():
            keys.update(dict.fromkeys(per))
        return list(keys)

    @property
    def job_types(self) -> list[str]:
        return list(dict.fromkeys(k[0] for k in self.job_keys))

    def get(self, key: JobKey, worker_type: str) -> float:
        """Isolated (consolidated) steps/s; 0.0 where the job cannot run."""
        return self.isolated.get(worker_type, {}).get(key, 0.0)

    def get_unconsolidated(self, key: JobKey, worker_type: str) -> float | None:
        """Steps/s of a multi-GPU job spread over servers, or None if not measured."""
        per = self.isolated.get(worker_type + UNCONSOLIDATED)
        return None if per is None else per.get(key)

    def get_pair(self, key: JobKey, other: JobKey, worker_type: str) -> tuple[float, float] | None:
        """(key's, other's) steps/s when sharing a GPU; None when unknown, (0, 0) impossible."""
        return self.pairs.get(worker_type, {}).get(key, {}).get(other)

    def matrix(self, keys: list[JobKey], worker_types: list[str]) -> np.ndarray:
        """Isolated throughputs as a (len(keys), len(worker_types)) array."""
        out = np.zeros((len(keys), len(worker_types)))
        for j, w in enumerate(worker_types):
            per = self.isolated.get(w, {})
            out[:, j] = [per.get(k, 0.0) for k in keys]
        return out

    def require_job_type(self, job_type: str, field_name: str = "job_type") -> None:
        if job_type not in self.job_types:
            raise InputError(field_name, job_type, "unknown job type (not in the throughput table)")

    # ----- Gavel JSON ---------------------------------------------------------------
    @classmethod
    def from_gavel_dict(cls, data: object, source: str = "throughputs") -> ThroughputTable:
        """Parse the Gavel format: {worker: {"('Type', sf)": {"null": x, "('Other', sf)": [a, b]}}}."""
        if not isinstance(data, dict) or not data:
            raise InputError(source, type(data).__name__, "expected an object of worker types")
        table = cls()
        for worker, entries in data.items():
            if not isinstance(entries, dict):
                raise InputError(f"{source}.{worker}", entries, "expected an object of job keys")
            iso: dict[JobKey, float] = {}
            pairs: dict[JobKey, dict[JobKey, tuple[float, float]]] = {}
            for raw_key, entry in entries.items():
                where = f"{source}.{worker}.{raw_key}"
                key = parse_job_key(raw_key, where)
                if not isinstance(entry, dict) or "null" not in entry:
                    raise InputError(where, entry, "expected an object with a 'null' isolated throughput")
                iso[key] = _throughput(entry["null"], f"{where}.null")
                for raw_other, value in entry.items():
                    if raw_other == "null":
                        continue
                    other = parse_job_key(raw_other, f"{where}.{raw_other}")
                    if not (isinstance(value, list) and len(value) == 2):
                        raise InputError(f"{where}.{raw_other}", value, "expected [this job, other job]")
                    a = _throughput(value[0], f"{where}.{raw_other}[0]")
                    b = _throughput(value[1], f"{where}.{raw_other}[1]")
                    pairs.setdefault(key, {})[other] = (a, b)
            table.isolated[worker] = iso
            if pairs:
                table.pairs[worker] = pairs
        return table

    @classmethod
    def load(cls, path: str | Path) -> ThroughputTable:
        """Load a Gavel-format JSON file, with errors naming the file and entry."""
        return cls.from_gavel_dict(read_json(path, "--throughputs"), source=Path(path).name)

    @classmethod
    def builtin(cls, name: str) -> ThroughputTable:
        """A table shipped with gavel_ng: "gavel-osdi20" is Gavel's measured K80/P100/V100 table."""
        if name not in BUILTIN_TABLES:
            raise InputError("table", name, f"unknown built-in table; known: {', '.join(BUILTIN_TABLES)}")
        return cls.from_gavel_dict(json.loads(_builtin_text(name)), source=name)

    def to_gavel_dict(self) -> dict:
        out: dict = {}
        for worker, iso in self.isolated.items():
            per: dict = {}
            for key, value in iso.items():
                entry: dict = {"null": value}
                for other, (a, b) in self.pairs.get(worker, {}).get(key, {}).items():
                    entry[format_job_key(other)] = [a, b]
                per[format_job_key(key)] = entry
            out[worker] = per
        return out


@cache
def _builtin_text(name: str) -> bytes:
    ref = resources.files(__package__).joinpath(*BUILTIN_TABLES[name].split("/"))
    return gzip.decompress(ref.read_bytes())


def format_job_key(key: JobKey) -> str:
    return repr((key[0], int(key[1])))


def parse_job_key(raw: str, where: str) -> JobKey:
    """Parse "('A3C', 1)" (a Python tuple literal) without eval."""
    try:
        value = ast.literal_eval(raw)
    except (ValueError, SyntaxError):
        raise InputError(where, raw, "job key must look like ('Job type', scale_factor)") from None
    if not (isinstance(value, tuple) and len(value) == 2 and isinstance(value[0], str)
            and isinstance(value[1], int) and value[1] >= 1):
        raise InputError(where, raw, "job key must look like ('Job type', scale_factor)")
    return value[0], value[1]


def _throughput(value: object, where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0:
        raise InputError(where, value, "throughput must be a finite non-negative number")
    return float(value)
