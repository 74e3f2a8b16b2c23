"""Job processes: environment, launch, and stopping whole process groups.

Each rank runs in its own session (so a kill reaches its data-loader children too) and
dies with the worker daemon: a tiny exec wrapper sets PR_SET_PDEATHSIG before exec'ing
the job, so a worker lost to `kill -9` or a crash leaves no job writing checkpoints
behind the scheduler's back. (Python's preexec_fn is not safe in a threaded daemon.)
A job that runs as its user's account (worker.isolation) changes account before the
wrapper runs, so the wrapper's PR_SET_PDEATHSIG (which a change of account clears) holds,
and it enters the job's working directory as that user.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import signal
import socket
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

log = logging.getLogger(__name__)

_EXEC_WITH_PARENT = (
    "import ctypes, os, signal, sys\n"
    "try:\n"
    "    ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)\n"
    "except Exception:\n"
    "    pass\n"
    "if os.getppid() != int(sys.argv[1]):\n"
    "    os._exit(137)\n"
    "if sys.argv[2]:\n"
    "    try:\n"
    "        os.chdir(sys.argv[2])\n"
    "    except OSError as exc:\n"
    "        sys.stderr.write(f'gavel-ng worker: cannot enter working_dir {sys.argv[2]!r}: {exc.strerror}\\n')\n"
    "        os._exit(127)\n"
    "try:\n"
    "    os.execvpe(sys.argv[3], sys.argv[3:], os.environ)\n"
    "except OSError as exc:\n"
    "    sys.stderr.write(f'gavel-ng worker: cannot run {sys.argv[3]!r}: {exc.strerror or exc}\\n')\n"
    "    os._exit(127)\n"
)
NOT_RUN = 127            # exit status of a command that could not be started (as a shell says it)


@dataclass
class RankResult:
    """What the iterator wrote when its rank ended (see gavel_ng.iterator)."""

    step: int = -1
    done: bool = False
    steps_run: int = 0
    compute_seconds: float = 0.0

    @classmethod
    def parse(cls, text: bytes | None) -> RankResult | None:
        """From the file's bytes (None: it could not be read); None unless it is the iterator's record."""
        try:
            data = json.loads(text)
            return cls(int(data["step"]), bool(data["done"]), int(data["steps_run"]), float(data["compute_seconds"]))
        except (ValueError, KeyError, TypeError, OverflowError):
            return None


def launch_problem(argv: list[str], cwd: str | None, path_env: str | None) -> str:
    """Why argv cannot start in cwd on this machine ("" : nothing found wrong): said once, in the
    job's log and to the scheduler, instead of a relaunch loop or a traceback from the exec wrapper."""
    if cwd and not os.path.isdir(cwd):
        what = "is not a directory" if os.path.exists(cwd) else "does not exist"
        return f"working_dir {cwd!r} {what} on {socket.gethostname()}"
    if not argv:
        return "no command"
    exe = argv[0]
    if os.sep in exe:
        path = os.path.join(cwd or os.getcwd(), exe)
        if not os.path.exists(path):
            return f"command {exe!r} not found (no such file{' in ' + cwd if cwd else ''})"
        if not os.access(path, os.X_OK) or os.path.isdir(path):
            return f"command {exe!r} is not an executable file"
        return ""
    if shutil.which(exe, path=path_env) is None:
        return f"command {exe!r} not found on the worker's PATH ({path_env or ''})"
    return ""


def log_tail(data: bytes | None, limit: int = 300) -> str:
    """The last non-empty line of a job's log (a crash's last words, the log's last bytes), clipped."""
    lines = [x.strip() for x in (data or b"").decode("utf-8", "replace").splitlines() if x.strip()]
    line = lines[-1] if lines else ""
    return line if len(line) <= limit else line[:limit - 3] + "..."


def builtin_command(job_type: str, size: str, python: str = sys.executable) -> list[str]:
    return [python, "-m", "gavel_ng.worker.run_job", "--job-type", job_type, "--size", size or "full"]


def spawn(argv: list[str], env: dict[str, str], cwd: str | None, log_fd: int, account: dict | None = None
          ) -> subprocess.Popen:
    """Start argv in a new session, tied to this process's life, as `account` (RunAs.popen_args; None: ours),
    owner-only files by default; output to the open log `log_fd` (the caller closes it)."""
    return subprocess.Popen(wrapped_argv(argv, cwd), env=env, stdout=log_fd, stderr=subprocess.STDOUT,
                            stdin=subprocess.DEVNULL, start_new_session=True, close_fds=True, umask=0o077,
                            **(account or {}))


def wrapped_argv(argv: list[str], cwd: str | None = None) -> list[str]:
    """argv behind the exec wrapper that ties the process's life to ours (and enters `cwd`)."""
    return [sys.executable, "-c", _EXEC_WITH_PARENT, str(os.getpid()), cwd or "", *argv]


def signal_group(proc: subprocess.Popen, sig: int = signal.SIGTERM) -> None:
    try:
        os.killpg(proc.pid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket() as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def clear_stale_rendezvous(dist_init: str, attempt: int) -> list[Path]:
    """Delete the rendezvous files of the job's earlier attempts; returns what was deleted.

    torch's FileStore removes its file once every rank closed it cleanly, so a rank killed
    mid-run (its worker lost, a lease overrun) leaves it in the checkpoint directory. The
    scheduler names them `<stem>-<attempt>`; an earlier attempt is over by the time a later
    one starts (a straggler of a lost one loses its store, which only ends it sooner)."""
    if not dist_init.startswith("file://"):
        return []
    path = Path(dist_init[len("file://"):])
    stem, sep, _ = path.name.rpartition("-")
    if not sep or not path.parent.is_dir():
        return []
    removed = []
    for p in path.parent.glob(f"{stem}-*"):
        n = p.name[len(stem) + 1:]
        if n.isdigit() and int(n) < attempt and p.is_file():
            p.unlink(missing_ok=True)
            removed.append(p)
    return removed
