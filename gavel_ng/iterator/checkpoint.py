"""Atomic checkpoint directories: the job's progress is whatever the newest committed one says.

The user's save_checkpoint writes into a fresh temporary directory; the iterator adds a
small `gavel.json` (the step) and renames the directory into place. A job killed while
saving leaves only a temporary directory, never a half-written checkpoint, so the step
recorded and the weights always agree.

Each attempt commits under its own name, `ckpt-{step:012d}-a{attempt}`, so two attempts
of a job (a written-off one still running beside its relaunch) never write the same
files; the newest committed one wins (highest step, ties: highest attempt). Directories
named `ckpt-{step:012d}` (attempt 0: standalone runs, older versions) are read alike.

Under a worker a job has an identity (its scheduler state's id and its job id) and every
checkpoint it commits records it; it restores only checkpoints that carry it. One that does
not (another job's, planted, or left by a job of a lost state that had the same number) is
refused and said in the job's log.
"""

from __future__ import annotations

import json
import logging
import os
import re
import shutil
import time
from pathlib import Path

log = logging.getLogger(__name__)
META = "gavel.json"
PREFIX = "ckpt-"
KEEP = 2
_NAME = re.compile(r"^ckpt-(\d+)(?:-a(\d+))?$")


def checkpoint_path(root: Path, step: int, attempt: int = 0) -> Path:
    return root / (f"{PREFIX}{step:012d}-a{attempt}" if attempt else f"{PREFIX}{step:012d}")


def _key(p: Path) -> tuple[int, int] | None:
    """(step, attempt) of a committed checkpoint directory, None for anything else."""
    m = _NAME.match(p.name)
    if m is None or not (p / META).is_file():
        return None
    return int(m[1]), int(m[2] or 0)


def committed(root: Path | None) -> list[tuple[int, int, Path]]:
    """(step, attempt, path) of every committed checkpoint under root, oldest first."""
    if root is None or not root.is_dir():
        return []
    out = [(*k, p) for p in root.iterdir() if (k := _key(p)) is not None]
    return sorted(out, key=lambda x: x[:2])


def latest(root: Path | None, identity: str = "") -> tuple[int, Path] | None:
    """(step, path) of the newest committed checkpoint under root that is this job's (`identity`: its
    identity, which the checkpoint must record; "" : any), or None."""
    for step, _, path in reversed(committed(root)):
        if not identity:
            return step, path
        theirs = identity_of(path)
        if theirs == identity:
            return step, path
        log.warning("refused checkpoint %s: it belongs to %s, not to this job (%s)", path,
                    f"job {theirs}" if theirs else "no job (it records no identity)", identity)
    return None


def identity_of(path: Path) -> str:
    """The identity a committed checkpoint records ("" : none)."""
    try:
        value = json.loads((Path(path) / META).read_text()).get("identity", "")
    except (OSError, ValueError, AttributeError):
        return ""
    return value if isinstance(value, str) else ""


def step_of(path: Path) -> int:
    """The step a checkpoint directory holds (for load_checkpoint callbacks)."""
    return int(json.loads((Path(path) / META).read_text())["step"])


def attempt_of(path: Path) -> int:
    m = _NAME.match(Path(path).name)
    return int(m[2] or 0) if m else 0


def begin(root: Path, step: int, attempt: int = 0) -> Path:
    """A fresh directory for the user's save_checkpoint to write into."""
    root.mkdir(parents=True, exist_ok=True)
    tmp = root / f".tmp-a{attempt}-{step}-{os.getpid()}-{time.monotonic_ns()}"
    tmp.mkdir()
    return tmp


def commit(root: Path, tmp: Path, step: int, extra: dict | None = None, attempt: int = 0, identity: str = "") -> Path:
    """Make `tmp` this attempt's checkpoint of `step` in one rename; prune old ones."""
    meta = {"step": step, "attempt": attempt, "time": time.time(), **({"identity": identity} if identity else {}),
            **(extra or {})}
    (tmp / META).write_text(json.dumps(meta))
    final = checkpoint_path(root, step, attempt)
    if final.exists():                      # this attempt re-ran the same step (e.g. after a lost report)
        shutil.rmtree(final, ignore_errors=True)
    os.replace(tmp, final)
    _fsync_dir(root)
    prune(root, keep=KEEP, identity=identity)
    return final


def prune(root: Path, keep: int = KEEP, identity: str = "") -> None:
    """Remove all but the `keep` newest committed checkpoints (of this job's, with `identity`). Only
    committed directories and temporary ones untouched for an hour go: another attempt's save in
    progress is neither."""
    done = [c for c in committed(root) if not identity or identity_of(c[2]) == identity]
    for _, _, p in done[:-max(keep, 1)]:
        shutil.rmtree(p, ignore_errors=True)
    for p in root.iterdir():
        try:
            old = p.name.startswith(".tmp-") and time.time() - p.stat().st_mtime > 3600
        except OSError:                     # committed or removed meanwhile
            continue
        if old:
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
