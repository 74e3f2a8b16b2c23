"""Python client of the scheduler service (what `gavel-ng submit` and `status` use).

    from gavel_ng.protocol import SchedulerClient, JobSpec
    with SchedulerClient("sched:50060", token=open("token").read().strip()) as c:
        [job] = c.submit(JobSpec("ResNet-18 (batch size 32)", steps=5000))
        c.wait([job])

`ClusterStatus` is one view of a cluster with two sources: a running scheduler
(`SchedulerClient.status()`) or its state directory read without one
(`gavel_ng.runtime.status.read_state_dir`), e.g. a stopped or crashed scheduler's.
"""

from __future__ import annotations

import logging
import time
import uuid
from dataclasses import dataclass, field

import grpc

from .jobspec import JobSpec, rules_from_json
from .protos import gavel_pb2 as pb
from .reports import decode_report
from .rpc import Security, Stub, open_channel, read_token

log = logging.getLogger(__name__)
JOBS_PER_CALL = 10_000          # the scheduler's limit per SubmitJobs call (runtime.listing)
RETRIED = ("UNAVAILABLE", "DEADLINE_EXCEEDED")   # the call may or may not have happened: retry with its key


class SchedulerError(RuntimeError):
    """The scheduler refused a call; `code` is the gRPC status name (e.g. INVALID_ARGUMENT)."""

    def __init__(self, code: str, details: str):
        self.code, self.details = code, details
        super().__init__(f"{code}: {details}")


@dataclass(frozen=True)
class AdaptiveStatus:
    """An adaptive job's last report (None fields: not reported yet) and its resizes."""

    resizes: int
    worker_type: str | None = None
    gpus: int | None = None
    batch: int | None = None
    local_batch: int | None = None
    accumulation: int | None = None
    phi: float | None = None
    goodput: float | None = None
    params: tuple[float, ...] | None = None
    reported: float | None = None

    @classmethod
    def from_report(cls, resizes: int, r: dict | None) -> AdaptiveStatus:
        """From a report as a dict (runtime.adaptive.AdaptiveReport.to_dict, or the proto's fields)."""
        if not r:
            return cls(resizes)
        return cls(resizes, r["worker_type"], r["gpus"], r["batch"], r["local_batch"], r["accumulation"], r["phi"],
                   r["goodput"], tuple(r["params"]) if r.get("params") else None, r["reported"])


@dataclass(frozen=True)
class JobStatus:
    job_id: int
    name: str
    job_type: str
    scale_factor: int
    status: str
    steps_done: int
    steps_total: int
    steps_live: int
    attempts: int
    renewals: int
    placement: str
    adaptive: AdaptiveStatus | None = None    # adaptive jobs only
    entity: str | None = None                 # the entity its rules name (hierarchical policies, quotas)
    gpus: int = 0                             # GPUs its running attempt holds (adaptive jobs: changes)
    reason: str = ""                          # queued jobs: why it waits (gavel_ng.runtime.waiting)
    submitted: float = 0.0                    # unix seconds
    first_start: float | None = None          # its first launch (None: never started)
    ended: float | None = None                # when it finished (None: unfinished)
    preemptions: int = 0
    gpu_seconds: dict[str, float] = field(default_factory=dict)   # of its ended attempts, by worker type
    error: str = ""                           # why its last attempt failed (a failed job: why it failed)
    user: str | None = None

    @classmethod
    def from_proto(cls, m: pb.JobInfo) -> JobStatus:
        s = m.spec
        ada = None
        if s.adaptive:
            ada = AdaptiveStatus.from_report(m.resizes, decode_report(m.report) if m.HasField("report") else None)
        rules = rules_from_json(s.rules, "spec.rules")
        return cls(m.job_id, s.name, s.job_type, s.scale_factor, m.status, m.steps_done, s.steps, m.steps_live,
                   m.attempts, m.renewals, m.placement, ada, getattr(rules, "entity", None), m.gpus, m.reason,
                   m.submitted, m.first_start or None, m.finished or None, m.preemptions, dict(m.gpu_seconds),
                   m.error, getattr(rules, "user", None))

    @property
    def finished(self) -> bool:
        return self.status in ("done", "cancelled", "failed")

    def waited(self, now: float) -> float:
        """Seconds from submission to its first start (so far, while it never started)."""
        end = self.first_start if self.first_start is not None else (self.ended or now)
        return max(end - self.submitted, 0.0)

    def elapsed(self, now: float) -> float | None:
        """Seconds since its first start (to its end once finished); None while never started."""
        if self.first_start is None:
            return None
        return max((self.ended or now) - self.first_start, 0.0)


@dataclass(frozen=True)
class ClassRates:
    """What the policy believes of one job class: steps/s per worker type, and each figure's source
    (measured, table, declared in a job file, or estimated from similar reference jobs)."""

    job_type: str
    scale_factor: int
    rates: dict[str, float]
    sources: dict[str, str]


