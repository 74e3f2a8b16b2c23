"""Errors that reach users: each names the offending field and value."""

from __future__ import annotations

import json
from pathlib import Path


class InputError(ValueError):
    """Bad user input. The CLI prints it as one line and exits with status 2."""

    def __init__(self, field: str, value: object, reason: str):
        self.field = field
        self.value = value
        self.reason = reason
        super().__init__(f"{field}={value!r}: {reason}")


def require(cond: bool, field: str, value: object, reason: str) -> None:
    """Raise InputError unless cond holds."""
    if not cond:
        raise InputError(field, value, reason)


def read_json(path: str | Path, field: str):
    """A JSON file's content; a missing file or bad JSON is an InputError naming `field` and the path."""
    path = Path(path)
    try:
        text = path.read_text()
    except OSError as exc:
        raise InputError(field, str(path), f"cannot read ({exc.strerror})") from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise InputError(field, str(path), f"not JSON (line {exc.lineno}, column {exc.colno}: {exc.msg})") from None


class PolicyError(InputError):
    """An error in a policy's own code or formulation: it raised, returned something that is not an
    objective, stated a problem no solver takes (not DCP) or one with no solution (its constraints
    contradict each other), or chose GPUs that do not exist. It stops that policy's run: the CLI
    prints one line naming the policy, the file:line of its code and the error, and exits with
    status 2; a sweep marks the point failed with that line. A solver's numerical failure on a valid
    formulation is not one: it falls back to a valid allocation and is counted (solver_fallbacks)."""

    def __init__(self, policy: str, where: str, error: str):
        self.policy = policy
        self.where = where          # FILE:LINE of the policy's code ("" when unknown)
        self.error = " ".join(str(error).split())
        super().__init__("policy", policy, f"failed{f' at {where}' if where else ''}: {self.error}")
