"""Simulated worker daemons for bench_runtime_scale.py: many in one process, each as `gavel-ng worker` talks.

Every simulated worker registers, heartbeats and reports with the daemon's real messages, its
token and its 5 s deadline, at the pace the scheduler's RegisterWorker reply sets, and follows the
daemon's reporter loop (gavel_ng.worker.daemon: NOT_FOUND means register again, other failures
back off but keep the heartbeat pace; its ends go in one ReportDones call). Each serves the Worker
service on its own port: RunJob (and RunJobs, a round's launches in one call) queues the attempt
(listed as running in every heartbeat from then on) and runs nothing; KillJob
stops it. As the daemon does for a job that never exits by itself, an attempt ends at its lease
end plus the grace period (the lease ends come with heartbeats), and its end is reported
(`killed-lease`, no progress). asyncio and grpc.aio keep 1,250 of them in one process.

With `jobs="renew"` each attempt also talks as GavelIterator's lease client does (gavel_ng.iterator
.lease), with the job token RunJob carried: InitJob, a progress report every sixth of a round,
a renewal when the lease says so; it stops at the end of a lease that was not renewed (or at
once when told `stop`) and its worker reports it `exited`, at 1 step a second.

The process is driven by its parent through a pipe: ("stats",) returns and resets the window's
figures (heartbeat latencies, failures by code, workers told they are unknown, launches, reports,
and this process's own event-loop lag, the floor under every latency it measures).
"""

from __future__ import annotations

import asyncio
import random
import threading
import time
import uuid
from collections import Counter
from dataclasses import dataclass, field

import grpc
from grpc import aio

from gavel_ng.protocol.limits import MAX_BATCH
from gavel_ng.protocol.protos import gavel_pb2 as pb
from gavel_ng.protocol.rpc import _service
from gavel_ng.worker.heartbeat_route import PORT_TIMEOUT, SKIP_AFTER_FAILURE, UNREACHABLE

DEADLINE = 5.0           # the daemon's Stub timeout toward the scheduler
TICK = 0.05


@dataclass
class Window:
    """What one measurement window saw (reset by each `stats`)."""

    latencies: list[float] = field(default_factory=list)      # seconds, heartbeats answered
    sent: list[float] = field(default_factory=list)           # ... and when each was sent (unix seconds)
    failed: Counter = field(default_factory=Counter)          # heartbeats failed, by status code
    unknown: set[str] = field(default_factory=set)            # workers told NOT_FOUND (declared dead)
    registrations: int = 0
    runjobs: int = 0
    job_calls: int = 0                                        # renew mode: InitJob and UpdateLease answered
    job_failed: Counter = field(default_factory=Counter)      # ... failed, by status code
    reports: int = 0
    lag: list[float] = field(default_factory=list)            # this event loop's lag per tick
    port_answered: int = 0                                    # heartbeats the heartbeat port answered
    port_asked: int = 0                                       # ... left to the scheduler's own port
    port_failed: Counter = field(default_factory=Counter)     # ... failed there (then sent to the scheduler's)

    def summary(self, workers: list[SimWorker]) -> dict:
        return {"latencies": self.latencies, "sent": self.sent, "failed": dict(self.failed),
                "unknown": len(self.unknown),
                "registrations": self.registrations, "runjobs": self.runjobs, "reports": self.reports,
                "job_calls": self.job_calls, "job_failed": dict(self.job_failed),
                "lag": self.lag, "port_answered": self.port_answered, "port_asked": self.port_asked,
                "port_failed": dict(self.port_failed), "registered": sum(w.registered for w in workers),
                "tasks": sum(len(w.tasks) for w in workers)}


def _stub(channel: aio.Channel, service: str) -> dict:
    desc = _service(service)
    return {m.name: channel.unary_unary(f"/{desc.full_name}/{m.name}",
                                        request_serializer=getattr(pb, m.input_type.name).SerializeToString,
                                        response_deserializer=getattr(pb, m.output_type.name).FromString)
            for m in desc.methods}


@dataclass
class Task:
    req: pb.RunJobRequest
    deadline: float
    started: float
    stop: str | None = None
    exited: bool = False                  # renew mode: the fake job ended at its lease end