@dataclass(frozen=True)
class WorkerStatus:
    worker_id: str
    address: str
    gpu_type: str
    gpus: int
    alive: bool
    last_seen_ago: float           # live: since its last heartbeat; from state: since it (re)registered or died
    running_jobs: tuple[int, ...]


@dataclass(frozen=True)
class ClusterStatus:
    """`source` is "scheduler" for a live answer, else the state directory it was read from
    (gavel_ng.runtime.status.read_state_dir): then
    workers and jobs are as last recorded (a crashed scheduler's `running` may be stale), progress is
    the last checkpoint's, and `round_ends_in` is None."""

    workers: list[WorkerStatus]
    jobs: list[JobStatus]
    allocation: list[tuple[tuple[int, ...], dict[str, float]]]
    worker_types: list[str]
    policy: str
    round: int
    round_seconds: float
    round_ends_in: float | None
    renewals: int
    launches: int
    throughputs: dict[str, float]
    source: str = "scheduler"
    job_counts: dict[str, int] = field(default_factory=dict)   # status -> jobs, over every job
    round_note: str = ""           # instead of a countdown: "idle: nothing to run (...)", "planning the next round"
    # a round policy's decision for the round in force, (job, worker type, GPUs) per job it runs; None: the
    # policy is an allocation policy (its time shares are `allocation`)
    decision: list[tuple[int, str, int]] | None = None
    classes: list[ClassRates] = field(default_factory=list)   # the listed jobs' classes (what the policy believes)
    now: float = 0.0               # the clock this status was taken at (the scheduler's, or the reader's)

    @property
    def jobs_total(self) -> int:
        """Every job the scheduler holds (`jobs` may list only some)."""
        return sum(self.job_counts.values()) if self.job_counts else len(self.jobs)

    @property
    def live(self) -> bool:
        return self.source == "scheduler"

    @classmethod
    def from_proto(cls, m: pb.StatusReply) -> ClusterStatus:
        workers = [WorkerStatus(w.worker_id, w.address, w.gpu_type, w.gpus, w.alive, w.last_seen_ago,
                                tuple(w.running_jobs)) for w in m.workers]
        alloc = [(tuple(r.jobs), dict(r.share)) for r in m.allocation]
        return cls(workers, [JobStatus.from_proto(j) for j in m.jobs], alloc, list(m.worker_types), m.policy,
                   m.round, m.round_seconds, m.round_ends_in, m.renewals, m.launches, dict(m.throughputs),
                   job_counts=dict(m.job_counts), round_note=m.round_note,
                   decision=[(e.job_id, e.worker_type, e.gpus) for e in m.decision] if m.round_policy else None,
                   classes=[ClassRates(c.job_type, c.scale_factor, dict(c.rates), dict(c.sources))
                            for c in m.classes], now=m.now or time.time())


@dataclass(frozen=True)
class UserInfo:
    """A credential as the scheduler lists it (never its token, which only the add that made it answers)."""

    name: str
    role: str
    entities: tuple[str, ...]
    manages: tuple[str, ...]
    created: float
    revoked: float | None

    @classmethod
    def from_proto(cls, m: pb.UserInfo) -> UserInfo:
        return cls(m.name, m.role, tuple(m.entities), tuple(m.manages), m.created, m.revoked or None)


def placement_label(worker_type: str, placement: list[tuple[str, int]]) -> str:
    """'v100 w1:0,1 w2:0': the worker type, then each worker's GPUs (the scheduler's JobInfo form)."""
    gpus: dict[str, list[str]] = {}
    for w, g in placement:
        gpus.setdefault(w, []).append(str(g))
    return worker_type + " " + " ".join(f"{w}:{','.join(g)}" for w, g in gpus.items())


