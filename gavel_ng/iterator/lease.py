"""What a job process knows about its place in the cluster, and its lease.

The worker daemon passes everything through environment variables (`JobEnv`); the
lease itself comes from the scheduler (InitJob, UpdateLease). Renewals are asked in a
background thread so a training step never waits on the network; if the scheduler
cannot be reached the lease simply is not renewed and the job checkpoints at its end.
Between renewals the job reports its step every `progress_seconds` (a sixth of a round,
2 to 30 s), so `gavel-ng status` shows live progress; such a report renews nothing.
"""

from __future__ import annotations

import logging
import os
import random
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from gavel_ng.protocol import leasefile

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class JobEnv:
    scheduler: str
    job_id: int
    attempt: int
    token: str
    checkpoint_dir: Path
    steps: int
    lease_deadline: float          # time.time() on this machine, set by the worker
    result_file: Path | None
    tls_ca: str | None
    rank: int
    world_size: int
    adaptive: str = ""             # the job spec's adaptive block (JSON) when the job is adaptive
    servers: int = 1               # workers the attempt spans
    grace: float = 0.0             # the worker kills the job this long after its lease (0: unknown)
    checkpoint_every_rounds: int = 0   # with renewals: checkpoint at least this often (0: only at the end)
    lease_file: Path | None = None  # where rank 0 writes the signed lease ends it is granted, for the worker
    identity: str = ""             # its state's id and job id: the checkpoints it restores must carry it

    @classmethod
    def from_env(cls, env: dict[str, str] | None = None) -> JobEnv | None:
        """None outside a gavel_ng worker (the iterator then runs standalone)."""
        env = os.environ if env is None else env
        if "GAVEL_NG_JOB_ID" not in env:
            return None
        return cls(env["GAVEL_NG_SCHEDULER"], int(env["GAVEL_NG_JOB_ID"]), int(env["GAVEL_NG_ATTEMPT"]),
                   env.get("GAVEL_NG_JOB_TOKEN", ""), Path(env["GAVEL_NG_CHECKPOINT_DIR"]),
                   int(env["GAVEL_NG_STEPS"]), float(env["GAVEL_NG_LEASE_DEADLINE"]),
                   Path(env["GAVEL_NG_RESULT_FILE"]) if env.get("GAVEL_NG_RESULT_FILE") else None,
                   env.get("GAVEL_NG_TLS_CA") or None, int(env.get("RANK", "0")), int(env.get("WORLD_SIZE", "1")),
                   env.get("GAVEL_NG_ADAPTIVE", ""), int(env.get("GAVEL_NG_SERVERS", "1")),
                   float(env.get("GAVEL_NG_GRACE_SECONDS") or 0), int(env.get("GAVEL_NG_CHECKPOINT_EVERY_ROUNDS") or 0),
                   Path(env[leasefile.ENV]) if env.get(leasefile.ENV) else None, env.get("GAVEL_NG_JOB_IDENTITY", ""))


