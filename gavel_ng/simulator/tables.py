"""Where a simulation's throughput table comes from when none is given."""

from __future__ import annotations

import logging

from ..errors import InputError
from ..throughputs import ThroughputTable

log = logging.getLogger(__name__)


def default_table(worker_types: list[str]) -> ThroughputTable:
    """The project's built-in (modeled) table, once gavel_ng.profiles provides one.

    Until then, a clear InputError asks for --throughputs.
    """
    try:
        from ..profiles import default_table as modeled
    except ImportError as exc:
        log.debug("no built-in table: %s", exc)
        raise InputError("--throughputs", None, "no built-in throughput table is available yet; "
                         "pass --throughputs gavel-osdi20 (or a .json/.csv table)") from None
    return modeled(list(worker_types))
