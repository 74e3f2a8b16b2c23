"""What keeps a job to itself on a worker: its account, its environment, its directories.

- Account (`RunAs`): where the worker runs as root, a user's job runs as that user's Unix
  account (as Slurm runs a job as its submitter): its processes cannot read another user's
  job's environment in /proc, write its checkpoints, or read the worker's credential (a file
  only the worker's account may read). A job an admin submitted, and every job of a worker not
  running as root, runs as the worker's own account (docs/deploy.md says what that does not
  isolate). A job is never run as root on a user's behalf.
- Environment (`job_environment`): an allowlist of the worker's variables (PATH, locale, the
  Python and CUDA ones, thread counts; `--job-env` adds names), never the rest (a cloud
  credential, the worker's token), plus the job's own variables and what the worker sets.
- Directories: the job's checkpoint directory (logs under it) and its scratch directory under
  the worker's work dir belong to its account, mode 0700. The worker, which may be root, never
  follows a link the job could have planted: it opens what a job writes (result and lease
  files, logs) with O_NOFOLLOW from directories it verified, only regular files of the job's
  account, and never more than a bounded size.
"""

from __future__ import annotations

import fnmatch
import logging
import os
import pwd
import stat
from dataclasses import dataclass
from pathlib import Path

log = logging.getLogger(__name__)
# what a job inherits from its worker's environment (names, or prefixes ending in *)
JOB_ENV_ALLOW = ("PATH", "LANG", "LANGUAGE", "LC_*", "TZ", "TERM", "TMPDIR", "PYTHONPATH", "PYTHONUNBUFFERED",
                 "PYTHONHASHSEED", "PYTHONDONTWRITEBYTECODE", "VIRTUAL_ENV", "CONDA_PREFIX", "CONDA_DEFAULT_ENV",
                 "LD_LIBRARY_PATH", "CUDA_HOME", "CUDA_PATH", "CUDA_DEVICE_ORDER", "NCCL_*", "GLOO_*",
                 "OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS", "HOME", "USER", "LOGNAME")
READ_LIMIT = 1 << 20       # bytes of a job-written file the worker reads at most (results, lease files, log tails)
_OPEN = os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK


class Refused(Exception):
    """This job cannot start here, for a reason its user should read (the launch fails, naming it)."""


@dataclass(frozen=True)
class RunAs:
    """The account a job's processes run as."""

    name: str
    uid: int
    gid: int
    groups: tuple[int, ...]
    home: str

    @classmethod
    def own(cls) -> RunAs:
        uid = os.geteuid()
        try:
            pw = pwd.getpwuid(uid)
            return cls(pw.pw_name, uid, os.getegid(), tuple(os.getgroups()), pw.pw_dir)
        except KeyError:              # a container's uid without a passwd entry
            return cls(str(uid), uid, os.getegid(), tuple(os.getgroups()), os.environ.get("HOME", "/"))

    @classmethod
    def user(cls, name: str) -> RunAs:
        """`name`'s account on this machine (Refused when it has none, or it is root)."""
        try:
            pw = pwd.getpwnam(name)
        except KeyError:
            raise Refused(f"user {name!r} has no account on this worker: a user's jobs run as that user where "
                          "workers run as root (create the account, as for Slurm)") from None
        if pw.pw_uid == 0:
            raise Refused(f"user {name!r} is root: no job runs as root on a user's behalf")
        return cls(name, pw.pw_uid, pw.pw_gid, tuple(os.getgrouplist(name, pw.pw_gid)), pw.pw_dir)

    @property
    def switches(self) -> bool:
        """Whether the job's processes change account (the worker is root and the job is a user's)."""
        return self.uid != os.geteuid()

    def popen_args(self) -> dict:
        """subprocess.Popen's arguments that start a process as this account (none when it is ours)."""
        if not self.switches:
            return {}
        return {"user": self.uid, "group": self.gid, "extra_groups": list(self.groups)}


def run_as(name: str, warned: set[str]) -> RunAs:
    """The account a job of user `name` ("" : an admin's job) runs as on this worker."""
    if not name:
        return RunAs.own()
    if os.geteuid() != 0:
        if "not-root" not in warned:
            warned.add("not-root")
            log.warning("this worker does not run as root: users' jobs run as its own account, so they are not "
                        "isolated from each other or from its credential (docs/deploy.md, Security)")
        return RunAs.own()
    return RunAs.user(name)


def allowed(name: str, allow) -> bool:
    return any(fnmatch.fnmatchcase(name, pattern) for pattern in allow)