class SimWorker:
    def __init__(self, scheduler: str, token: str, gpu_type: str, gpus: int, window: Window, jobs: str = "idle"):
        self.worker_id = uuid.uuid4().hex[:12]
        self.scheduler, self.gpu_type, self.gpus = scheduler, gpu_type, gpus
        self.metadata = (("authorization", f"Bearer {token}"),)
        self.window = window
        self.tasks: dict[tuple[int, int], Task] = {}
        self.pending: list[pb.DoneReport] = []
        self.batch_reports = True                  # ReportDones (False: the scheduler is of an earlier version)
        self.registered = False
        self.heartbeat_seconds, self.grace = 2.0, 30.0
        self.wake = asyncio.Event()
        self.port = 0
        self.jobs = jobs
        self.port_stub = self.port_channel = None    # the scheduler's heartbeat port (runtime.front), when named
        self.skip_port_until = 0.0

    async def start(self) -> None:
        handlers = {"RunJob": grpc.unary_unary_rpc_method_handler(
            self.run_job, request_deserializer=pb.RunJobRequest.FromString,
            response_serializer=pb.Empty.SerializeToString),
            "RunJobs": grpc.unary_unary_rpc_method_handler(
            self.run_jobs, request_deserializer=pb.RunJobsRequest.FromString,
            response_serializer=pb.BatchReply.SerializeToString),
            "KillJob": grpc.unary_unary_rpc_method_handler(
            self.kill_job, request_deserializer=pb.KillJobRequest.FromString,
            response_serializer=pb.Empty.SerializeToString)}
        self.server = aio.server()
        self.server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(_service("Worker").full_name,
                                                                                   handlers),))
        self.port = self.server.add_insecure_port("127.0.0.1:0")
        await self.server.start()
        # one connection of its own to the scheduler, as each daemon has
        self.channel = aio.insecure_channel(self.scheduler, options=[("grpc.use_local_subchannel_pool", 1)])
        self.stub = _stub(self.channel, "Scheduler")

    # ----- the Worker service ------------------------------------------------------------------
    async def run_job(self, req: pb.RunJobRequest, context) -> pb.Empty:
        ref = (req.job_id, req.attempt)
        if ref not in self.tasks:
            now = time.time()
            self.tasks[ref] = t = Task(req, now + req.lease_seconds, now)
            self.window.runjobs += 1
            if self.jobs == "renew":
                asyncio.get_running_loop().create_task(self.iterate(t))
        return pb.Empty()

    async def run_jobs(self, req: pb.RunJobsRequest, context) -> pb.BatchReply:
        for r in req.jobs:
            await self.run_job(r, context)
        return pb.BatchReply(refused=[""] * len(req.jobs))

    async def iterate(self, t: Task) -> None:
        """The job's side of the lease (gavel_ng.iterator.lease.LeaseClient), training nothing at 1 step/s:
        one call in flight at a time, a busy scheduler's RESOURCE_EXHAUSTED asked again after a jittered
        pause (until a second before the lease ends), any other failure ends the renewals."""
        req, metadata = t.req, (("authorization", f"Bearer {t.req.job_token}"),)
        loop = asyncio.get_running_loop()
        start = loop.time()
        end = start + req.lease_seconds
        renew_at, every, renewing = None, 0.0, True
        try:
            lease = await self._busy(self.stub["InitJob"], pb.InitJobRequest(job_id=req.job_id, attempt=req.attempt),
                                     metadata, 10.0, loop.time() + 30.0)
            end = loop.time() + lease.seconds_left
            renew_at = loop.time() + lease.renew_in if lease.renew_in >= 0 and lease.seconds_left >= 0 else None
            every = min(30.0, max(2.0, lease.round_seconds / 6)) if lease.round_seconds > 0 else 0.0
        except aio.AioRpcError:
            lease = None                      # runs to the worker's lease
        reported = loop.time()
        while (lease is None or not lease.stop) and t.stop is None and loop.time() < end:
            due = renewing and renew_at is not None and loop.time() >= renew_at
            if due or (every and loop.time() - reported >= every):
                reported = loop.time()
                if due:
                    renew_at = None
                ran = int(loop.time() - start)
                call = pb.UpdateLeaseRequest(job_id=req.job_id, attempt=req.attempt, steps=ran,
                                             compute_seconds=float(ran), progress_only=not due)
                try:
                    lease = await self._busy(self.stub["UpdateLease"], call, metadata,
                                             max(1.0, end - loop.time() + 1.0), end - 1.0)
                    if lease.seconds_left >= 0:
                        end = loop.time() + lease.seconds_left
                    if lease.renew_in >= 0 and lease.seconds_left >= 0:
                        renew_at = loop.time() + lease.renew_in
                    elif due:
                        renew_at = None
                except aio.AioRpcError:
                    renewing = renewing and not due    # a renewal that failed: stop at the lease end
            await asyncio.sleep(0.25)
        if t.stop is None:
            t.exited = True

    async def _busy(self, call, request, metadata, timeout: float, give_up: float):
        """LeaseClient._busy_retried: RESOURCE_EXHAUSTED is asked again after 0.2 s doubling to 2 s, jittered."""
        loop = asyncio.get_running_loop()
        delay = 0.2
        while True:
            try:
                out = await call(request, metadata=metadata, timeout=timeout)
                self.window.job_calls += 1
                return out
            except aio.AioRpcError as exc:
                self.window.job_failed[exc.code().name] += 1
                if exc.code() != grpc.StatusCode.RESOURCE_EXHAUSTED or loop.time() + 2 * delay >= give_up:
                    raise
            await asyncio.sleep(delay * random.uniform(1.0, 2.0))
            delay = min(2.0, 2 * delay)

    async def kill_job(self, req: pb.KillJobRequest, context) -> pb.Empty:
        for (job, attempt), t in self.tasks.items():
            if job == req.job_id and req.attempt in (0, attempt) and t.stop is None:
                t.stop = "killed"
        return pb.Empty()

    def expire(self, now: float) -> None:
        """Attempts killed, or past their lease and grace, end; their reports are queued."""
        for ref, t in list(self.tasks.items()):
            if t.stop is None and now > t.deadline + self.grace:
                t.stop = "killed-lease"
            if t.exited:                 # renew mode: the job stopped at its lease end, 1 step a second
                del self.tasks[ref]
                ran = int(now - t.started)
                self.pending.append(pb.DoneReport(worker_id=self.worker_id, job_id=ref[0], attempt=ref[1],
                                                  steps=ran, steps_run=ran, compute_seconds=float(ran),
                                                  wall_seconds=now - t.started, reason="exited"))
                self.wake.set()
            elif t.stop is not None:
                del self.tasks[ref]
                self.pending.append(pb.DoneReport(worker_id=self.worker_id, job_id=ref[0], attempt=ref[1],
                                                  exit_code=-15, steps=-1, wall_seconds=now - t.started,
                                                  reason=t.stop))
                self.wake.set()

    # ----- the reporter (gavel_ng.worker.daemon.WorkerDaemon._reporter) ------------------------
    def _running(self) -> list[pb.AttemptRef]:
        return [pb.AttemptRef(job_id=j, attempt=a) for j, a in self.tasks]

    async def reporter(self, stop: asyncio.Event) -> None:
        failures = 0
        while not stop.is_set():
            pause = self.heartbeat_seconds if self.registered else 0.5
            try:
                if not self.registered:
                    await self._register()
                else:
                    await self._flush()
                    await self._heartbeat()
                failures = 0
            except aio.AioRpcError as exc:
                if exc.code() == grpc.StatusCode.NOT_FOUND:
                    self.window.unknown.add(self.worker_id)
                    self.registered = False
                    continue
                failures += 1
                back = min(0.5 * 2 ** (failures - 1), 10.0)
                pause = min(back, pause if self.registered else 1e9)
            try:
                await asyncio.wait_for(self.wake.wait(), pause)
            except TimeoutError:
                pass
            self.wake.clear()

    async def _register(self) -> None:
        pending = list(self.pending)
        req = pb.RegisterWorkerRequest(worker_id=self.worker_id, address=f"127.0.0.1:{self.port}",
                                       gpu_type=self.gpu_type, gpus=self.gpus, running=self._running(),
                                       pending=pending)
        reply = await self.stub["RegisterWorker"](req, metadata=self.metadata, timeout=DEADLINE)
        self.heartbeat_seconds, self.grace = reply.heartbeat_seconds or 2.0, reply.grace_seconds or 30.0
        if reply.heartbeat_port and self.port_stub is None:
            host = self.scheduler.rsplit(":", 1)[0]
            self.port_channel = aio.insecure_channel(f"{host}:{reply.heartbeat_port}",
                                                     options=[("grpc.use_local_subchannel_pool", 1)])
            self.port_stub = _stub(self.port_channel, "Scheduler")
        self.pending = [r for r in self.pending if r not in pending]
        self.registered = True
        self.window.registrations += 1

    async def _flush(self) -> None:
        """As the daemon: every pending end in one ReportDones call, one by one to a scheduler without it."""
        while self.pending:
            if self.batch_reports:
                reps = self.pending[:MAX_BATCH]
                try:
                    await self.stub["ReportDones"](pb.DoneReports(worker_id=self.worker_id, reports=reps),
                                                   metadata=self.metadata, timeout=DEADLINE)
                except aio.AioRpcError as exc:
                    if exc.code() != grpc.StatusCode.UNIMPLEMENTED:
                        raise
                    self.batch_reports = False
                    continue
            else:
                reps = self.pending[:1]
                await self.stub["ReportDone"](reps[0], metadata=self.metadata, timeout=DEADLINE)
            del self.pending[:len(reps)]
            self.window.reports += len(reps)

    async def _via_port(self, req: pb.HeartbeatRequest) -> pb.HeartbeatReply | None:
        """As the daemon's HeartbeatRoute: the scheduler's heartbeat port first, when it named one; None when
        the port left it to the scheduler or failed (left alone for SKIP_AFTER_FAILURE when unreachable)."""
        if self.port_stub is None or time.monotonic() < self.skip_port_until:
            return None
        try:
            reply = await self.port_stub["Heartbeat"](req, metadata=self.metadata, timeout=PORT_TIMEOUT)
        except aio.AioRpcError as exc:
            self.window.port_failed[exc.code().name] += 1
            if exc.code() in UNREACHABLE:
                self.skip_port_until = time.monotonic() + SKIP_AFTER_FAILURE
            return None
        if reply.ask_scheduler:
            self.window.port_asked += 1
            return None
        self.window.port_answered += 1
        return reply

    async def _heartbeat(self) -> None:
        start, sent = time.perf_counter(), time.time()
        req = pb.HeartbeatRequest(worker_id=self.worker_id, running=self._running())
        try:
            reply = await self._via_port(req)
            if reply is None:
                reply = await self.stub["Heartbeat"](req, metadata=self.metadata, timeout=DEADLINE)
        except aio.AioRpcError as exc:
            if exc.code() != grpc.StatusCode.NOT_FOUND:
                self.window.failed[exc.code().name] += 1
            raise
        self.window.latencies.append(time.perf_counter() - start)
        self.window.sent.append(sent)
        now = time.time()
        for lease in reply.leases:
            t = self.tasks.get((lease.job_id, lease.attempt))
            if t is not None:
                t.deadline = max(t.deadline, now + lease.seconds_left)   # as the daemon: a lease end only grows
        for ref in reply.kill:
            t = self.tasks.get((ref.job_id, ref.attempt))
            if t is not None and t.stop is None:
                t.stop = "killed"


