"""User policies from outside the package: plugin files and modules, and installed entry points.

A plugin is a Python file or an importable module that registers policies with
`@gavel_ng.policy(NAME, ...)` or `@gavel_ng.round_policy(NAME, ...)`. Every command takes
`--plugin FILE.py|MODULE` (repeatable); the scheduler's cluster config takes `"plugins": [...]`.
A file is executed as a module of its own, under a name derived from its path and text, so
two files called `policies.py` never collide; a dotted name is imported normally.

Installed packages need no flag: every entry point of the group `gavel_ng.policies`

    [project.entry-points."gavel_ng.policies"]
    mine = "my_package.policies"

is imported when the registry first loads the built-in policies. One that fails to load
is logged as a warning and left out; it never breaks the registry. A plugin that registers a
name already taken fails to load, unless its decorator says `replace=True` (registry.Registry).

Sweeps run points in other processes (a process pool, Ray workers on other machines),
so a plugin travels as a `Plugin`: a file's text with its path (for messages), or a
module's name. `load` is idempotent: loading the same plugin again in a process that
already has it (a forked worker, a reused Ray worker) does nothing.
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import linecache
import logging
import os
import re
import sys
import types
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from ..errors import InputError

log = logging.getLogger(__name__)
ENTRY_POINT_GROUP = "gavel_ng.policies"
FLAG = "--plugin"

@dataclass(frozen=True)
class Plugin:
    """A plugin as it travels to other processes.

    `spec` is what the user wrote (a path or a module name) and names the plugin in
    messages; a file also carries its absolute path (`origin`) and its text (`source`), so
    a worker that cannot see the driver's files still runs the same code."""

    spec: str
    source: str | None = None
    origin: str | None = None

    @property
    def is_file(self) -> bool:
        return self.source is not None

    def identity(self) -> tuple[str, ...]:
        """What makes two plugins the same one: a file's path and text, or a module's name."""
        if self.is_file:
            return ("file", self.origin or self.spec, _digest(self))
        return ("module", self.spec)


def is_file_spec(spec: str) -> bool:
    """`FILE.py` or anything with a path separator is a file; everything else a module name."""
    return spec.endswith(".py") or "/" in spec or os.sep in spec


def read_plugin(spec: str | Plugin, field: str = FLAG) -> Plugin:
    """The Plugin for a command-line spec: a file is read now (so it can be shipped)."""
    if isinstance(spec, Plugin):
        return spec
    if not isinstance(spec, str) or not spec.strip():
        raise InputError(field, spec, "expected a FILE.py or a module name")
    spec = spec.strip()
    if not is_file_spec(spec):
        return Plugin(spec)
    path = Path(spec).expanduser()
    if not path.is_file():
        raise InputError(field, spec, "no such file")
    try:
        source = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(field, spec, f"cannot read ({_one_line(exc)})") from None
    return Plugin(spec, source, str(path.resolve()))


def load_plugins(specs: Iterable[str | Plugin], field: str = FLAG) -> list[Plugin]:
    """Read and load every plugin (in order); returns them ready to ship to other processes."""
    out = []
    for spec in specs:
        plugin = read_plugin(spec, field)
        load(plugin, field)
        out.append(plugin)
    return out


def load(plugin: str | Plugin, field: str = FLAG) -> tuple[str, ...]:
    """Load one plugin; the policy names it registered. InputError (naming the plugin) when
    it cannot be read, fails to import, or registers no policy."""
    from .registry import REGISTRY

    plugin = read_plugin(plugin, field)
    ident = plugin.identity()
    if ident in REGISTRY.plugins:    # plugin identity -> the names it registered: loading it again is a no-op
        return REGISTRY.plugins[ident]
    REGISTRY.load_deferred()   # first, so that a plugin may replace an installed policy and stay replaced
    before = REGISTRY.state()
    try:
        if plugin.is_file:
            module = _exec_file(plugin)
        else:
            already = plugin.spec in sys.modules
            module = importlib.import_module(plugin.spec)
    except (Exception, SystemExit) as exc:  # a user's code failing is bad input, not a crash
        REGISTRY.restore(before)
        raise InputError(field, plugin.spec, _import_failure(plugin, exc)) from None
    names = REGISTRY.since(before)
    if not names and not plugin.is_file and already:
        names = REGISTRY.defined_in(module.__name__)   # imported before, outside this loader
    if not names:
        raise InputError(field, plugin.spec, "registers no policy (decorate a function with "
                                             "@gavel_ng.policy(\"NAME\", ...), or a round policy (a function of "
                                             "the round context, or a class with decide(ctx)) with "
                                             "@gavel_ng.round_policy(\"NAME\", ...))")
    _warn_replaced(before, names, plugin.spec)
    REGISTRY.plugins[ident] = names
    log.info("plugin %s: %s", plugin.spec, ", ".join(names))
    return names


