"""`gavel-ng logs JOB`: a job's output, from CHECKPOINT_ROOT/job-N-STATEID/logs/attemptK-rankR.log.

Workers write each rank's stdout and stderr there (worker/daemon.py); the checkpoint root is
shared by the workers and recorded in the scheduler's state, so `--state DIR` finds it. The
directories under the root belong to the jobs, so nothing there is trusted: no link is followed
(the job's directory, its `logs`, or a log), only regular files are read (a FIFO would block, a
device never end), and a log of any size is streamed in bounded pieces. Where workers run jobs as
their users, a user reads their own jobs' logs with `--checkpoint-root` (the files are theirs).
"""

from __future__ import annotations

import os
import re
import sys
import time
from pathlib import Path

from ..errors import InputError, require

LOG_NAME = re.compile(r"^attempt(\d+)-rank(\d+)\.log$")
POLL = 0.5                 # seconds between looks at a followed attempt
MAX_ID = 2**63 - 1         # job ids are SQLite integers
CHUNK = 1 << 20            # bytes read at a time: memory stays bounded whatever a log's size
MAX_LINE = 1 << 16         # a longer line is printed in pieces of this many bytes


def add_parser(sub) -> None:
    p = sub.add_parser("logs", help="show a job's output (its latest attempt, all ranks)",
                       description="Print what a job's processes wrote, from its directory's logs/ under the "
                                   "checkpoint root. Without --rank, every rank's lines, each prefixed with [rank R].")
    p.add_argument("job", type=int, metavar="JOB", help="job id")
    where = p.add_mutually_exclusive_group(required=True)
    where.add_argument("--state", metavar="DIR", help="the scheduler's state directory (finds the checkpoint root)")
    where.add_argument("--checkpoint-root", metavar="DIR", help="the cluster's checkpoint root")
    p.add_argument("--attempt", type=int, metavar="N", help="which attempt (default: the latest)")
    p.add_argument("--rank", type=int, metavar="R", help="one rank only, without prefixes")
    p.add_argument("--follow", "-f", action="store_true",
                   help="keep printing new lines until the attempt ends (or Ctrl-C)")
    p.set_defaults(run=run)


def run(args) -> int:
    require(1 <= args.job <= MAX_ID, "JOB", args.job, f"must be a job id, 1 to {MAX_ID}")
    for flag, value in (("--attempt", args.attempt), ("--rank", args.rank)):
        require(value is None or 0 <= value <= MAX_ID, flag, value, f"must be between 0 and {MAX_ID}")
    root, reader, state_id = _root(args)
    logs = None
    try:
        jdir = _job_dir(root, args.job, state_id, reader)
        logs = _open_logs(root, jdir, args.job, reader)
        files = _pick(logs, args.job, args.attempt, args.rank, root, reader)
        attempt = int(LOG_NAME.match(files[0][0])[1])
        prefix = args.rank is None
        tails = [_Tail(name, fd, f"[rank {LOG_NAME.match(name)[2]}] " if prefix else "") for name, fd in files]
        for t in tails:
            t.emit(final=not args.follow)
        if args.follow:
            try:
                _follow(tails, logs, args.job, attempt, args.rank, reader)
            except KeyboardInterrupt:
                pass
            for t in tails:
                t.emit(final=True)
        for t in tails:
            t.close()
    finally:
        if logs is not None:
            os.close(logs)
        if reader is not None:
            reader.close()
    return 0


def _root(args):
    """The checkpoint root, a reader of the state directory when one was given, and the state's id."""
    if args.checkpoint_root:
        root = Path(args.checkpoint_root)
        if not root.is_dir():
            raise InputError("--checkpoint-root", args.checkpoint_root, "no such directory")
        return root, None, None
    from ..runtime.records import NotAStateDir, StateReader

    try:
        reader = StateReader(args.state)
    except NotAStateDir as exc:
        raise InputError("--state", args.state, f"not a scheduler state directory: {exc}") from None
    info = reader.load_cluster_info()
    root = Path(info.checkpoint_root) if info is not None and info.checkpoint_root else Path(args.state) / "checkpoints"
    return root, reader, info.state_id if info is not None else ""


def _job_dir(root: Path, job: int, state_id: str | None, reader) -> str:
    """The name of the job's directory under root: from the state's id, else the one directory of that job."""
    from ..runtime.records import job_dir

    if state_id is not None:
        return job_dir(root, job, state_id).name
    names = sorted(n for n in _listdir(root) if n == f"job-{job}" or re.fullmatch(rf"job-{job}-[0-9a-f]+", n))
    if len(names) > 1:
        raise InputError("JOB", job, f"{len(names)} directories under {root} are job {job}'s of different scheduler "
                                     f"states ({', '.join(names)}): pass --state to say which")
    if not names:
        raise InputError("JOB", job, _no_logs(root, job, reader))
    return names[0]


def _listdir(path: Path) -> list[str]:
    try:
        return os.listdir(path)
    except OSError:
        return []


