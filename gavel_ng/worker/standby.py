"""Warm standby interpreters: job processes that have already imported torch.

Starting Python and importing torch takes seconds, which is most of what a preemption
costs a small job. The worker keeps a few interpreters that did those imports and wait
on stdin; a job whose command is `python -m MODULE ...` or `python SCRIPT.py ...` (with
the worker's own interpreter) runs in one of them: it receives its argv, environment,
working directory and log file, and then runs exactly as a fresh process would. Importing
torch initializes no GPU, so CUDA_VISIBLE_DEVICES set afterwards still applies. A job that runs
as its user's account (worker.isolation) gets it before anything of the job happens: the
interpreter changes account first (it started with only the allowlisted environment and holds
nothing of the worker's), then opens the log and enters the working directory as that user.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import subprocess
from pathlib import Path

from .proc import wrapped_argv

log = logging.getLogger(__name__)
# torch._dynamo: DistributedDataParallel imports it on every rank (about 1 s on a quiet machine)
PRELOAD = ("torch", "torch._dynamo", "gavel_ng.workloads", "gavel_ng.iterator", "gavel_ng.protocol.rpc")

_STANDBY = r"""
import ctypes, json, os, runpy, signal, stat, sys
parent = os.getppid()
for name in sys.argv[1:]:
    try:
        __import__(name)
    except Exception:
        pass
line = sys.stdin.readline()
if not line:
    os._exit(0)
job = json.loads(line)
if "uid" in job:
    os.setgroups(job["groups"])
    os.setgid(job["gid"])
    os.setuid(job["uid"])
    try:
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)   # a change of account clears it
    except Exception:
        pass
    if os.getppid() != parent:
        os._exit(137)
os.umask(0o077)
os.environ.clear()
os.environ.update(job["env"])
fd = os.open(job["log"], os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_NOFOLLOW | os.O_NONBLOCK, 0o600)
if not stat.S_ISREG(os.fstat(fd).st_mode):
    os._exit(126)
os.set_blocking(fd, True)
os.dup2(fd, 1)
os.dup2(fd, 2)
os.close(fd)
if job.get("cwd"):
    try:
        os.chdir(job["cwd"])
    except OSError as exc:
        sys.stderr.write(f"gavel-ng worker: cannot enter working_dir {job['cwd']!r}: {exc.strerror}\n")
        os._exit(127)
if os.environ.get("OMP_NUM_THREADS", "").isdigit() and "torch" in sys.modules:
    sys.modules["torch"].set_num_threads(int(os.environ["OMP_NUM_THREADS"]))
argv = job["argv"]
if argv[1] == "-m":
    sys.argv = [argv[2], *argv[3:]]
    runpy.run_module(argv[2], run_name="__main__", alter_sys=True)
else:
    sys.argv = argv[1:]
    sys.path.insert(0, os.path.dirname(os.path.abspath(argv[1])))
    runpy.run_path(argv[1], run_name="__main__")
"""


class StandbyPool:
    """Not thread-safe: used from the worker's monitor thread only (PDEATHSIG follows that thread)."""

    def __init__(self, size: int, python: str, log_dir: Path, env: dict[str, str] | None = None):
        self.size, self.python, self.log_dir = size, python, log_dir
        self.env = dict(os.environ if env is None else env)   # what a standby starts with (the jobs' allowlist)
        self.ready: list[subprocess.Popen] = []

    def eligible(self, argv: list[str], path_env: str | None) -> bool:
        if self.size <= 0 or len(argv) < 2:
            return False
        exe = shutil.which(argv[0], path=path_env) if os.sep not in argv[0] else argv[0]
        if exe is None or os.path.abspath(exe) != os.path.abspath(self.python):
            return False
        return (argv[1] == "-m" and len(argv) >= 3) or (argv[1].endswith(".py") and not argv[1].startswith("-"))

    def fill(self) -> None:
        self.ready = [p for p in self.ready if p.poll() is None]
        while len(self.ready) < self.size:
            self.log_dir.mkdir(parents=True, exist_ok=True)
            with open(self.log_dir / "standby.log", "ab") as out:
                argv = wrapped_argv([self.python, "-c", _STANDBY, *PRELOAD])
                self.ready.append(subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=out, stderr=subprocess.STDOUT,
                                                   env=self.env, start_new_session=True, close_fds=True))

    def run(self, argv: list[str], env: dict[str, str], cwd: str | None, log_file: Path,
            account: tuple[int, int, tuple[int, ...]] | None = None) -> subprocess.Popen | None:
        """Hand the job to a standby interpreter, which becomes `account` (uid, gid, groups; None: stays the
        worker's) first; None when none is ready. The log's directory exists already (the worker made it)."""
        while self.ready:
            proc = self.ready.pop(0)
            if proc.poll() is not None:
                continue
            job = {"argv": argv, "env": env, "cwd": cwd or "", "log": str(log_file)}
            if account is not None:
                job.update(uid=account[0], gid=account[1], groups=list(account[2]))
            line = json.dumps(job) + "\n"
            try:
                proc.stdin.write(line.encode())
                proc.stdin.close()
            except OSError:
                continue
            return proc
        return None

    def close(self) -> None:
        for p in self.ready:
            try:
                os.killpg(p.pid, 9)
            except (ProcessLookupError, PermissionError):
                pass
        self.ready = []
