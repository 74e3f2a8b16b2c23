"""What produced a result: a digest of the code and the input files behind one sweep point.

A point's id names its settings only, so without this a sweep resumed after the simulator,
a plugin policy or a trace file changed would count rows computed by the old ones as done
and mix them with new ones, silently. Each row records this digest; `run_sweep` runs a
point again when its digest differs from its row's (or the row has none: written before
digests were recorded), unless told to keep such stale rows.

The digest covers every file of the installed gavel_ng package (code and package data),
each plugin's text (a module plugin: its file, where it has one) and the files the point
names (trace, throughput table, rules, entities). It is computed on the driver: Ray nodes
are expected to run the driver's version of the package.
"""

from __future__ import annotations

import hashlib
import importlib.util
from collections.abc import Iterable
from functools import lru_cache
from pathlib import Path

from ..policies.plugins import Plugin
from .grid import SweepPoint

PACKAGE = Path(__file__).resolve().parents[1]
FILE_FIELDS = ("trace", "throughputs", "rules", "entities")   # SweepPoint fields that may name a file
LENGTH = 16


@lru_cache(maxsize=1)
def package_digest() -> str:
    """Every file of the gavel_ng package (bytecode caches aside), by relative path and content."""
    h = hashlib.sha256()
    for path in sorted(p for p in PACKAGE.rglob("*") if p.is_file() and "__pycache__" not in p.parts):
        h.update(path.relative_to(PACKAGE).as_posix().encode())
        h.update(b"\0")
        h.update(path.read_bytes())
        h.update(b"\0")
    return h.hexdigest()[:LENGTH]


def plugins_digest(plugins: Iterable[Plugin]) -> str:
    h = hashlib.sha256()
    for plugin in plugins:
        h.update(plugin.spec.encode())
        h.update(b"\0")
        if plugin.source is not None:
            h.update(plugin.source.encode("utf-8", "surrogatepass"))
        else:
            h.update(_module_text(plugin.spec))
        h.update(b"\0")
    return h.hexdigest()[:LENGTH]


def point_digest(point: SweepPoint, code: str) -> str:
    """`code` (package and plugins) plus the content of every existing file the point names."""
    h = hashlib.sha256(code.encode())
    for name in FILE_FIELDS:
        value = getattr(point, name)
        if isinstance(value, str) and Path(value).expanduser().is_file():
            path = Path(value).expanduser().resolve()
            stat = path.stat()
            h.update(f"{name}\0".encode())
            h.update(_file_digest(str(path), stat.st_mtime_ns, stat.st_size).encode())
    return h.hexdigest()[:LENGTH]


def point_digests(points: Iterable[SweepPoint], plugins: Iterable[Plugin] = ()) -> dict[str, str]:
    """Point id -> the digest its row would be computed with now."""
    code = code_digest(plugins)
    return {p.point_id: point_digest(p, code) for p in points}


def code_digest(plugins: Iterable[Plugin] = ()) -> str:
    plugins = tuple(plugins)
    return package_digest() + ("+" + plugins_digest(plugins) if plugins else "")


@lru_cache(maxsize=256)
def _file_digest(path: str, mtime_ns: int, size: int) -> str:   # mtime and size key the cache
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def _module_text(name: str) -> bytes:
    """A module plugin's source file, where one can be found (else only its name counts)."""
    try:
        spec = importlib.util.find_spec(name)
    except (ImportError, ValueError):
        return b""
    origin = getattr(spec, "origin", None) if spec is not None else None
    if origin and Path(origin).is_file():
        return Path(origin).read_bytes()
    return b""