class LeaseClient:
    """Rank 0's view of the lease: deadline on the monotonic clock, renewals in the background."""

    def __init__(self, env: JobEnv):
        from gavel_ng.protocol.protos import gavel_pb2 as pb
        from gavel_ng.protocol.rpc import Security, Stub, open_channel

        self.pb = pb
        self.env = env
        self.steps_total = env.steps
        self.deadline = time.monotonic() + (env.lease_deadline - time.time())
        self.renew_at: float | None = None
        self.renewals = 0
        self.round_seconds = 0.0
        self.stale = False                 # the scheduler wrote this attempt off: stop, commit nothing
        self.checkpoint_step = 0           # newest checkpoint this attempt committed, sent with renewals
        self.progress_seconds = 0.0        # between renewals, report the step this often (0: never)
        self._reported = time.monotonic()
        sec = Security(env.token or "-", tls_ca=env.tls_ca)
        self.channel = open_channel(env.scheduler, sec)
        self.stub = Stub(self.channel, "Scheduler", env.token, timeout=10.0)
        self._pending: threading.Thread | None = None
        self._last_req = None
        self._lock = threading.Lock()

    def init(self, checkpoint_step: int) -> None:
        req = self.pb.InitJobRequest(job_id=self.env.job_id, attempt=self.env.attempt, checkpoint_step=checkpoint_step)
        try:
            lease = self._busy_retried(self.stub.InitJob, req, 10.0, time.monotonic() + 30.0)
        except Exception as exc:      # grpc.RpcError and friends: fall back to the worker's lease
            log.warning("InitJob failed (%s): running to the worker's lease", exc)
            return
        self.steps_total = int(lease.steps_total) or self.steps_total
        self.round_seconds = float(lease.round_seconds)
        self.progress_seconds = min(30.0, max(2.0, self.round_seconds / 6)) if self.round_seconds > 0 else 0.0
        self._apply(lease)

    def _apply(self, lease) -> None:
        now = time.monotonic()
        self.stale = self.stale or lease.stop
        with self._lock:
            if lease.seconds_left >= 0:
                self.deadline = now + lease.seconds_left
            self.renew_at = now + lease.renew_in if lease.renew_in >= 0 and lease.seconds_left >= 0 else None
            if lease.renewed:
                self.renewals += 1
        if lease.lease_mac and self.env.lease_file is not None:
            try:
                leasefile.write(self.env.lease_file, leasefile.LeaseRecord(self.env.job_id, self.env.attempt,
                                                                           lease.lease_end, lease.lease_mac))
            except OSError as exc:
                log.info("cannot write the lease file (%s): the worker learns the lease by heartbeat", exc)

    def maybe_renew(self, steps: int, compute_seconds: float, report=None) -> None:
        """Start a renewal request if one is due and none is in flight. `report()`, when given,
        is called only then: an adaptive job's AdaptiveReport travels with the request."""
        now = time.monotonic()
        with self._lock:
            if self._pending is not None and self._pending.is_alive():
                return
            due = self.renew_at is not None and now >= self.renew_at
            progress = not due and 0 < self.progress_seconds <= now - self._reported
            if not due and not progress:
                return
            self._reported = now
            if due:
                self.renew_at = None
        req = self.pb.UpdateLeaseRequest(job_id=self.env.job_id, attempt=self.env.attempt, steps=steps,
                                         compute_seconds=compute_seconds, checkpoint_step=self.checkpoint_step,
                                         progress_only=progress)
        if progress:
            self._ask(req)                 # not kept for wait_pending: a renewal is asked with its own request
            return
        if report is not None:
            from gavel_ng.protocol.reports import encode_report

            req.report.CopyFrom(encode_report(report()))
        self._last_req = req
        self._ask(req)

    def _ask(self, req) -> None:
        self._pending = threading.Thread(target=self._renew, args=(req,), name="lease", daemon=True)
        self._pending.start()

    def _renew(self, req) -> None:
        timeout = max(1.0, self.deadline - time.monotonic() + 1.0)
        try:
            self._apply(self._busy_retried(self.stub.UpdateLease, req, timeout, self.deadline - 1.0))
        except Exception as exc:
            if req.progress_only:
                log.debug("progress report failed (%s)", exc)
            else:
                log.info("lease renewal failed (%s): stopping at the lease end", exc)

    @staticmethod
    def _busy_retried(call, req, timeout: float, give_up: float):
        """A call the scheduler refused as busy (RESOURCE_EXHAUSTED: over this job's share of its
        threads, gavel_ng.protocol.limits) is asked again after a short jittered pause, until `give_up`."""
        import grpc

        delay = 0.2
        while True:
            try:
                return call(req, timeout=timeout)
            except grpc.RpcError as exc:
                if exc.code() != grpc.StatusCode.RESOURCE_EXHAUSTED or time.monotonic() + 2 * delay >= give_up:
                    raise
            time.sleep(delay * random.uniform(1.0, 2.0))
            delay = min(2.0, 2 * delay)

    def wait_pending(self, until: float) -> None:
        """Give a renewal until `until` (monotonic) to land: wait for the request in flight, and ask
        again whenever the scheduler says so (renew_in: its decision was not made yet)."""
        while True:
            t = self._pending
            if t is not None and t.is_alive():
                t.join(timeout=max(0.0, until - time.monotonic()))
            with self._lock:
                at = self.renew_at
                if at is None or at >= until or self._last_req is None or time.monotonic() >= until:
                    return
                self.renew_at = None
            time.sleep(max(0.0, at - time.monotonic()))
            self._ask(self._last_req)

    def final(self, steps: int, compute_seconds: float, checkpoint_step: int, timeout: float = 5.0) -> None:
        """The attempt's last report, as it exits: its step and newest checkpoint. The scheduler believes a
        worker's end-of-attempt report only as far as the job's own reports go (runtime.checks), so this is
        what records the final checkpoint; if it is lost, the next attempt's InitJob tells it instead."""
        if self.stale:
            return
        req = self.pb.UpdateLeaseRequest(job_id=self.env.job_id, attempt=self.env.attempt, steps=steps,
                                         compute_seconds=compute_seconds, checkpoint_step=checkpoint_step,
                                         progress_only=True)
        try:
            self._busy_retried(self.stub.UpdateLease, req, timeout, time.monotonic() + timeout)
        except Exception as exc:
            log.info("final progress report failed (%s): the next attempt reports its checkpoint", exc)

    def may_commit(self) -> bool:
        """A checkpoint may be committed only within the lease plus grace: past that the
        scheduler may have relaunched the job (its fence ran out), and this run is stale."""
        if self.stale:
            return False
        return self.env.grace <= 0 or time.monotonic() <= self.deadline + self.env.grace

    def close(self) -> None:
        self.channel.close()