def job_environment(env, allow=JOB_ENV_ALLOW, who: RunAs | None = None) -> dict[str, str]:
    """The worker's variables a job may see; a job that changes account gets that account's HOME and names."""
    out = {k: v for k, v in env.items() if allowed(k, allow)}
    if who is not None and who.switches:
        out.update(HOME=who.home, USER=who.name, LOGNAME=who.name)
    return out


def own_dir(path: Path, who: RunAs, mode: int = 0o700) -> None:
    """`path` a real directory of `who`'s, made if missing (its parent must be the worker's, or trusted).
    Refused when it is a link, not a directory, or another account's."""
    try:
        path.mkdir(mode=mode)
        made = True
    except FileExistsError:
        made = False
    except OSError as exc:
        raise Refused(f"cannot make {path} ({exc.strerror})") from None
    st = os.lstat(path)
    if not stat.S_ISDIR(st.st_mode):
        raise Refused(f"{path} is not a directory (a link or a file is in its place): the job's directory must be "
                      "its own")
    if who.switches and (made or st.st_uid == os.geteuid()):
        # made now, by this worker or (a job spread over servers) by another one at the same moment: only
        # workers may create entries where the job's directories live
        os.chown(path, who.uid, who.gid)
        os.chmod(path, mode)
    elif st.st_uid != who.uid:
        raise Refused(f"{path} belongs to uid {st.st_uid}, not to {who.name} (uid {who.uid}), whom the job runs as")


def open_dir(root: Path, parts: list[str], create: bool = False, who: RunAs | None = None) -> int:
    """An fd of root/parts[0]/.../parts[-1] (directories), never following a link; made (as `who`'s) when
    `create`. The caller closes it."""
    fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    try:
        for part in parts:
            if create:
                try:
                    os.mkdir(part, 0o700, dir_fd=fd)
                    if who is not None and who.switches:
                        os.chown(part, who.uid, who.gid, dir_fd=fd, follow_symlinks=False)
                except FileExistsError:
                    pass
            nxt = os.open(part, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=fd)
            os.close(fd)
            fd = nxt
        return fd
    except BaseException:
        os.close(fd)
        raise


def open_job_file(path: Path, who: RunAs, write: bool = False, base: Path | None = None) -> int:
    """A file the job may have written: opened without following links (from `base`, a directory the
    worker trusts, through the job's directories), only a regular file of the job's account. OSError else."""
    base = base if base is not None else path.parent
    parts = list(path.relative_to(base).parts)
    dfd = open_dir(base, parts[:-1], create=write, who=who)
    try:
        flags = (os.O_WRONLY | os.O_APPEND | os.O_CREAT) if write else os.O_RDONLY
        fd = os.open(parts[-1], flags | _OPEN, 0o600, dir_fd=dfd)
    finally:
        os.close(dfd)
    os.set_blocking(fd, True)
    st = os.fstat(fd)
    if write and who.switches and st.st_uid == os.geteuid() and st.st_size == 0 and st.st_nlink == 1:
        os.fchown(fd, who.uid, who.gid)          # made just now, by the worker: the job's file
        st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode) or st.st_uid != who.uid:
        os.close(fd)
        raise OSError(f"{path} is not a regular file of {who.name}'s")
    return fd


def open_regular(name: str, dir_fd: int) -> int:
    """`name` in the directory `dir_fd` for reading, if it is a regular file (never a link, a FIFO or a
    device: opening one of those neither follows nor blocks); OSError else."""
    fd = os.open(name, os.O_RDONLY | _OPEN, dir_fd=dir_fd)
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise OSError(f"{name} is not a regular file")
    os.set_blocking(fd, True)
    return fd


def read_job_file(path: Path, who: RunAs, limit: int = READ_LIMIT, tail: bool = False,
                  base: Path | None = None) -> bytes | None:
    """At most `limit` bytes (the last ones with `tail`) of a file the job wrote; None when it cannot be read."""
    try:
        fd = open_job_file(path, who, base=base)
    except OSError:
        return None
    try:
        size = os.fstat(fd).st_size
        if tail and size > limit:
            os.lseek(fd, size - limit, os.SEEK_SET)
        return os.read(fd, limit)
    except OSError:
        return None
    finally:
        os.close(fd)


def append_job_file(path: Path, who: RunAs, text: str, base: Path) -> None:
    """Append a line the worker has to say to a file in the job's directories (made as the job's)."""
    try:
        fd = open_job_file(path, who, write=True, base=base)
    except OSError:
        return
    try:
        os.write(fd, text.encode())
    finally:
        os.close(fd)