def _open_logs(root: Path, jdir: str, job: int, reader) -> int:
    """An fd of root/jdir/logs, reached without following a link (the job owns both)."""
    from ..worker.isolation import open_dir

    try:
        return open_dir(root, [jdir, "logs"])
    except OSError:
        raise InputError("JOB", job, _no_logs(root, job, reader)) from None


def _pick(logs: int, job: int, attempt: int | None, rank: int | None, root: Path, reader) -> list[tuple[str, int]]:
    """(name, open fd) of the log files to show, rank by rank; an InputError naming what exists when there are
    none. Entries that are not regular files (a link, a FIFO) are skipped, and said so."""
    from ..worker.isolation import open_regular

    found: dict[int, dict[int, str]] = {}
    skipped = []
    for name in sorted(os.listdir(logs)):
        m = LOG_NAME.match(name)
        if m:
            found.setdefault(int(m[1]), {})[int(m[2])] = name
    if not found:
        raise InputError("JOB", job, _no_logs(root, job, reader))
    if attempt is None:
        attempt = max(found)
    elif attempt not in found:
        raise InputError("--attempt", attempt, f"job {job} has logs of attempts {_ids(found)}")
    ranks = found[attempt]
    if rank is not None:
        if rank not in ranks:
            raise InputError("--rank", rank, f"attempt {attempt} of job {job} has ranks {_ids(ranks)}")
        ranks = {rank: ranks[rank]}
    out = []
    for r in sorted(ranks):
        try:
            out.append((ranks[r], open_regular(ranks[r], logs)))
        except OSError:
            skipped.append(ranks[r])
    if skipped:
        print(f"gavel-ng logs: skipped {', '.join(skipped)}: not a regular file (a link, a FIFO or a device is "
              "never read)", file=sys.stderr)
    if not out:
        raise InputError("--attempt", attempt, f"job {job} attempt {attempt} has no log that is a regular file")
    return out


def _no_logs(root: Path, job: int, reader) -> str:
    if reader is not None:
        rows = reader.load_jobs("job_id = ?", (job,))
        if rows:
            why = f"; its last failure: {rows[0].error}" if rows[0].error else ""
            return f"job {job} ({rows[0].status}) has no logs yet under {root}{why}"
    jobs = sorted({int(m[1]) for n in _listdir(root) if (m := re.fullmatch(r"job-(\d+)(?:-[0-9a-f]+)?", n))
                   and os.path.isdir(root / n / "logs")})
    have = f"jobs with logs: {_ids(jobs)}" if jobs else "no job has logs there yet"
    return f"no such job under {root} ({have})"


def _ids(values) -> str:
    values = sorted(values)
    return ", ".join(map(str, values[:20])) + (f" ... ({len(values)} in all)" if len(values) > 20 else "")


class _Tail:
    """Prints a growing file's complete lines, each with a prefix, CHUNK bytes at a time."""

    def __init__(self, name: str, fd: int, prefix: str):
        self.name, self.fd, self.prefix = name, fd, prefix
        self.partial = b""

    def emit(self, final: bool = False) -> bool:
        """Print what was added since last time; True if anything was."""
        out, any_ = sys.stdout, False
        while True:
            data = os.read(self.fd, CHUNK)
            if not data:
                break
            lines = (self.partial + data).split(b"\n")
            self.partial = lines.pop()
            while len(self.partial) > MAX_LINE:         # one endless line: printed in pieces
                lines.append(self.partial[:MAX_LINE])
                self.partial = self.partial[MAX_LINE:]
            for line in lines:
                out.write(self.prefix + line.decode("utf-8", "replace") + "\n")
            any_ = any_ or bool(lines)
        if final and self.partial:
            out.write(self.prefix + self.partial.decode("utf-8", "replace") + "\n")
            self.partial, any_ = b"", True
        out.flush()
        return any_

    def close(self) -> None:
        os.close(self.fd)


def _follow(tails: list[_Tail], logs: int, job: int, attempt: int, rank: int | None, reader) -> None:
    """Until the attempt ended (the state says so, or a later attempt's logs appeared) or Ctrl-C.
    Ranks whose files appear later (a spread job's other workers) are picked up."""
    from ..worker.isolation import open_regular

    known = {t.name for t in tails}
    while True:
        ended = _ended(logs, job, attempt, reader)
        for name in sorted(os.listdir(logs)):
            m = LOG_NAME.match(name)
            if name not in known and m and int(m[1]) == attempt and (rank is None or int(m[2]) == rank):
                known.add(name)
                try:
                    tails.append(_Tail(name, open_regular(name, logs), f"[rank {m[2]}] " if rank is None else ""))
                except OSError:
                    print(f"gavel-ng logs: skipped {name}: not a regular file", file=sys.stderr)
        for t in tails:
            t.emit()
        if ended:
            return
        time.sleep(POLL)


def _ended(logs: int, job: int, attempt: int, reader) -> bool:
    if any((m := LOG_NAME.match(n)) and int(m[1]) > attempt for n in os.listdir(logs)):
        return True
    if reader is None:
        return False
    rows = [a for a in reader.attempts(job) if a["attempt"] == attempt]
    return bool(rows) and rows[0]["status"] != "running"
