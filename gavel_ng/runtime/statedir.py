"""The scheduler's state directory: one scheduler at a time, private files, an identity, a backup.

- One scheduler: STATE/scheduler.lock is held with flock(2) while a scheduler runs on the
  directory. A second one refuses to start, naming the first (pid, host, port, since); the
  kernel releases the lock when its holder exits, however it exits (kill -9 included).
- Private: the database, the token and the backup are owner-only (0600). The directory is
  0711 when the checkpoint root lies inside it (jobs, as other users, pass through it to their
  directories but cannot list it), else 0700; a checkpoint root that holds the state or the
  token is refused, since jobs write under it.
- Identity: a random id made with the state (`state_id`); job directories carry it
  (records.job_dir), so a new state after a lost one never resumes another job's checkpoints.
- Damage: a state file SQLite finds damaged, or a row that does not parse, stops the scheduler
  with one line naming the file and the way back: STATE/gavel.sqlite.bak, a copy taken each
  time a scheduler started cleanly on the directory.
"""

from __future__ import annotations

import errno
import fcntl
import json
import os
import socket
import time
import uuid
from datetime import datetime
from pathlib import Path

from ..errors import InputError
from .records import DB_NAME, STATE_ID_KEY

LOCK_NAME = "scheduler.lock"
BACKUP_NAME = DB_NAME + ".bak"


class StateLock:
    """This process's hold on a state directory (released by release(), or by the kernel when it dies)."""

    def __init__(self, state_dir: Path):
        self.path = Path(state_dir) / LOCK_NAME
        Path(state_dir).mkdir(parents=True, exist_ok=True)
        self.fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        try:
            fcntl.flock(self.fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            holder = self._holder()
            os.close(self.fd)
            self.fd = -1
            if exc.errno not in (errno.EWOULDBLOCK, errno.EAGAIN):
                raise InputError("--state", str(state_dir), f"cannot lock {self.path} ({exc.strerror})") from None
            raise InputError("--state", str(state_dir), f"in use by another scheduler ({holder}); one scheduler per "
                                                        "state directory: stop that one first (its lock goes when it "
                                                        "exits, however it ends)") from None
        self.describe()

    def _holder(self) -> str:
        try:
            d = json.loads(Path(self.path).read_text() or "{}")
            since = datetime.fromtimestamp(float(d["since"])).astimezone().isoformat(timespec="seconds")
            where = f", serving {d['bind']}:{d['port']}" if d.get("port") else ""
            return f"pid {int(d['pid'])} on {d['host']}{where}, since {since}"
        except (OSError, ValueError, KeyError, TypeError):
            return "its pid is not recorded yet"

    def describe(self, bind: str = "", port: int = 0) -> None:
        """Say in the lock file who holds it, for the scheduler it refuses."""
        data = json.dumps({"pid": os.getpid(), "host": socket.gethostname(), "bind": bind, "port": port,
                           "since": time.time()}).encode()
        os.ftruncate(self.fd, 0)
        os.pwrite(self.fd, data, 0)

    def release(self) -> None:
        if self.fd >= 0:
            fcntl.flock(self.fd, fcntl.LOCK_UN)
            os.close(self.fd)
            self.fd = -1


def check_layout(state_dir: Path, checkpoint_root: Path, token_file: str | None) -> None:
    """Refuse a checkpoint root that holds the state or the token: every job writes under it."""
    root = checkpoint_root.resolve()
    for what, path in (("the state directory", state_dir), ("the token file", token_file)):
        if path is None:
            continue
        p = Path(path).resolve()
        if p == root or root in p.parents:
            raise InputError("cluster-config.checkpoint_root", str(checkpoint_root),
                             f"holds {what} ({p}): jobs write under the checkpoint root and could reach it; put "
                             "them apart")


def secure(state_dir: Path, checkpoint_root: Path) -> None:
    """The directory's mode: passable by jobs only when their checkpoints live inside it."""
    inside = state_dir.resolve() in checkpoint_root.resolve().parents
    os.chmod(state_dir, 0o711 if inside else 0o700)


def state_id(store) -> str:
    """The state's id, made on first use; "" for a state that holds jobs from before ids existed (its job
    directories keep their old names, `job-N`)."""
    sid = store.get_meta(STATE_ID_KEY)
    if sid is None:
        old = bool(store.job_counts())
        sid = "" if old else uuid.uuid4().hex[:12]
        store.set_meta(STATE_ID_KEY, sid)
    return sid


def damaged(state_dir: Path, what: str) -> InputError:
    """The one line a damaged state is told as: the file, what is wrong, and the way back."""
    db, bak = state_dir / DB_NAME, state_dir / BACKUP_NAME
    if bak.is_file():
        when = datetime.fromtimestamp(bak.stat().st_mtime).astimezone().isoformat(timespec="seconds")
        back = (f"restore the copy taken when a scheduler last started cleanly on it ({when}): "
                f"mv {bak} {db} (and remove {db}-wal, {db}-shm)")
    else:
        back = f"there is no backup ({BACKUP_NAME} is written at each clean start): try `sqlite3 {db} .recover`"
    return InputError("--state", str(state_dir), f"{db} is damaged ({what}); {back}; or move it away to start "
                                                 "empty (jobs, history and credentials are then lost)")
