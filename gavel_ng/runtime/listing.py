"""Bounded answers about jobs: status pages, ListJobs pages and the limits on submissions.

A reply must fit the client's 4 MiB message limit at any queue size, so status carries
counts by state and a bounded page of jobs (without the spec's command and env), and
ListJobs pages by job id, each page bounded by a count and by bytes. A submission is
bounded too: jobs per call, and the unfinished jobs a cluster holds (max_unfinished_jobs).
"""

from __future__ import annotations

import hashlib
import json
from bisect import bisect_right
from collections.abc import Callable, Iterable

from ..errors import InputError, require
from ..protocol.jobspec import JobSpec
from ..protocol.limits import MAX_STATUS_JOBS, STATUS_JOBS
from ..protocol.protos import gavel_pb2 as pb
from .jobs import FINISHED, JobState
from .live import LiveIndex

PAGE_JOBS, MAX_PAGE_JOBS = 1000, 5000       # jobs per ListJobs page: default, most
PAGE_BYTES = 3 << 20                        # a page stops once this big (the client takes 4 MiB)
MAX_JOBS_PER_CALL = 10_000                  # jobs per SubmitJobs call
MAX_KEY = 128                               # characters of an idempotency key


class LimitReached(InputError):
    """A capacity limit (not a malformed request): answered RESOURCE_EXHAUSTED."""


def slim(info: pb.JobInfo) -> pb.JobInfo:
    """A JobInfo for lists: without the spec's command and env (up to 32 KiB per job)."""
    info.spec.ClearField("command")
    info.spec.ClearField("env")
    return info


def status_page(jobs: dict[int, JobState], limit: int, index: LiveIndex, first: list[int] | None = None
                ) -> tuple[dict[str, int], list[JobState]]:
    """Counts by status, and up to `limit` jobs: unfinished ones by id, then the latest finished, in id order
    (the index counts and keeps the unfinished ones: no walk over the queue). `first`: the unfinished ids
    (LiveIndex.first_unfinished) as the caller read them before taking the lock; one that finished since is
    still listed, with its status now."""
    require(0 <= limit <= MAX_STATUS_JOBS, "job_limit", limit, f"must be between 0 and {MAX_STATUS_JOBS}")
    limit = limit or STATUS_JOBS
    page = [jobs[m] for m in (index.first_unfinished(limit) if first is None else first[:limit]) if m in jobs]
    if len(page) < limit:
        page += _first(reversed(jobs.values()), lambda j: j.status in FINISHED, limit - len(page))
    return dict(index.counts), sorted(page, key=lambda j: j.job_id)


def _first(items: Iterable[JobState], keep: Callable[[JobState], bool], n: int) -> list[JobState]:
    out = []
    for j in items:
        if len(out) >= n:
            break
        if keep(j):
            out.append(j)
    return out


def list_page(jobs: dict[int, JobState], req: pb.ListJobsRequest, info: Callable[[JobState], pb.JobInfo]
              ) -> pb.ListJobsReply:
    """One ListJobs page: jobs after page_token (a job id) in id order, at most page_size and PAGE_BYTES."""
    require(0 <= req.page_size <= MAX_PAGE_JOBS, "page_size", req.page_size,
            f"must be between 0 and {MAX_PAGE_JOBS}")
    size = req.page_size or PAGE_JOBS
    try:
        after = int(req.page_token) if req.page_token else 0
    except ValueError:
        raise InputError("page_token", req.page_token[:40], "not a token this scheduler gave") from None
    ids = sorted(set(req.job_ids)) if req.job_ids else sorted(jobs)
    reply, used = pb.ListJobsReply(), 0
    rest = ids[bisect_right(ids, after):]
    for n, m in enumerate(rest):
        if len(reply.jobs) >= size or used >= PAGE_BYTES:
            reply.next_page_token = str(rest[n - 1])
            break
        j = jobs.get(m)
        if j is None or (not req.include_finished and j.status in FINISHED):
            continue
        item = reply.jobs.add()
        item.CopyFrom(info(j))
        used += item.ByteSize()
    return reply


def check_submission(req: pb.SubmitJobsRequest) -> None:
    """Bounds of one SubmitJobs call, before its jobs are parsed."""
    require(len(req.jobs) > 0, "jobs", [], "no jobs given")
    require(len(req.jobs) <= MAX_JOBS_PER_CALL, "jobs", f"{len(req.jobs)} jobs",
            f"at most {MAX_JOBS_PER_CALL} per SubmitJobs call: submit in several calls")
    key = req.idempotency_key
    require(len(key) <= MAX_KEY, "idempotency_key", key[:40] + "...", f"at most {MAX_KEY} characters")


def check_queue(index: LiveIndex, adding: int, limit: int) -> None:
    """LimitReached naming max_unfinished_jobs when `adding` more jobs would exceed it (lock held)."""
    unfinished = len(index.unfinished)
    if unfinished + adding > limit:
        raise LimitReached("cluster-config.max_unfinished_jobs", limit,
                           f"{unfinished} unfinished jobs; {adding} more would exceed it (retry when jobs finish)")


def digest(specs: list[JobSpec]) -> str:
    """What an idempotency key is bound to: the submitted jobs, canonically."""
    text = json.dumps([s.to_dict() for s in specs], sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()
