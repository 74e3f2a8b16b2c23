"""Logs a person can read: a warning that repeats is logged once, then counted.

A long simulation re-solves its policy thousands of times, and a policy that cannot meet
some SLO says so at every solve; a scheduler says it every round. While
`collapse_repeats()` is active, the first warning of each *kind* reaches the usual
handlers and later ones are only counted in a `WarningLedger`, together with the jobs
they concern; `ledger.summary()` lists every kind with its count (the simulator puts it
in the run's summary). With `WarningLedger(reemit_after=S)` a kind is logged again once
S seconds passed since it last was, saying how many were held back (for services that
run for days).

A record's kind is its `extra={"kind": ...}` if given, else its message template
(`record.msg` before %-formatting), so `log.warning("job %d crashed", 7)` and
`log.warning("job %d crashed", 9)` are one kind; log with %-arguments, not f-strings, or
pass a kind. The jobs come from `extra={"jobs": [...]}`, never from the text.

Only records of the `gavel_ng` loggers at WARNING and above are collapsed; the rest pass
through untouched. Implementation: while active, a handler on the `gavel_ng` logger
receives its records (propagation stopped) and hands on those to be shown to the root
logger, whose handlers (or logging's last resort) write them as before.
"""

from __future__ import annotations

import contextlib
import logging
import re
import threading
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from datetime import datetime

ROOT = "gavel_ng"
_PLACEHOLDER = re.compile(r"%(?:\([^)]*\))?[-#0 +]*(?:\d+|\*)?(?:\.\d+)?[diouxXeEfFgGcrsa]")


def kind_of(record: logging.LogRecord) -> str:
    """The stable key of a record: its explicit `kind`, else its message template."""
    kind = getattr(record, "kind", None)
    return str(kind) if kind else str(record.msg)


def readable(kind: str) -> str:
    """A message template with its placeholders shown as '...' (for people, not for keys)."""
    return _PLACEHOLDER.sub("...", kind).replace("%%", "%")


@dataclass
class WarningKind:
    """What the ledger knows of one kind of warning."""

    kind: str
    logger: str
    level: str
    first: str                                   # the first message of this kind, formatted
    count: int = 0
    jobs: dict = field(default_factory=dict)     # an ordered set of job ids
    held_back: int = 0                           # counted but not logged since it was last logged
    last_logged: float = 0.0

    def as_dict(self) -> dict:
        return {"kind": self.kind, "message": readable(self.kind), "count": self.count,
                "jobs": sorted(self.jobs, key=_job_order), "first": self.first, "logger": self.logger,
                "level": self.level}


class WarningLedger:
    """Counts warnings by kind; decides which ones are logged (`note`)."""

    def __init__(self, reemit_after: float | None = None, level: int = logging.WARNING, clock=time.monotonic):
        self.reemit_after = reemit_after
        self.level = level
        self.clock = clock
        self.kinds: dict[str, WarningKind] = {}
        self._lock = threading.Lock()

    def note(self, record: logging.LogRecord) -> logging.LogRecord | None:
        """Count a record; the record to log (possibly annotated) or None to hold it back."""
        if record.levelno < self.level:
            return record
        kind = kind_of(record)
        jobs = getattr(record, "jobs", None)
        now = self.clock()
        with self._lock:
            entry = self.kinds.get(kind)
            if entry is None:
                entry = self.kinds[kind] = WarningKind(kind, record.name, record.levelname, _message(record),
                                                       last_logged=now)
            entry.count += 1
            for j in _as_list(jobs) if jobs is not None else ():
                entry.jobs[j] = None
            if entry.count == 1:
                return record
            if self.reemit_after is None or now - entry.last_logged < self.reemit_after:
                entry.held_back += 1
                return None
            held, entry.held_back, entry.last_logged = entry.held_back, 0, now
        again = logging.makeLogRecord(record.__dict__)
        again.msg, again.args = f"{_message(record)} (and {held} more like it since it was last logged)", None
        return again

    @property
    def repeated(self) -> int:
        """Warnings beyond the first of their kind (held back, or logged again after `reemit_after`)."""
        return sum(k.count for k in self.kinds.values()) - len(self.kinds)

    def summary(self) -> list[dict]:
        """One dict per kind, most frequent first: kind, message, count, jobs, first, logger, level."""
        return [k.as_dict() for k in sorted(self.kinds.values(), key=lambda k: -k.count)]


