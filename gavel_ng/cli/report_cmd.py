"""`gavel-ng report --state DIR`: the paper's metrics of a cluster's jobs, per job or per user/entity (like sacct).

Reads the scheduler's state directory read-only (runtime.report). `--plot` draws the JCT CDF
with the simulator's own plotting code (gavel_ng.plots.plot_jct_cdf), so a cluster run and a
simulation of the same trace compare on one kind of figure.
"""

from __future__ import annotations

import csv
import math
import sqlite3
import sys
import time
from datetime import datetime
from pathlib import Path

from ..errors import InputError

BY = ("job", "user", "entity")
COUNTS = ("job_id", "gpus", "jobs", "done", "failed", "cancelled", "attempts", "preemptions", "steps_done", "steps")


def add_parser(sub) -> None:
    p = sub.add_parser("report", help="job completion times, queueing delays and GPU-hours of a cluster's jobs",
                       description="The paper's metrics from a scheduler's state directory (read-only, with or "
                                   "without a running scheduler): per job (submitted, started, ended, JCT, queueing "
                                   "delay, attempts, preemptions, GPU-hours by type, cost) or per user or entity. "
                                   "Jobs whose life overlaps --since..--until, as sacct -S/-E selects them.")
    p.add_argument("--state", required=True, metavar="DIR", help="the scheduler's state directory")
    p.add_argument("--since", metavar="TIME", help="start of the window: ISO 8601 (2026-11-24T09:00, local time "
                                                   "unless it gives an offset) or unix seconds (default: open)")
    p.add_argument("--until", metavar="TIME", help="end of the window, as --since (default: open)")
    p.add_argument("--by", choices=BY, default="job", help="one row per job (default), user or entity")
    p.add_argument("--format", choices=("table", "csv"), default="table", help="table (default) or CSV")
    p.add_argument("--plot", metavar="FILE.png", help="also draw the JCT CDF of the jobs done (as `simulate` does)")
    p.add_argument("--audit", action="store_true",
                   help="instead: who did what, one line per submission, cancellation, credential change and worker "
                        "registration in the window, with its actor (admin, user:NAME, worker:NAME)")
    p.set_defaults(run=run)


def run(args) -> int:
    from ..runtime.records import NotAStateDir, StateDamaged
    from ..runtime.report import read_report

    since, until = _time("--since", args.since), _time("--until", args.until)
    if since is not None and until is not None and until <= since:
        raise InputError("--until", args.until, f"must be after --since ({args.since})")
    if not Path(args.state).is_dir():
        raise InputError("--state", args.state, "no such directory")
    if args.audit:
        return _audit(args, since, until)
    try:
        rep = read_report(args.state, since, until)
    except NotAStateDir as exc:
        raise InputError("--state", args.state, f"not a scheduler state directory: {exc}") from None
    except (sqlite3.Error, StateDamaged) as exc:
        raise InputError("--state", args.state, f"cannot read the scheduler state ({exc})") from None
    header, rows = job_rows(rep) if args.by == "job" else group_rows(rep, args.by)
    if args.format == "csv":
        w = csv.writer(sys.stdout)
        w.writerow(header)
        w.writerows(rows)
    else:
        print(_window(rep))
        print(table(header, [[_cell(v, h) for v, h in zip(row, header)] for row in rows]))
    if args.plot:
        from ..plots import plot_jct_cdf
        from ..runtime.report import HOUR

        jct = rep.done_jcts()
        if not len(jct):
            raise InputError("--plot", args.plot, "no job in the window is done: no JCT to plot")
        png = plot_jct_cdf({rep.policy: jct / HOUR}, args.plot,
                           title=f"job completion times, {len(jct)} jobs done ({_window(rep)})")
        print(f"JCT CDF: {png}", file=sys.stderr)
    return 0


def _audit(args, since, until) -> int:
    from ..runtime.records import NotAStateDir
    from ..runtime.report import read_audit

    try:
        entries = read_audit(args.state, since, until)
    except NotAStateDir as exc:
        raise InputError("--state", args.state, f"not a scheduler state directory: {exc}") from None
    except sqlite3.Error as exc:
        raise InputError("--state", args.state, f"cannot read the scheduler state ({exc})") from None
    header = ["time", "actor", "action", "job_id", "worker_id", "detail"]
    rows = [[_iso(e.ts), e.actor or "-", e.action, "" if e.job_id is None else e.job_id, e.worker_id or "",
             " ".join(f"{k}={v}" for k, v in sorted(e.detail.items()))] for e in entries]
    if args.format == "csv":
        w = csv.writer(sys.stdout)
        w.writerow(header)
        w.writerows(rows)
    else:
        print(table(header, [[str(c) if c != "" else "-" for c in row] for row in rows]))
    return 0


