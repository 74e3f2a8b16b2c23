"""A scheduler and workers as local processes, for the benchmarks that drive a real cluster.

    with LocalProcesses(root) as procs:
        port = procs.start("scheduler", ["scheduler", "--cluster-config", "cluster.json", ...])
        procs.start("worker-v100", ["worker", "--scheduler", f"127.0.0.1:{port}", ...])

Each process logs to ROOT/NAME.log; `start` returns the port it printed ("... listening on
HOST:PORT"). All are stopped on exit (SIGTERM, then SIGKILL), workers before the scheduler.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

ENV = {**os.environ, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "PYTHONUNBUFFERED": "1"}


class LocalProcesses:
    def __init__(self, root: Path, env: dict[str, str] | None = None):
        self.root, self.env = root, env or ENV
        self.procs: list[subprocess.Popen] = []

    def __enter__(self) -> LocalProcesses:
        return self

    def __exit__(self, *exc) -> None:
        for p in self.procs[::-1]:
            p.send_signal(signal.SIGTERM)
            try:
                p.wait(10)
            except subprocess.TimeoutExpired:
                p.kill()

    def start(self, name: str, args: list[str], timeout: float = 60.0) -> int:
        log = self.root / f"{name}.log"
        with open(log, "ab") as out:
            proc = subprocess.Popen([sys.executable, "-m", "gavel_ng", *args], stdout=out,
                                    stderr=subprocess.STDOUT, env=self.env, cwd=self.root)
        self.procs.append(proc)
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            m = re.search(r"listening on \S+:(\d+)\s*$", log.read_text(), re.M)
            if m:
                return int(m[1])
            if proc.poll() is not None:
                raise RuntimeError(f"{name} exited:\n{log.read_text()}")
            time.sleep(0.05)
        raise TimeoutError(f"{name} printed no port in {timeout:g} s ({log})")
