"""`gavel-ng status`: workers, jobs with progress, the allocation (or a round policy's decision) and the round.

Asks a running scheduler, or with `--state DIR` reads its state directory read-only (no
scheduler needed: a stopped or crashed one, or a running one without its token). Both
give one ClusterStatus, printed by one formatter.
"""

from __future__ import annotations

import dataclasses
import json
import sqlite3
import sys
from collections import Counter
from pathlib import Path

from ..errors import InputError
from .report_cmd import duration as _duration
from .submit_cmd import add_connection_args, client_from_args


def add_parser(sub) -> None:
    p = sub.add_parser("status", help="show a scheduler's workers, jobs and allocation",
                       description="Workers, jobs (progress, placement), the current allocation (a round policy: "
                                   "this round's worker type and GPUs per job) and round: from a "
                                   "running scheduler, or with --state from its state directory (read-only).")
    add_connection_args(p)
    p.add_argument("--state", metavar="DIR",
                   help="read the scheduler's state directory instead of asking it (works while it runs, "
                        "after it stopped or crashed); connection options are then ignored")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.add_argument("--all", action="store_true",
                   help="list every job, finished ones included (fetched page by page); default: job counts by "
                        "state and the first --limit unfinished jobs")
    p.add_argument("--limit", type=int, default=100, metavar="N",
                   help="jobs listed without --all (default 100, at most 1000)")
    p.set_defaults(run=run)


def run(args) -> int:
    if not 1 <= args.limit <= 1000:
        raise InputError("--limit", args.limit, "must be between 1 and 1000")
    if args.state is not None:
        st = read_state(args.state, None if args.all else args.limit)
    else:
        from ..protocol.client import SchedulerError

        with client_from_args(args) as client:
            try:
                st = client.status(args.limit)
                if args.all:
                    st = dataclasses.replace(st, jobs=client.jobs())
            except SchedulerError as exc:
                print(f"gavel-ng status: error: {exc}", file=sys.stderr)
                return 2
    if args.json:
        print(json.dumps(dataclasses.asdict(st), indent=1))
    else:
        print(format_status(st, show_all=args.all))
    return 0


def read_state(state_dir: str, job_limit: int | None = None):
    """The status recorded under a state directory; InputError (exit 2) naming --state if it is none."""
    from ..runtime.records import NotAStateDir, StateDamaged
    from ..runtime.status import read_state_dir

    path = Path(state_dir)
    if not path.exists():
        raise InputError("--state", state_dir, "no such directory")
    if not path.is_dir():
        raise InputError("--state", state_dir, "not a directory")
    try:
        return read_state_dir(path, job_limit=job_limit)
    except NotAStateDir as exc:
        raise InputError("--state", state_dir, f"not a scheduler state directory: {exc}") from None
    except (sqlite3.Error, StateDamaged) as exc:
        raise InputError("--state", state_dir, f"cannot read the scheduler state ({exc})") from None


def format_status(st, show_all: bool = False) -> str:
    """The human-readable view of a ClusterStatus (live or read from a state directory)."""
    lines = [_header(st)]
    lines += _workers(st)
    lines += _jobs(st, show_all)
    lines += _allocation(st)
    lines += _throughputs(st)
    return "\n".join(lines)


def _header(st) -> str:
    if st.live:
        when = f"{st.round_seconds:g}s, " + (st.round_note or f"ends in {st.round_ends_in:.1f}s")
        return (f"policy {st.policy}, round {st.round} ({when}), {st.launches} launches, "
                f"{st.renewals} lease renewals")
    return (f"state read from {st.source} (no scheduler asked: workers and jobs as last recorded)\n"
            f"policy {st.policy}, round {st.round} ({st.round_seconds:g}s), {st.launches} launches, "
            f"{st.renewals} lease renewals")


def _workers(st) -> list[str]:
    seen = "last seen" if st.live else "changed"
    out = [f"\nworkers ({sum(w.alive for w in st.workers)} {'alive' if st.live else 'alive when last recorded'})",
           f"  {'id':<14}{'address':<24}{'type':<8}{'gpus':>5}  {'state':<6}{seen:>10}  jobs"]
    for w in st.workers:
        jobs = ",".join(str(j) for j in w.running_jobs) or "-"
        out.append(f"  {w.worker_id:<14}{w.address:<24}{w.gpu_type:<8}{w.gpus:>5}  {'up' if w.alive else 'down':<6}"
                   f"{_ago(w.last_seen_ago):>10}  {jobs}")
    return out


