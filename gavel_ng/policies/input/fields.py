"""What a policy may read, said when it reads something else.

A policy gets a `Problem` (`p`, with `p.input`: SchedulingProblem) or a `RoundContext`
(`ctx`); a wrong guess at a name was a bare AttributeError deep in a traceback. The three
classes take `Fields`, whose `__getattr__` (called only when normal lookup fails) lists
what exists; `call_policy` turns an error raised inside a user's policy (a plugin: code outside
the package) into a PolicyError naming the policy and the plugin's line.
"""

from __future__ import annotations

import difflib
import functools
import inspect
import logging

from ...errors import InputError, PolicyError

log = logging.getLogger(__name__)


class Fields:
    """A mixin: reading a missing attribute raises an AttributeError that lists the public ones."""

    __slots__ = ()
    _FIELDS_LABEL = ""   # how the message names the object ("p", "p.input", "ctx")

    def __getattr__(self, name: str):
        if name.startswith("_"):   # protocol probes (copy, pickle) and private hasattr checks: cheap and silent
            raise AttributeError(name)
        cls = type(self)
        if any(name in vars(k) for k in cls.__mro__):
            # a property or cached_property that raised AttributeError inside: run it again so that its
            # own error (the one that matters) propagates instead of "no such field"
            return object.__getattribute__(self, name)
        raise AttributeError(missing_field(self, name), name=name, obj=self)


def public_names(obj) -> list[str]:
    """Fields, properties and methods of `obj` a policy may use (no leading underscore)."""
    names = set()
    for k in type(obj).__mro__:
        if k is object:
            continue
        names.update(n for n in vars(k) if not n.startswith("_"))
    names.update(n for n in getattr(obj, "__dict__", {}) if not n.startswith("_"))
    return sorted(names)


def missing_field(obj, name: str) -> str:
    label = getattr(type(obj), "_FIELDS_LABEL", "") or type(obj).__name__
    names = public_names(obj)
    close = difflib.get_close_matches(name, names, n=3)
    hint = f" (did you mean {', '.join(close)}?)" if close else ""
    return f"{label} ({type(obj).__name__}) has no {name!r}{hint}; it has: {', '.join(names)}"


def _target(fn):
    """The function behind a bound method, partial or class (its module says whose code it is)."""
    while True:
        if isinstance(fn, functools.partial):
            fn = fn.func
        elif inspect.ismethod(fn):
            fn = fn.__func__
        else:
            return fn


def is_user_code(fn) -> bool:
    """Whether `fn` comes from outside the package (a plugin, an entry point, a user's script)."""
    module = getattr(_target(fn), "__module__", None) or ""
    return not (module == "gavel_ng" or module.startswith("gavel_ng."))


def call_policy(name: str, fn, *args):
    """`fn(*args)`, the policy's own code: an exception raised inside a user's policy (a plugin), or an
    InputError inside a built-in one (a deliberate refusal, e.g. no prices), becomes a PolicyError naming
    the policy and the line of its code that raised, instead of a traceback or a silent fallback. Any
    other exception inside the package's own policies is a bug of ours and propagates as it is."""
    try:
        return fn(*args)
    except PolicyError:
        raise
    except Exception as exc:
        if not (is_user_code(fn) or isinstance(exc, InputError)):
            raise
        log.debug("policy %s raised", name, exc_info=True)   # -vv: the whole traceback, for its author
        text = " ".join(str(exc).split())
        error = text if isinstance(exc, (AttributeError, InputError)) else f"{type(exc).__name__}: {text}"
        raise PolicyError(name, _where(exc, fn) or defined_at(fn), error) from None


def _code(fn):
    code = getattr(_target(fn), "__code__", None)
    if code is None:   # a class: its decide method's file
        code = getattr(getattr(_target(fn), "decide", None), "__code__", None)
    return code


def defined_at(fn) -> str:
    """`FILE:LINE` where the policy's function (or class's decide) is defined ("" if unknown): where a
    formulation error (a wrong return value, a non-DCP objective, contradicting constraints) points."""
    code = _code(fn)
    return f"{code.co_filename}:{code.co_firstlineno}" if code is not None else ""


def _where(exc: BaseException, fn) -> str:
    """`FILE:LINE`: the last frame of the policy's own file in the traceback ("" if none)."""
    code = _code(fn)
    if code is None:
        return ""
    line, tb = None, exc.__traceback__
    while tb is not None:
        if tb.tb_frame.f_code.co_filename == code.co_filename:
            line = tb.tb_lineno
        tb = tb.tb_next
    return f"{code.co_filename}:{line}" if line is not None else ""
