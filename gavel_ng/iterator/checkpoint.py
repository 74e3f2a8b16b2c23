"""Atomic checkpoint directories: the job's progress is whatever the last committed one says.

The user's save_checkpoint writes into a fresh temporary directory; the iterator adds a
small `gavel.json` (the step) and renames the directory into place. A job killed while
saving leaves only a temporary directory, never a half-written checkpoint, so the step
recorded and the weights always agree.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import time
from pathlib import Path

log = logging.getLogger(__name__)
META = "gavel.json"
PREFIX = "ckpt-"
KEEP = 2


def checkpoint_path(root: Path, step: int) -> Path:
    return root / f"{PREFIX}{step:012d}"


def latest(root: Path | None) -> tuple[int, Path] | None:
    """(step, path) of the newest committed checkpoint under root, or None."""
    if root is None or not root.is_dir():
        return None
    best = None
    for p in root.iterdir():
        if p.name.startswith(PREFIX) and (p / META).is_file():
            try:
                step = int(json.loads((p / META).read_text())["step"])
            except (OSError, ValueError, KeyError):
                continue
            if best is None or step > best[0]:
                best = (step, p)
    return best


def begin(root: Path, step: int) -> Path:
    """A fresh directory for the user's save_checkpoint to write into."""
    root.mkdir(parents=True, exist_ok=True)
    tmp = root / f".tmp-{step}-{os.getpid()}-{time.monotonic_ns()}"
    tmp.mkdir()
    return tmp


def commit(root: Path, tmp: Path, step: int, extra: dict | None = None) -> Path:
    """Make `tmp` the checkpoint of `step` in one rename; prune old ones."""
    (tmp / META).write_text(json.dumps({"step": step, "time": time.time(), **(extra or {})}))
    final = checkpoint_path(root, step)
    if final.exists():                      # a re-run of the same step (e.g. after a lost report)
        shutil.rmtree(final, ignore_errors=True)
    os.replace(tmp, final)
    _fsync_dir(root)
    prune(root, keep=KEEP)
    return final


def prune(root: Path, keep: int = KEEP) -> None:
    done = sorted((p for p in root.iterdir() if p.name.startswith(PREFIX) and (p / META).is_file()),
                  key=lambda p: p.name)
    for p in done[:-keep]:
        shutil.rmtree(p, ignore_errors=True)
    for p in root.iterdir():
        if p.name.startswith(".tmp-") and time.time() - p.stat().st_mtime > 3600:
            shutil.rmtree(p, ignore_errors=True)


def _fsync_dir(path: Path) -> None:
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)