def _jobs(st, show_all: bool) -> list[str]:
    counts = st.job_counts or dict(Counter(j.status for j in st.jobs))
    out = [f"\njobs ({st.jobs_total} submitted, {counts.get('done', 0)} done)"]
    if counts:
        out.append("  by state: " + ", ".join(f"{n} {state}" for state, n in sorted(counts.items())))
    unfinished = sum(n for state, n in counts.items() if state not in ("done", "cancelled", "failed"))
    shown = [j for j in st.jobs if show_all or not j.finished]
    if len(shown) < (st.jobs_total if show_all else unfinished):
        out.append(f"  listing {len(shown)} of {st.jobs_total if show_all else unfinished} "
                   f"{'jobs' if show_all else 'unfinished jobs'} (status --all lists every job)")
    labels = [j.job_type + (f" [{j.name}]" if j.name else "") for j in shown]   # whole: names are not cut
    width = max([len("job")] + [len(x) for x in labels])
    out += [f"  {'id':>4}  {'job':<{width}}  {'gpus':>4}  {'status':<10}{'progress':>18}  {'tries':>5}"
            f"{'waited':>9}{'elapsed':>9}  placement"]
    for j, label in zip(shown, labels):
        pct = 100.0 * j.steps_live / j.steps_total if j.steps_total else 0.0
        prog = f"{j.steps_live}/{j.steps_total} {pct:3.0f}%"
        gpus = str(j.scale_factor) if j.adaptive is None else str(j.gpus or "-")   # adaptive: what it holds now
        out.append(f"  {j.job_id:>4}  {label:<{width}}  {gpus:>4}  {j.status:<10}{prog:>18}  {j.attempts:>5}"
                   f"{_duration(j.waited(st.now)):>9}{_duration(j.elapsed(st.now)):>9}  {j.placement or '-'}"
                   + (f"  entity {j.entity}" if j.entity else ""))
        if j.reason:
            out.append(f"        waiting: {j.reason}")
        elif j.error and j.status == "failed":
            out.append(f"        failed: {j.error}")
        elif j.error and not j.finished:
            out.append(f"        last failure: {j.error}")
    failed = [j for j in st.jobs if j.status == "failed" and not show_all]
    if failed:
        out.append("  failed (latest):")
        out += [f"  {j.job_id:>4}  {j.job_type}{f' [{j.name}]' if j.name else ''} after {j.attempts} tries: "
                f"{j.error or 'no reason recorded'}" for j in failed]
    return out + _adaptive(st, show_all) + _classes(st)


def _classes(st) -> list[str]:
    """The listed jobs' classes: the steps/s the policy believes on each type, and where each comes from."""
    if not st.classes:
        return []
    width = max(len("class"), *(len(c.job_type) for c in st.classes))
    out = ["\njob classes (steps/s the policy believes: m measured, t table, d declared in the job file, "
           "e estimated from similar jobs)",
           f"  {'class':<{width}}  {'gpus':>4}" + "".join(f"{w:>12}" for w in st.worker_types)]
    for c in st.classes:
        cells = "".join(f"{_rate(c.rates.get(w), c.sources.get(w, '')):>12}" for w in st.worker_types)
        out.append(f"  {c.job_type:<{width}}  {c.scale_factor:>4}{cells}")
    return out


def _rate(value, source: str) -> str:
    if value is None:
        return "-"
    return f"{value:.4g} {source[:1] or '?'}" if value > 0 else f"0 {source[:1] or '?'}"


def _adaptive(st, show_all: bool) -> list[str]:
    """Adaptive jobs: where they last reported from, batch, noise scale, goodput, resizes."""
    rows = [j for j in st.jobs if j.adaptive is not None and (show_all or not j.finished)]
    if not rows:
        return []
    out = ["\nadaptive jobs (last report)",
           f"  {'id':>4}  {'on':<10}{'gpus':>4}{'batch':>7}{'per GPU':>8}{'accum':>6}{'noise':>10}"
           f"{'goodput':>10}{'resizes':>8}"]
    for j in rows:
        a = j.adaptive

        def num(v, fmt):
            return "-" if v is None else format(v, fmt)

        out.append(f"  {j.job_id:>4}  {(a.worker_type or '-'):<10}{num(a.gpus, 'd'):>4}{num(a.batch, 'd'):>7}"
                   f"{num(a.local_batch, 'd'):>8}{num(a.accumulation, 'd'):>6}{num(a.phi, '.4g'):>10}"
                   f"{num(a.goodput, '.4g'):>10}{a.resizes:>8}")
    out.append("  (noise: gradient noise scale; goodput: predicted M0-equivalent examples/s, i.e. examples/s "
               "x statistical efficiency)")
    return out


def _allocation(st) -> list[str]:
    if st.decision is not None:
        return _decision(st)
    if not st.allocation:
        return []
    out = ["\nallocation (fraction of time per worker type)",
           "  " + f"{'jobs':<10}" + "".join(f"{w:>8}" for w in st.worker_types)]
    for jobs, share in st.allocation:
        label = "+".join(str(j) for j in jobs)
        out.append("  " + f"{label:<10}" + "".join(f"{share.get(w, 0.0):>8.3f}" for w in st.worker_types))
    return out


def _decision(st) -> list[str]:
    """A round policy has no allocation (time shares): it gives each job a worker type and a GPU count,
    or none, every round. What it gave for the round in force."""
    out = [f"\nthis round's decision ({st.policy} decides every round which worker type and how many GPUs each "
           "job gets; no time-share allocation)"]
    if not st.decision:
        return out + ["  no job runs this round"]
    out.append(f"  {'id':>4}  {'type':<10}{'gpus':>5}")
    out += [f"  {job:>4}  {worker_type:<10}{gpus:>5}" for job, worker_type, gpus in st.decision]
    return out


def _throughputs(st) -> list[str]:
    if not st.throughputs:
        return []
    out = ["\nmeasured throughputs (steps/s)"]
    for key, value in st.throughputs.items():
        job_type, sf, rest = (key.split("|", 2) + ["", ""])[:3]
        out.append(f"  {job_type[:40]:<41}x{sf:<3} {rest.replace('|', ' '):<24}{value:>10.2f}")
    return out


def _ago(seconds: float) -> str:
    if seconds < 120:
        return f"{seconds:.0f}s ago"
    if seconds < 7200:
        return f"{seconds / 60:.0f}m ago"
    return f"{seconds / 3600:.0f}h ago"
