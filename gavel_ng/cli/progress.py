"""A progress bar for long simulations: window jobs done and simulated hours, on a terminal only.

Drawn by tqdm on stderr when stderr is a terminal, after the first second; nothing at all
when stderr is piped or redirected (logs, CI, `2> file`). While the bar is up, log lines
are written above it instead of through it.
"""

from __future__ import annotations

import contextlib
import sys


class SimulationProgress:
    """The simulator's `progress(now, done, total, active)` callback, drawing a tqdm bar."""

    def __init__(self, label: str = "", stream=None, delay: float = 1.0, enabled: bool = True,
                 mininterval: float = 0.5):
        self.stream = stream if stream is not None else sys.stderr
        self.label = label or "simulating"
        self.delay = delay
        self.mininterval = mininterval
        self.enabled = enabled and _is_terminal(self.stream)
        self.bar = None
        self._stack = contextlib.ExitStack()

    def __enter__(self) -> SimulationProgress:
        if self.enabled:
            from tqdm import tqdm
            from tqdm.contrib.logging import logging_redirect_tqdm

            self.bar = tqdm(total=None, desc=self.label, unit="job", file=self.stream, delay=self.delay,
                            mininterval=self.mininterval, leave=False, dynamic_ncols=True,
                            bar_format="{desc}: {n_fmt}/{total_fmt} window jobs done |{bar}| {elapsed}{postfix}")
            self._stack.enter_context(logging_redirect_tqdm())
        return self

    def __call__(self, now: float, done: int, total: int, active: int) -> None:
        bar = self.bar
        if bar is None:
            return
        if bar.total != total:
            bar.total = total
        bar.set_postfix_str(f"{now / 3600:,.1f} simulated hours, {active} active jobs", refresh=False)
        bar.update(done - bar.n)

    def __exit__(self, *exc) -> None:
        self._stack.close()
        if self.bar is not None:
            self.bar.close()
            self.bar = None


def _is_terminal(stream) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):   # no isatty, or a closed stream
        return False