class SchedulerClient:
    def __init__(self, address: str = "127.0.0.1:50060", token: str | None = None, tls_ca: str | None = None,
                 timeout: float = 10.0):
        token = token if token is not None else read_token()
        self.channel = open_channel(address, Security(token or "-", tls_ca=tls_ca))
        self.stub = Stub(self.channel, "Scheduler", token or "", timeout=timeout)

    def __enter__(self) -> SchedulerClient:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        self.channel.close()

    def _call(self, method: str, request, timeout: float | None = None):
        try:
            return getattr(self.stub, method)(request, timeout=timeout)
        except grpc.RpcError as exc:
            raise SchedulerError(exc.code().name, exc.details() or "") from None

    def submit(self, jobs: JobSpec | dict | list, key: str | None = None, retries: int = 8,
               timeout: float = 300.0) -> list[int]:
        """Submit one job or several (JobSpec or job-file dicts); returns their ids.

        Exactly once: each call carries an idempotency key (`key`, else a random one), and a call
        that may or may not have reached the scheduler (UNAVAILABLE, DEADLINE_EXCEEDED) is retried
        with it, at most `retries` times with backoff; the scheduler answers a retry with the ids it
        gave first. More than JOBS_PER_CALL jobs go in several calls, keyed KEY/1, KEY/2, ...
        """
        return self.submit_checked(jobs, key, retries=retries, timeout=timeout)[0]

    def submit_checked(self, jobs: JobSpec | dict | list, key: str | None = None, strict: bool = False,
                       retries: int = 8, timeout: float = 300.0) -> tuple[list[int], list[str]]:
        """submit(), with the scheduler's warnings: one line per job no current worker can run. `strict`:
        such a job makes the scheduler refuse the call (SchedulerError INVALID_ARGUMENT, nothing added)."""
        items = jobs if isinstance(jobs, list) else [jobs]
        specs = [j if isinstance(j, JobSpec) else JobSpec.from_dict(j, f"jobs[{i}]") for i, j in enumerate(items)]
        key = key or uuid.uuid4().hex
        chunks = [specs[i:i + JOBS_PER_CALL] for i in range(0, len(specs), JOBS_PER_CALL)] or [[]]
        ids: list[int] = []
        warnings: list[str] = []
        for n, chunk in enumerate(chunks):
            req = pb.SubmitJobsRequest(jobs=[s.to_proto() for s in chunk], strict=strict,
                                       idempotency_key=key if len(chunks) == 1 else f"{key}/{n + 1}")
            reply = self._retried("SubmitJobs", req, retries, timeout)
            ids += reply.job_ids
            warnings += reply.warnings
        return ids, warnings

    def _retried(self, method: str, request, retries: int, timeout: float):
        for attempt in range(retries + 1):
            try:
                return self._call(method, request, timeout)
            except SchedulerError as exc:
                if exc.code not in RETRIED or attempt == retries:
                    raise
                delay = min(8.0, 0.5 * 2 ** attempt)
                log.warning("%s: %s; retrying in %.1fs (%d of %d)", method, exc.code, delay, attempt + 1, retries)
                time.sleep(delay)
        raise AssertionError("unreachable")

    def cancel(self, job_id: int) -> str:
        return self._call("CancelJob", pb.CancelJobRequest(job_id=job_id)).status

    # ----- credentials (admin) -------------------------------------------------------------------
    def add_user(self, name: str, role: str = "user", entities=(), manages=()) -> tuple[UserInfo, str]:
        """Issue a credential; returns it and its token (shown this once: the scheduler keeps only its hash)."""
        reply = self._call("ManageUsers", pb.UserRequest(action="add", name=name, role=role, entities=list(entities),
                                                         manages=list(manages)))
        return UserInfo.from_proto(reply.users[0]), reply.token

    def grant(self, name: str, entities=(), manages=()) -> UserInfo:
        reply = self._call("ManageUsers", pb.UserRequest(action="grant", name=name, entities=list(entities),
                                                         manages=list(manages)))
        return UserInfo.from_proto(reply.users[0])

    def revoke(self, name: str) -> UserInfo:
        """Refused from the scheduler's next call on."""
        return UserInfo.from_proto(self._call("ManageUsers", pb.UserRequest(action="revoke", name=name)).users[0])

    def users(self) -> list[UserInfo]:
        return [UserInfo.from_proto(u) for u in self._call("ManageUsers", pb.UserRequest(action="list")).users]

    def jobs(self, include_finished: bool = True, ids: list[int] | None = None) -> list[JobStatus]:
        """Every job (or those of `ids`), fetched page by page (ListJobs)."""
        out, token = [], ""
        while True:
            reply = self._call("ListJobs", pb.ListJobsRequest(include_finished=include_finished, page_token=token,
                                                              job_ids=ids or []))
            out += [JobStatus.from_proto(j) for j in reply.jobs]
            token = reply.next_page_token
            if not token:
                return out

    def status(self, job_limit: int = 0) -> ClusterStatus:
        """Workers, allocation, job counts and the first `job_limit` jobs (0: the scheduler's default, 100)."""
        return ClusterStatus.from_proto(self._call("GetStatus", pb.StatusRequest(job_limit=job_limit)))

    def wait(self, job_ids: list[int], timeout: float = 3600.0, poll: float = 0.5) -> list[JobStatus]:
        """Poll until every job finished; raises TimeoutError with the stragglers named."""
        end = time.monotonic() + timeout
        wanted = set(job_ids)
        while wanted:
            jobs = self.jobs(ids=sorted(wanted))
            if len(jobs) == len(wanted) and all(j.finished for j in jobs):
                return sorted(jobs, key=lambda j: j.job_id)
            if time.monotonic() > end:
                left = [j.job_id for j in jobs if not j.finished]
                raise TimeoutError(f"jobs {left} not finished after {timeout:.0f}s")
            time.sleep(poll)
        return []