async def _serve(conn, scheduler: str, token: str, counts: dict[str, int], gpus: int, seed: int, jobs: str) -> None:
    random.seed(seed)
    loop = asyncio.get_running_loop()
    window = Window()
    workers = [SimWorker(scheduler, token, t, gpus, window, jobs) for t, n in counts.items() for _ in range(n)]
    random.shuffle(workers)
    for w in workers:
        await w.start()
    stop = asyncio.Event()
    tasks = []
    for w in workers:                    # daemons start at random moments: their heartbeats spread
        tasks.append(asyncio.create_task(w.reporter(stop)))
        await asyncio.sleep(2.0 / len(workers))

    async def monitor() -> None:
        last = time.monotonic()
        n = 0
        while not stop.is_set():
            await asyncio.sleep(TICK)
            now = time.monotonic()
            window.lag.append(max(0.0, now - last - TICK))
            last = now
            n += 1
            if n % 5 == 0:
                t = time.time()
                for w in workers:
                    w.expire(t)

    tasks.append(asyncio.create_task(monitor()))
    answers: asyncio.Queue = asyncio.Queue()

    def listen() -> None:                # the parent's commands, from a thread (the pipe blocks)
        while True:
            try:
                cmd = conn.recv()
            except EOFError:
                cmd = ("stop",)
            loop.call_soon_threadsafe(answers.put_nowait, cmd)
            if cmd[0] == "stop":
                return

    threading.Thread(target=listen, daemon=True).start()
    conn.send(("ready", len(workers)))
    while True:
        cmd = await answers.get()
        if cmd[0] == "stats":
            conn.send(("stats", window.summary(workers)))
            fresh = Window()
            for w in workers:
                w.window = fresh
            window = fresh
        elif cmd[0] == "stop":
            stop.set()
            for w in workers:
                w.wake.set()
            await asyncio.gather(*tasks, return_exceptions=True)
            for w in workers:
                await w.channel.close()
                if w.port_channel is not None:
                    await w.port_channel.close()
                await w.server.stop(0)
            conn.send(("stopped",))
            return


def serve(conn, scheduler: str, token: str, counts: dict[str, int], gpus: int = 8, seed: int = 0,
          jobs: str = "idle") -> None:
    """The child process's entry point: `counts` workers of each GPU type, `gpus` GPUs each; `jobs`: idle
    (attempts run nothing and say nothing) or renew (they keep their lease as the iterator does)."""
    asyncio.run(_serve(conn, scheduler, token, counts, gpus, seed, jobs))
