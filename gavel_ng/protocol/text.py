"""What text a job may carry: nothing that cannot run, nothing that reaches a terminal.

A NUL byte cannot be passed to a process (execve ends a string at it), and control characters
(escape sequences above all) in a name would reach an operator's terminal through `status`,
`logs` and the scheduler's log. Names allow no control character; argv entries and environment
values allow tab, newline and carriage return (a multi-line value is legitimate). The scheduler
checks a job at submission (protocol.jobspec); a worker checks what it is asked to run again
(worker.daemon), for a job stored before these checks.
"""

from __future__ import annotations

import re

_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")
_CONTROL_IN_VALUES = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f]")


def bad_character(value: str, in_value: bool = False) -> str:
    """Why `value` cannot be carried ("" : it can): the first control character it holds."""
    m = (_CONTROL_IN_VALUES if in_value else _CONTROL).search(value)
    if m is None:
        return ""
    what = "a process cannot be given it" if m[0] == "\0" else "not allowed"
    return f"holds the control character U+{ord(m[0]):04X}: {what}"


def unrunnable(argv, env: dict, working_dir: str) -> tuple[str, str, str]:
    """(field, value, why) of the first argv entry, environment name or value, or working directory that cannot
    be carried; ("", "", "") when all can."""
    for field, value, in_value in [*((f"command[{i}]", a, True) for i, a in enumerate(argv)),
                                   *((f"env.{k!r}", k, False) for k in env),
                                   *((f"env.{k}", v, True) for k, v in env.items()),
                                   ("working_dir", working_dir, False)]:
        why = bad_character(value, in_value)
        if why:
            return field, value, why
    return "", "", ""