def job_rows(rep) -> tuple[list[str], list[list]]:
    """One row per job: times as ISO 8601, durations and GPU-hours as numbers (CSV) in seconds and hours."""
    types = rep.worker_types
    header = ["job_id", "name", "class", "gpus", "user", "entity", "status", "submitted", "started", "ended",
              "jct_s", "queueing_delay_s", "attempts", "preemptions", "steps_done", "steps",
              *[f"gpu_hours_{w}" for w in types], "cost_usd"]
    rows = [[j.job_id, j.name, j.job_class, j.scale_factor, j.user, j.entity, j.status, _iso(j.submitted),
             _iso(j.first_start), _iso(j.ended), _num(j.jct, 3), _num(j.queueing_delay, 3), j.attempts,
             j.preemptions, j.steps_done, j.steps, *[_num(j.gpu_hours.get(w, 0.0), 6) for w in types],
             _num(j.cost, 4)] for j in rep.jobs]
    return header, rows


def group_rows(rep, by: str) -> tuple[list[str], list[list]]:
    types = rep.worker_types
    header = [by, "jobs", "done", "failed", "cancelled", "mean_jct_s", "median_jct_s", "mean_queueing_delay_s",
              *[f"gpu_hours_{w}" for w in types], "cost_usd"]
    rows = [[g.group, g.jobs, g.done, g.failed, g.cancelled, _num(g.mean_jct, 3), _num(g.median_jct, 3),
             _num(g.mean_queueing_delay, 3), *[_num(g.gpu_hours.get(w, 0.0), 6) for w in types], _num(g.cost, 4)]
            for g in rep.groups(by)]
    return header, rows


def table(header: list[str], rows: list[list[str]]) -> str:
    """Columns as wide as their widest cell; numbers right-aligned."""
    widths = [max([len(h)] + [len(r[i]) for r in rows]) for i, h in enumerate(header)]
    right = [h in COUNTS or h.endswith("_s") or h.startswith("gpu_hours_") or h == "cost_usd" for h in header]

    def line(cells):
        return "  ".join(c.rjust(w) if r else c.ljust(w) for c, w, r in zip(cells, widths, right)).rstrip()

    return "\n".join([line(header), *map(line, rows)])


def _cell(value, name: str) -> str:
    """A table cell: durations read as 12m05s, times as local HH:MM:SS (date when not today)."""
    if value == "" or value is None:
        return "-"
    if name.endswith("_s"):
        return duration(float(value))
    if name in ("submitted", "started", "ended"):
        t = datetime.fromisoformat(value)
        return t.strftime("%H:%M:%S" if t.date() == datetime.now(t.tzinfo).date() else "%Y-%m-%d %H:%M")
    if name.startswith("gpu_hours_"):
        return f"{float(value):.3f}"
    if name == "cost_usd":
        return f"{float(value):.2f}"
    return str(value)


def _window(rep) -> str:
    if rep.since is None and rep.until is None:
        return f"policy {rep.policy}, every job ({len(rep.jobs)})"
    return (f"policy {rep.policy}, {len(rep.jobs)} jobs alive between {_iso(rep.since) or 'the start'} and "
            f"{_iso(rep.until) or 'now'}")


def _time(flag: str, text: str | None) -> float | None:
    if text is None:
        return None
    try:
        return float(text)
    except ValueError:
        pass
    try:
        t = datetime.fromisoformat(text)
    except ValueError:
        raise InputError(flag, text, "not a time: give ISO 8601 (2026-11-24T09:00) or unix seconds") from None
    return t.timestamp() if t.tzinfo is not None else time.mktime(t.timetuple()) + t.microsecond / 1e6


def _iso(t: float | None) -> str:
    return "" if t is None else datetime.fromtimestamp(t).astimezone().isoformat(timespec="seconds")


def _num(v: float | None, digits: int):
    return "" if v is None else round(float(v), digits)


def duration(value: float | None) -> str:
    """Seconds as a duration people read: 42s, 12m05s, 3h07m, 2d04h; '-' for none."""
    if value is None or not math.isfinite(value):
        return "-"
    v = int(round(value))
    if v < 60:
        return f"{v}s"
    if v < 3600:
        return f"{v // 60}m{v % 60:02d}s"
    if v < 86400:
        return f"{v // 3600}h{v % 3600 // 60:02d}m"
    return f"{v // 86400}d{v % 86400 // 3600:02d}h"
