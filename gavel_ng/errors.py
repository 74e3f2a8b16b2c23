"""Errors that reach users: each names the offending field and value."""

from __future__ import annotations


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