def load_entry_points() -> list[str]:
    """Import every installed entry point of the group `gavel_ng.policies`; a broken one is
    logged as one warning naming it and skipped. Returns the policy names they registered."""
    from importlib.metadata import entry_points

    from .registry import REGISTRY

    try:
        eps = list(entry_points(group=ENTRY_POINT_GROUP))
    except Exception as exc:  # noqa: BLE001 - broken metadata must not break the registry
        log.warning("cannot read the %s entry points: %s", ENTRY_POINT_GROUP, _one_line(exc))
        return []
    names: list[str] = []
    for ep in eps:
        ident = ("entry_point", ep.name, ep.value)
        if ident in REGISTRY.plugins:
            names += REGISTRY.plugins[ident]
            continue
        before = REGISTRY.state()
        module = ep.value.partition(":")[0].strip()
        already = module in sys.modules
        try:
            ep.load()
        except (Exception, SystemExit) as exc:
            REGISTRY.restore(before)
            REGISTRY.plugins[ident] = ()
            log.warning("policy entry point %s = %s (%s) failed to load, its policies are left out: %s: %s",
                        ep.name, ep.value, _distribution(ep), type(exc).__name__, _one_line(exc))
            continue
        new = REGISTRY.since(before) or (REGISTRY.defined_in(module) if already else ())
        if not new:
            log.warning("policy entry point %s = %s (%s) registers no policy", ep.name, ep.value, _distribution(ep))
        REGISTRY.plugins[ident] = new
        names += new
    return names


def add_flag(parser, what: str = "running") -> None:
    """The `--plugin` flag of every command that resolves policies by name."""
    parser.add_argument(FLAG, action="append", default=[], metavar="FILE.py|MODULE",
                        help=f"import user policies (a file or a module that registers them with "
                             f"@gavel_ng.policy or @gavel_ng.round_policy) before {what}; repeatable")


# ----- internals -------------------------------------------------------------------------------

def _digest(plugin: Plugin) -> str:
    text = f"{plugin.origin or plugin.spec}\0{plugin.source}"
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:12]


def _module_name(plugin: Plugin) -> str:
    stem = re.sub(r"\W", "_", Path(plugin.origin or plugin.spec).stem) or "plugin"
    return f"gavel_ng_plugin_{stem}_{_digest(plugin)}"


def _exec_file(plugin: Plugin) -> types.ModuleType:
    """Execute a file's shipped text as a fresh module (registered in sys.modules while it
    runs, as an import would, so dataclasses and pickling inside it work)."""
    origin = plugin.origin or plugin.spec
    name = _module_name(plugin)
    module = types.ModuleType(name)
    module.__file__ = origin
    module.__spec__ = importlib.util.spec_from_loader(name, loader=None, origin=origin)
    # tracebacks show the plugin's lines even where the file does not exist (a Ray worker)
    linecache.cache[origin] = (len(plugin.source), None, plugin.source.splitlines(True), origin)
    sys.modules[name] = module
    try:
        exec(compile(plugin.source, origin, "exec"), module.__dict__)
    except BaseException:
        sys.modules.pop(name, None)
        raise
    return module


def _import_failure(plugin: Plugin, exc: BaseException) -> str:
    if isinstance(exc, SyntaxError) and plugin.is_file:
        return f"syntax error at line {exc.lineno}: {exc.msg}"
    if isinstance(exc, ModuleNotFoundError) and not plugin.is_file and exc.name and \
            (plugin.spec == exc.name or plugin.spec.startswith(exc.name + ".")):
        return (f"no module named {exc.name!r} (a file needs its .py suffix; a module must be installed or "
                "on PYTHONPATH)")
    where = ""
    origin = plugin.origin if plugin.is_file else None
    tb, line = exc.__traceback__, None
    while tb is not None:
        if origin is not None and tb.tb_frame.f_code.co_filename == origin:
            line = tb.tb_lineno
        tb = tb.tb_next
    if line is not None:
        where = f" at line {line}"
    return f"failed to import{where}: {type(exc).__name__}: {_one_line(exc)}"


def _one_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    return text if len(text) <= 300 else text[:297] + "..."


def _warn_replaced(state: tuple[dict, dict, dict], names: tuple[str, ...], spec: str) -> None:
    specs = state[0]
    replaced = [n for n in names if n in specs and not specs[n].agnostic]
    if replaced:
        log.warning("plugin %s replaces the policies %s", spec, ", ".join(replaced))


def _distribution(ep) -> str:
    dist = getattr(ep, "dist", None)
    return f"from {dist.name} {dist.version}" if dist is not None else "unknown distribution"