def format_warnings(summary: Iterable[dict], max_jobs: int = 12, indent: str = "  ") -> list[str]:
    """Text lines for a ledger summary: count, readable message and the jobs concerned."""
    lines = []
    for w in summary:
        jobs = list(w.get("jobs") or ())
        shown = ", ".join(str(j) for j in jobs[:max_jobs])
        if len(jobs) > max_jobs:
            shown += f", ... ({len(jobs)} jobs)"
        tail = f"  [job{'s' if len(jobs) > 1 else ''} {shown}]" if jobs else ""
        lines.append(f"{indent}{w['count']:>6} x {w['message']}{tail}")
    return lines


class _LedgerHandler(logging.Handler):
    """Sits on the `gavel_ng` logger while ledgers are active; forwards what they let through."""

    def __init__(self, logger: logging.Logger):
        super().__init__()
        self.logger = logger
        self.ledgers: list[WarningLedger] = []

    def handle(self, record: logging.LogRecord) -> bool:   # no handler lock: ledgers lock themselves
        shown: logging.LogRecord | None = record
        for ledger in list(self.ledgers):                  # every active ledger counts; the innermost decides
            shown = ledger.note(record)
        if shown is not None:
            parent = self.logger.parent
            if parent is not None:
                parent.handle(shown)
        return shown is not None

    def emit(self, record: logging.LogRecord) -> None:   # pragma: no cover - handle() does the work
        self.handle(record)


_install_lock = threading.Lock()
_handler: _LedgerHandler | None = None
_saved_propagate = True


@contextlib.contextmanager
def collapse_repeats(ledger: WarningLedger | None = None) -> Iterator[WarningLedger]:
    """While active, repeated warnings of the gavel_ng loggers are counted in `ledger`, not logged.

    Nests: every active ledger counts every warning; the innermost decides what is logged."""
    global _handler, _saved_propagate
    ledger = ledger if ledger is not None else WarningLedger()
    logger = logging.getLogger(ROOT)
    with _install_lock:
        if _handler is None:
            _handler = _LedgerHandler(logger)
            _saved_propagate = logger.propagate
            logger.addHandler(_handler)
            logger.propagate = False
        _handler.ledgers.append(ledger)
    try:
        yield ledger
    finally:
        with _install_lock:
            _handler.ledgers.remove(ledger)
            if not _handler.ledgers:
                logger.removeHandler(_handler)
                logger.propagate = _saved_propagate
                _handler = None


class IsoFormatter(logging.Formatter):
    """Log lines that start with an ISO 8601 time in local time with its offset, to the millisecond
    (2026-11-24T10:15:02.431+01:00): what a service's log needs to be read beside other logs."""

    def formatTime(self, record: logging.LogRecord, datefmt: str | None = None) -> str:
        return datetime.fromtimestamp(record.created).astimezone().isoformat(timespec="milliseconds")


def _message(record: logging.LogRecord) -> str:
    try:
        return record.getMessage()
    except Exception:  # a bad format string must not break logging
        return str(record.msg)


def _as_list(jobs) -> list:
    if isinstance(jobs, (str, int)) or hasattr(jobs, "item") and not hasattr(jobs, "__len__"):
        jobs = [jobs]
    return [j.item() if hasattr(j, "item") else j for j in jobs]   # numpy scalars -> int/float (JSON)


def _job_order(job) -> tuple:
    s = str(job)
    return (0, int(s), "") if s.lstrip("-").isdigit() else (1, 0, s)
