"""`gavel-ng logs JOB`: a job's output, from CHECKPOINT_ROOT/job-N/logs/attemptK-rankR.log.

Workers write each rank's stdout and stderr there (worker/daemon.py); the checkpoint root is
shared by the workers and recorded in the scheduler's state, so `--state DIR` finds it.
"""

from __future__ import annotations

import re
import sys
import time
from pathlib import Path

from ..errors import InputError

LOG_NAME = re.compile(r"^attempt(\d+)-rank(\d+)\.log$")
POLL = 0.5                 # seconds between looks at a followed attempt


def add_parser(sub) -> None:
    p = sub.add_parser("logs", help="show a job's output (its latest attempt, all ranks)",
                       description="Print what a job's processes wrote, from CHECKPOINT_ROOT/job-N/logs/. Without "
                                   "--rank, every rank's lines, each prefixed with [rank R].")
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
    root, reader = _root(args)
    try:
        files = _pick(root, args.job, args.attempt, args.rank, reader)
        attempt = int(LOG_NAME.match(files[0].name)[1])
        prefix = args.rank is None
        tails = [_Tail(f, f"[rank {LOG_NAME.match(f.name)[2]}] " if prefix else "") for f in files]
        for t in tails:
            t.emit(final=not args.follow)
        if args.follow:
            try:
                _follow(tails, root / f"job-{args.job}" / "logs", args.job, attempt, args.rank, reader)
            except KeyboardInterrupt:
                pass
            for t in tails:
                t.emit(final=True)
    finally:
        if reader is not None:
            reader.close()
    return 0


def _root(args):
    """The checkpoint root, and a reader of the state directory when one was given."""
    if args.checkpoint_root:
        root = Path(args.checkpoint_root)
        if not root.is_dir():
            raise InputError("--checkpoint-root", args.checkpoint_root, "no such directory")
        return root, None
    from ..runtime.records import NotAStateDir, StateReader

    try:
        reader = StateReader(args.state)
    except NotAStateDir as exc:
        raise InputError("--state", args.state, f"not a scheduler state directory: {exc}") from None
    info = reader.load_cluster_info()
    root = Path(info.checkpoint_root) if info is not None and info.checkpoint_root else Path(args.state) / "checkpoints"
    return root, reader


def _pick(root: Path, job: int, attempt: int | None, rank: int | None, reader) -> list[Path]:
    """The log files to show, rank by rank; an InputError naming what exists when there are none."""
    logs = root / f"job-{job}" / "logs"
    found: dict[int, dict[int, Path]] = {}
    for p in logs.glob("attempt*-rank*.log") if logs.is_dir() else ():
        m = LOG_NAME.match(p.name)
        if m:
            found.setdefault(int(m[1]), {})[int(m[2])] = p
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
        return [ranks[rank]]
    return [ranks[r] for r in sorted(ranks)]


def _no_logs(root: Path, job: int, reader) -> str:
    if reader is not None:
        rows = reader.load_jobs("job_id = ?", (job,))
        if rows:
            why = f"; its last failure: {rows[0].error}" if rows[0].error else ""
            return f"job {job} ({rows[0].status}) has no logs yet under {root}{why}"
    jobs = sorted(int(p.name[4:]) for p in root.glob("job-*") if p.name[4:].isdigit() and (p / "logs").is_dir())
    have = f"jobs with logs: {_ids(jobs)}" if jobs else "no job has logs there yet"
    return f"no such job under {root} ({have})"


def _ids(values) -> str:
    values = sorted(values)
    return ", ".join(map(str, values[:20])) + (f" ... ({len(values)} in all)" if len(values) > 20 else "")


class _Tail:
    """Prints a growing file's complete lines, each with a prefix."""

    def __init__(self, path: Path, prefix: str):
        self.path, self.prefix = path, prefix
        self.offset, self.partial = 0, b""

    def emit(self, final: bool = False) -> bool:
        """Print what was added since last time; True if anything was."""
        try:
            with open(self.path, "rb") as f:
                f.seek(self.offset)
                data = f.read()
        except FileNotFoundError:
            return False
        self.offset += len(data)
        data = self.partial + data
        lines = data.split(b"\n")
        self.partial = lines.pop()
        if final and self.partial:
            lines.append(self.partial)
            self.partial = b""
        out = sys.stdout
        for line in lines:
            out.write(self.prefix + line.decode("utf-8", "replace") + "\n")
        out.flush()
        return bool(lines)


def _follow(tails: list[_Tail], logs: Path, job: int, attempt: int, rank: int | None, reader) -> None:
    """Until the attempt ended (the state says so, or a later attempt's logs appeared) or Ctrl-C.
    Ranks whose files appear later (a spread job's other workers) are picked up."""
    known = {t.path for t in tails}
    while True:
        ended = _ended(logs, job, attempt, reader)
        for p in sorted(logs.glob(f"attempt{attempt}-rank*.log")):
            m = LOG_NAME.match(p.name)
            if p not in known and m and (rank is None or int(m[2]) == rank):
                known.add(p)
                tails.append(_Tail(p, f"[rank {m[2]}] " if rank is None else ""))
        for t in tails:
            t.emit()
        if ended:
            return
        time.sleep(POLL)


def _ended(logs: Path, job: int, attempt: int, reader) -> bool:
    if any((m := LOG_NAME.match(p.name)) and int(m[1]) > attempt for p in logs.glob("attempt*-rank*.log")):
        return True
    if reader is None:
        return False
    rows = [a for a in reader.attempts(job) if a["attempt"] == attempt]
    return bool(rows) and rows[0]["status"] != "running"
