"""The worker daemon: one per server, owns its GPUs, runs what the scheduler sends.

Threads: the gRPC server (RunJob / KillJob only queue work), `monitor` (starts queued
tasks once their GPUs are free, watches processes, enforces leases: their ends come with
heartbeats and, signed, in the lease files jobs write) and `reporter`
(registers, heartbeats, delivers end-of-attempt reports, re-registers after a scheduler
restart and keeps reports until the scheduler has taken them).

Its own service (RunJob, KillJob) accepts only the scheduler: the token it gave the scheduler
when it registered (`call_token`), which nothing else learns. Jobs run as their users where the
worker runs as root, with an allowlisted environment, in directories of their own
(worker.isolation).
"""

from __future__ import annotations

import logging
import os
import shutil
import signal
import socket
import sys
import tempfile
import threading
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

import grpc

from ..errors import InputError
from ..protocol import leasefile
from ..protocol.limits import MAX_BATCH
from ..protocol.protos import gavel_pb2 as pb
from ..protocol.rpc import (
    ACCOUNT_NAME,
    SCHEDULER,
    Security,
    Stub,
    make_server,
    new_token,
    open_channel,
    token_authenticator,
)
from ..protocol.text import unrunnable
from .backoff import Backoff
from .heartbeat_route import HeartbeatRoute
from .isolation import (
    JOB_ENV_ALLOW,
    Refused,
    RunAs,
    append_job_file,
    job_environment,
    open_job_file,
    own_dir,
    read_job_file,
    run_as,
)
from .proc import (
    NOT_RUN,
    RankResult,
    builtin_command,
    clear_stale_rendezvous,
    free_port,
    launch_problem,
    log_tail,
    signal_group,
    spawn,
)
from .standby import StandbyPool

log = logging.getLogger(__name__)
TICK = 0.05


@dataclass
class Task:
    """This worker's share of one attempt: one process per GPU."""

    req: pb.RunJobRequest
    deadline: float                      # lease end, time.time()
    procs: list = field(default_factory=list)
    results: list[Path] = field(default_factory=list)
    started: float | None = None
    stop_reason: str | None = None       # killed | killed-lease | rank-exited (a rank failed: the others are stopped)
    launch_error: str = ""               # why it could not start (then it has no processes, or not all)
    logs: list[Path] = field(default_factory=list)   # each started rank's log file
    who: RunAs | None = None             # the account its processes run as
    scratch: Path | None = None          # its own directory under the worker's work dir (results, lease file)
    term_sent: float | None = None       # SIGTERM (the iterator checkpoints), SIGKILL a grace period later
    lease_file: Path | None = None       # where the job writes the renewals it was granted (leasefile)
    lease_seen: tuple = ()               # that file's (inode, mtime, size) when last read
    bad_leases: int = 0                  # lease files ignored: not signed for this attempt, or too far ahead

    @property
    def ref(self) -> tuple[int, int]:
        return self.req.job_id, self.req.attempt


def machine_gpu_count(root: str = "/proc/driver/nvidia/gpus") -> int | None:
    """How many NVIDIA GPUs the driver lists on this machine; None where there is no driver
    (a CPU machine, whose "GPUs" are process slots: any ids go)."""
    try:
        return sum(1 for _ in Path(root).iterdir())
    except OSError:
        return None


def check_gpu_ids(ids: list[int], machine: int | None) -> None:
    """Refuse GPU ids the machine does not have. A rank given such an id sees no GPU and would
    train on the CPU with gloo while its peers use NCCL, and the job would hang at rendezvous."""
    bad = [g for g in ids if g < 0 or (machine is not None and g >= machine)]
    if bad:
        have = "" if machine is None else f"; this machine has {machine} GPUs (ids 0-{machine - 1})"
        flag = "--gpu-ids" if ids != list(range(len(ids))) else "--gpus"
        value = ",".join(map(str, ids)) if flag == "--gpu-ids" else len(ids)
        raise InputError(flag, value, f"GPU ids {bad} do not exist{have}")


class WorkerDaemon:
    def __init__(self, scheduler: str, gpu_type: str, gpus: int, security: Security, bind: str = "0.0.0.0",
                 port: int = 0, advertise: str | None = None, gpu_ids: list[int] | None = None,
                 work_dir: str | None = None, python: str = sys.executable, standby: int | None = None,
                 labels: list[str] | None = None, token_source: str = "$GAVEL_NG_TOKEN", job_env=()):
        if gpus < 1:
            raise InputError("--gpus", gpus, "must be >= 1")
        self.gpu_ids = list(gpu_ids) if gpu_ids else list(range(gpus))
        if len(self.gpu_ids) != gpus:
            raise InputError("--gpu-ids", gpu_ids, f"must list {gpus} GPUs")
        check_gpu_ids(self.gpu_ids, machine_gpu_count())
        self.scheduler, self.gpu_type, self.gpus = scheduler, gpu_type.lower(), gpus
        self.labels = sorted(set(labels or ()))   # this server's labels (gavel_ng.rules), sent at registration
        self.security, self.bind, self.port = security, bind, port
        self.advertise = advertise or socket.gethostname()
        self.python = python
        self.worker_id = uuid.uuid4().hex[:12]
        self._own_dir = work_dir is None
        self.work_dir = Path(work_dir or tempfile.mkdtemp(prefix="gavel-worker-"))
        self.work_dir.mkdir(parents=True, exist_ok=True)
        self.work_dir.chmod(0o711)               # jobs reach their own scratch directories in it, nothing else
        self.heartbeat_seconds, self.grace = 2.0, 30.0
        self.round_seconds = 0.0                 # from the scheduler; 0: lease files are not read
        self.job_env = (*JOB_ENV_ALLOW, *job_env)   # what jobs inherit of this process's environment
        self.call_token = new_token()            # the scheduler's, given at registration: RunJob needs it
        self.lease_key = security.token          # from the scheduler at registration (an old one: its token)
        self._warned: set[str] = set()
        self.standby = StandbyPool(1 if standby is None else standby, python, self.work_dir,
                                   env=job_environment(os.environ, self.job_env))
        self.lock = threading.Lock()
        self.queued: list[Task] = []
        self.running: list[Task] = []
        self.pending: list[pb.DoneReport] = []
        self.batch_reports = True                # ReportDones; False once a scheduler without it said UNIMPLEMENTED
        self.stop_event = threading.Event()
        self.report_event = threading.Event()
        self.registered = threading.Event()
        self.server = None
        self.channel = open_channel(scheduler, security)
        self.stub = Stub(self.channel, "Scheduler", security.token, timeout=5.0)
        self.route = HeartbeatRoute(scheduler, security)   # the scheduler's heartbeat port, when it has one
        self.backoff = Backoff(scheduler)
        self.refusal: InputError | None = None   # why the scheduler will never take this worker
        self.token_source = token_source
        self._threads: list[threading.Thread] = []

    # ----- lifecycle ---------------------------------------------------------------------------
    def start(self) -> None:
        self.server, self.port = make_server(self.bind, self.port, {"Worker": self}, self.security, max_workers=8,
                                             authenticate=token_authenticator(self.call_token, SCHEDULER))
        for name, target in (("monitor", self._monitor), ("reporter", self._reporter)):
            t = threading.Thread(target=target, name=name, daemon=True)
            t.start()
            self._threads.append(t)
        log.info("worker %s: %d x %s, serving on %s:%d, scheduler %s", self.worker_id, self.gpus, self.gpu_type,
                 self.advertise, self.port, self.scheduler)

    def stop(self, why: str = "") -> None:
        """Stop serving and end every job (a clean shutdown; `kill -9` relies on PDEATHSIG)."""
        self.stop_event.set()
        self.report_event.set()
        with self.lock:
            tasks = self.running + self.queued
        if why:      # a signal: said without -v (a refusal is said by the command, in one line)
            log.warning("worker %s stopping (%s): %d job attempt(s) end with it", self.worker_id, why, len(tasks))
        for t in tasks:
            for p in t.procs:
                signal_group(p, signal.SIGKILL)
        for t in self._threads:
            t.join(timeout=5)
        self.standby.close()
        if self.server is not None:
            self.server.stop(0.5).wait(2)
        self.channel.close()
        self.route.close()
        if self._own_dir:
            shutil.rmtree(self.work_dir, ignore_errors=True)

    def wait(self) -> None:
        while not self.stop_event.wait(0.5):
            pass

    # ----- Worker service ------------------------------------------------------------------------
    def RunJob(self, req: pb.RunJobRequest, context) -> pb.Empty:
        problem = self._queue(req)
        if problem:            # refused here, it never takes a GPU: the scheduler counts the attempt as failed
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, problem)
        return pb.Empty()

    def RunJobs(self, req: pb.RunJobsRequest, context) -> pb.BatchReply:
        """A round's launches on this worker in one call, each queued or refused as RunJob would."""
        if len(req.jobs) > MAX_BATCH:
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, f"jobs: {len(req.jobs)} launches, at most {MAX_BATCH}")
        return pb.BatchReply(refused=[self._queue(r) for r in req.jobs])

    def _queue(self, req: pb.RunJobRequest) -> str:
        """Queue an attempt; "" when queued (or already here: a retried call), else why it cannot run."""
        gpus = list(req.gpus)
        if not gpus or len(set(gpus)) != len(gpus) or not all(0 <= g < self.gpus for g in gpus):
            return f"gpus: {gpus} not distinct GPUs of 0..{self.gpus - 1}"
        problem = _unrunnable(req)
        if problem:
            return problem
        with self.lock:
            if any(t.ref == (req.job_id, req.attempt) for t in self.queued + self.running):
                return ""
            self.queued.append(Task(req, time.time() + req.lease_seconds))
        log.info("job %d attempt %d queued on GPUs %s", req.job_id, req.attempt, gpus)
        return ""

    def KillJob(self, req: pb.KillJobRequest, context) -> pb.Empty:
        with self.lock:
            for t in self.queued + self.running:
                if t.req.job_id == req.job_id and req.attempt in (0, t.req.attempt) and t.stop_reason is None:
                    t.stop_reason = "killed"
        return pb.Empty()

    # ----- monitor ----------------------------------------------------------------------------------
    def _monitor(self) -> None:
        while not self.stop_event.wait(TICK):
            try:
                self._tick()
            except Exception:
                log.exception("monitor")

    @staticmethod
    def _gpus_free(t: Task, busy: dict[int, set[int]]) -> bool:
        """Free, or (space sharing) held only by the job the scheduler paired this one with."""
        allowed = {t.req.share_with} if t.req.share_with else set()
        return all(busy.get(g, set()) <= allowed for g in t.req.gpus)

    def _tick(self) -> None:
        now = time.time()
        with self.lock:
            if not self.stop_event.is_set():
                self.standby.fill()
            busy: dict[int, set[int]] = {}          # GPU -> jobs running on it
            for t in self.running:
                for g in t.req.gpus:
                    busy.setdefault(g, set()).add(t.req.job_id)
            for t in list(self.queued):
                if t.stop_reason is not None or now > t.deadline + self.grace:
                    self.queued.remove(t)
                    self._end(t, [], t.stop_reason or "killed-lease")
                elif self._gpus_free(t, busy):
                    self.queued.remove(t)
                    for g in t.req.gpus:
                        busy.setdefault(g, set()).add(t.req.job_id)
                    self._start(t)
            for t in list(self.running):
                self._read_lease(t, now)
                codes = [p.poll() for p in t.procs]
                if all(c is not None for c in codes):
                    self.running.remove(t)
                    self._end(t, codes, t.stop_reason or "exited")
                    continue
                if t.stop_reason is None and (now > t.deadline + self.grace):
                    t.stop_reason = "killed-lease"
                    log.warning("job %d attempt %d outlived its lease by %.1fs: stopping it", *t.ref, now - t.deadline)
                if t.stop_reason is None and any(c not in (None, 0) for c in codes):
                    t.stop_reason = "rank-exited"            # a crashed rank would hang the others
                if t.stop_reason is not None:
                    if t.term_sent is None:
                        t.term_sent = now
                        for p in t.procs:
                            signal_group(p, signal.SIGTERM)
                    elif now - t.term_sent > self.grace:
                        for p in t.procs:
                            signal_group(p, signal.SIGKILL)

    def _read_lease(self, t: Task, now: float) -> None:
        """Move t's deadline to the end of a renewal the scheduler granted and the job wrote down
        (protocol.leasefile): heartbeats may not bring it in time, e.g. while the scheduler is paused.
        Lock held."""
        if t.lease_file is None or self.round_seconds <= 0:
            return
        try:
            st = os.lstat(t.lease_file)
        except OSError:
            return
        key = (st.st_ino, st.st_mtime_ns, st.st_size)
        if key == t.lease_seen:
            return
        t.lease_seen = key
        rec = leasefile.parse(read_job_file(t.lease_file, t.who or RunAs.own(), limit=4096))
        if rec is not None and (rec.job_id, rec.attempt) == t.ref and rec.valid(self.lease_key) \
                and rec.lease_end <= now + 2 * self.round_seconds + self.grace:
            t.deadline = max(t.deadline, rec.lease_end)
            return
        t.bad_leases += 1
        if t.bad_leases == 1:
            log.warning("job %d attempt %d: ignoring its lease file (not a lease the scheduler signed for it, or "
                        "too far ahead)", *t.ref)

    def _start(self, t: Task) -> None:
        """Start t's processes (lock held). Whatever keeps it from starting ends the attempt as a failed
        launch, said to the scheduler with the next report: its GPUs are never held for nothing."""
        try:
            self._spawn_ranks(t)
        except Refused as exc:
            self._not_started(t, str(exc), t.logs)
        except Exception as exc:          # an OSError, a bad value: one line, the attempt fails, the worker goes on
            self._not_started(t, f"cannot start: {type(exc).__name__}: {exc}", t.logs)
            for p in t.procs:
                signal_group(p, signal.SIGKILL)
            t.stop_reason = "killed"             # the ranks already started: theirs is no run

    def _spawn_ranks(self, t: Task) -> None:
        req = t.req
        spec = req.spec
        argv = list(spec.command) or builtin_command(spec.job_type, spec.size, self.python)
        t.started = time.time()
        who = t.who = run_as(req.run_as, self._warned)
        ckpt = Path(req.checkpoint_dir)
        t.logs = [ckpt / "logs" / f"attempt{req.attempt}-rank{req.rank_offset + i}.log" for i in range(len(req.gpus))]
        ckpt.parent.mkdir(parents=True, exist_ok=True)      # the shared checkpoint root
        own_dir(ckpt, who)
        t.scratch = self.work_dir / f"job{req.job_id}-a{req.attempt}"
        shutil.rmtree(t.scratch, ignore_errors=True)         # a leftover of this attempt's earlier try
        own_dir(t.scratch, who)
        t.lease_file = t.scratch / "lease.json"
        base = {**job_environment(os.environ, self.job_env, who), **dict(spec.env)}
        base.update({
            "GAVEL_NG_SCHEDULER": self.scheduler, "GAVEL_NG_JOB_ID": str(req.job_id),
            "GAVEL_NG_ATTEMPT": str(req.attempt), "GAVEL_NG_JOB_TOKEN": req.job_token,
            "GAVEL_NG_CHECKPOINT_DIR": str(ckpt), "GAVEL_NG_STEPS": str(spec.steps),
            "GAVEL_NG_LEASE_DEADLINE": repr(t.deadline), "GAVEL_NG_WORKER_TYPE": self.gpu_type,
            leasefile.ENV: str(t.lease_file),
            "WORLD_SIZE": str(req.world_size), "LOCAL_WORLD_SIZE": str(len(req.gpus)),
            "GAVEL_NG_GRACE_SECONDS": repr(self.grace),
            "GAVEL_NG_CHECKPOINT_EVERY_ROUNDS": str(req.checkpoint_every_rounds),
        })
        if req.identity:                                 # checkpoints carry it; others' are refused on restore
            base["GAVEL_NG_JOB_IDENTITY"] = req.identity
        if spec.adaptive:                                # adaptive mode: the spec the scheduler schedules by
            base.update({"GAVEL_NG_ADAPTIVE": spec.adaptive, "GAVEL_NG_SERVERS": str(max(req.servers, 1))})
        if self.security.tls_ca:
            base["GAVEL_NG_TLS_CA"] = self.security.tls_ca
        if req.world_size > 1:
            if req.dist_init:
                base["GAVEL_NG_DIST_INIT"] = req.dist_init
                if req.rank_offset == 0:                 # one worker of the job tidies up
                    for p in clear_stale_rendezvous(req.dist_init, req.attempt):
                        log.info("job %d: removed %s, left by an attempt that was killed", req.job_id, p.name)
            else:
                base.update({"MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(free_port())})
                base["GAVEL_NG_DIST_INIT"] = "env://"
        problem = launch_problem(argv, spec.working_dir or None, base.get("PATH"))
        if problem:
            raise Refused(problem)
        account = (who.uid, who.gid, who.groups) if who.switches else None
        for local, gpu in enumerate(req.gpus):
            rank = req.rank_offset + local
            result = t.scratch / f"result-r{rank}.json"
            env = {**base, "RANK": str(rank), "LOCAL_RANK": str(local), "GAVEL_NG_RESULT_FILE": str(result),
                   "CUDA_VISIBLE_DEVICES": str(self.gpu_ids[gpu])}
            log_file = t.logs[local]
            fd = open_job_file(log_file, who, write=True, base=ckpt)     # made the job's, no link followed
            try:
                proc = None
                if self.standby.eligible(argv, env.get("PATH")):
                    proc = self.standby.run(argv, env, spec.working_dir, log_file, account)
                t.procs.append(proc or spawn(argv, env, spec.working_dir, fd, who.popen_args()))
            finally:
                os.close(fd)
            t.results.append(result)
        self.running.append(t)
        log.info("job %d attempt %d started as %s: %d process(es) on GPUs %s", *t.ref, who.name, len(t.procs),
                 list(req.gpus))

    def _not_started(self, t: Task, problem: str, logs: list[Path]) -> None:
        """The attempt cannot start here: said in each rank's log (`gavel-ng logs`) and, with the
        next report, to the scheduler, which counts it as a failure (lock held)."""
        t.launch_error = problem
        self._note(t, f"did not start: {problem}", logs)
        log.error("job %d attempt %d did not start: %s", *t.ref, problem, extra={"jobs": [t.req.job_id]})
        self.running.append(t)

    def _note(self, t: Task, text: str, logs: list[Path]) -> None:
        """A line from the worker at the end of each rank's log, where `gavel-ng logs` shows it (written
        as the job's own file, no link followed: the job's directory is the job's)."""
        line = f"gavel-ng worker {self.worker_id}: job {t.req.job_id} attempt {t.req.attempt} {text}\n"
        ckpt = Path(t.req.checkpoint_dir)
        for path in logs:
            try:
                append_job_file(path, t.who or RunAs.own(), line, base=ckpt)
            except (OSError, ValueError):
                pass

    def _end(self, t: Task, codes: list[int], reason: str) -> None:
        """All processes of a task exited: queue its report (lock held)."""
        who = t.who or RunAs.own()
        results = [RankResult.parse(read_job_file(p, who)) for p in t.results]
        lead = next((r for r in results if r is not None), None)
        code = next((c for c in codes if c != 0), 0)
        reason, code, detail = _how_it_ended(t, reason, code, results, codes, self._log_tail)
        if detail and not t.launch_error:          # (a launch that failed said so already)
            self._note(t, f"ended: {detail}", t.logs)
        rep = pb.DoneReport(worker_id=self.worker_id, call_token=self.call_token, job_id=t.req.job_id,
                            attempt=t.req.attempt, exit_code=code,
                            done=bool(lead and lead.done and all(r is not None and r.done for r in results)),
                            steps=lead.step if lead else -1, steps_run=lead.steps_run if lead else 0,
                            compute_seconds=lead.compute_seconds if lead else 0.0,
                            wall_seconds=time.time() - t.started if t.started else 0.0,
                            reason=reason, detail=detail)
        if t.scratch is not None:
            shutil.rmtree(t.scratch, ignore_errors=True)     # links in it are removed, never followed
        if t.bad_leases > 1:
            log.warning("job %d attempt %d: %d lease files ignored in all", *t.ref, t.bad_leases)
        self.pending.append(rep)
        self.report_event.set()
        log.info("job %d attempt %d ended (%s, exit %d) at step %d%s", rep.job_id, rep.attempt, rep.reason,
                 rep.exit_code, rep.steps, f": {detail}" if detail else "")

    @staticmethod
    def _log_tail(t: Task, rank: int) -> str:
        """A crashed rank's last words: its log's last line, read as the job's file (never through a link)."""
        if rank >= len(t.logs):
            return ""
        data = read_job_file(t.logs[rank], t.who or RunAs.own(), limit=4096, tail=True,
                             base=Path(t.req.checkpoint_dir))
        return log_tail(data)

    # ----- reporter -----------------------------------------------------------------------------------
    def _running_refs(self) -> list[pb.AttemptRef]:
        with self.lock:
            return [pb.AttemptRef(job_id=t.req.job_id, attempt=t.req.attempt) for t in self.running + self.queued]

    def _reporter(self) -> None:
        while not self.stop_event.is_set():
            pause = self.heartbeat_seconds if self.registered.is_set() else 0.5
            try:
                if not self.registered.is_set():
                    self._register()
                else:
                    self._flush()
                    self._heartbeat()
                self.backoff.succeeded()
            except grpc.RpcError as exc:
                code = exc.code()
                if code == grpc.StatusCode.NOT_FOUND:
                    self.backoff.succeeded()
                    log.info("scheduler does not know this worker: registering again")
                    self.registered.clear()
                    continue
                self.refusal = self._refusal(exc)
                if self.refusal is not None:        # retrying cannot help: stop (the CLI exits 2)
                    self.stop_event.set()
                    return
                # a registered worker keeps its heartbeat pace: after a scheduler restart it must rejoin
                # before its jobs' leases run out
                pause = min(self.backoff.failed(code.name), pause if self.registered.is_set() else 1e9)
            self.report_event.wait(pause)
            self.report_event.clear()

    def _refusal(self, exc: grpc.RpcError) -> InputError | None:
        """The error a permanent refusal is told as, else None (worth retrying)."""
        code, details = exc.code(), exc.details()
        if code in (grpc.StatusCode.UNAUTHENTICATED, grpc.StatusCode.PERMISSION_DENIED):
            return InputError("--token-file", self.token_source, f"scheduler {self.scheduler} refused the token "
                                                                 f"({code.name}: {details})")
        if code == grpc.StatusCode.INVALID_ARGUMENT and not self.registered.is_set():
            return InputError("--scheduler", self.scheduler, f"refused this worker (INVALID_ARGUMENT: {details})")
        return None

    def _register(self) -> None:
        with self.lock:
            pending = list(self.pending)
        req = pb.RegisterWorkerRequest(worker_id=self.worker_id, address=f"{self.advertise}:{self.port}",
                                       gpu_type=self.gpu_type, gpus=self.gpus, running=self._running_refs(),
                                       pending=pending, labels=self.labels, call_token=self.call_token)
        reply = self.stub.RegisterWorker(req)
        self.heartbeat_seconds, self.grace = reply.heartbeat_seconds or 2.0, reply.grace_seconds or 30.0
        self.lease_key = reply.lease_key or self.security.token
        self.round_seconds = reply.round_seconds
        self.route.registered(reply.heartbeat_port)
        with self.lock:
            self.pending = [r for r in self.pending if r not in pending]
        self.registered.set()
        log.info("registered with %s (heartbeat %.2gs, grace %.2gs)", self.scheduler, self.heartbeat_seconds,
                 self.grace)

    def _flush(self) -> None:
        """Send the ends not acknowledged yet, up to MAX_BATCH a call (ReportDones; one by one to a scheduler
        without it)."""
        while True:
            with self.lock:
                reps = self.pending[:MAX_BATCH if self.batch_reports else 1]
            if not reps:
                return
            if self.batch_reports:
                try:
                    reply = self.stub.ReportDones(pb.DoneReports(worker_id=self.worker_id, call_token=self.call_token,
                                                                 reports=reps))
                except grpc.RpcError as exc:
                    if exc.code() != grpc.StatusCode.UNIMPLEMENTED:
                        raise
                    self.batch_reports = False
                    continue
                refused = list(reply.refused) + [""] * (len(reps) - len(reply.refused))
            else:
                try:
                    self.stub.ReportDone(reps[0])
                    refused = [""]
                except grpc.RpcError as exc:
                    if exc.code() != grpc.StatusCode.INVALID_ARGUMENT:
                        raise
                    refused = [exc.details() or "refused"]
            for rep, why in zip(reps, refused):
                self._acknowledged(rep, why)

    def _acknowledged(self, rep: pb.DoneReport, refused: str) -> None:
        """The scheduler took an end (refused ""), or refused it: a bare end (no progress) is dropped, any other
        is sent again bare. Kept as it was, it would block every later report and heartbeat; dropped, the
        attempt would stay live in the scheduler: say only that it ended (progress unknown: the next attempt
        restores the newest checkpoint and InitJob tells its step)."""
        with self.lock:
            i = self.pending.index(rep) if rep in self.pending else None
            if i is None:
                return
            if not refused:
                del self.pending[i]
                return
            if rep.steps == -1 and rep.steps_run == 0 and rep.compute_seconds == 0 and rep.wall_seconds == 0:
                log.error("scheduler refused the end of job %d attempt %d, dropped: %s", rep.job_id, rep.attempt,
                          refused)      # not an attempt of ours as it knows them
                del self.pending[i]
                return
            log.error("scheduler refused the end of job %d attempt %d (%s): reporting it without progress",
                      rep.job_id, rep.attempt, refused)
            self.pending[i] = pb.DoneReport(worker_id=rep.worker_id, call_token=rep.call_token, job_id=rep.job_id,
                                            attempt=rep.attempt, exit_code=max(-255, min(255, rep.exit_code)),
                                            steps=-1, reason=rep.reason)

    def _heartbeat(self) -> None:
        reply = self.route.send(self.stub, pb.HeartbeatRequest(worker_id=self.worker_id, running=self._running_refs(),
                                                               call_token=self.call_token))
        now = time.time()
        with self.lock:
            tasks = {t.ref: t for t in self.running + self.queued}
            for lease in reply.leases:
                t = tasks.get((lease.job_id, lease.attempt))
                if t is not None:           # an attempt's lease end only grows; an answer from the heartbeat
                    # port's copy may be behind a renewal the job already wrote down (_read_lease)
                    t.deadline = max(t.deadline, now + lease.seconds_left)
            for ref in reply.kill:
                t = tasks.get((ref.job_id, ref.attempt))
                if t is not None and t.stop_reason is None:
                    log.info("scheduler does not know job %d attempt %d: stopping it", *t.ref)
                    t.stop_reason = "killed"


def _how_it_ended(t: Task, reason: str, code: int, results: list, codes: list[int], tail) -> tuple[str, int, str]:
    """(reason, exit status, what went wrong) of a task whose processes all ended. A launch that never
    ran, a crash, and an exit 0 without GavelIterator's report are failures the scheduler counts."""
    if t.launch_error:
        return "launch-failed", NOT_RUN, t.launch_error
    if reason == "rank-exited":                      # a rank failed by itself; the others were stopped
        reason = "exited"
    if reason != "exited":
        return reason, code, ""
    if code != 0:
        rank = next((i for i, c in enumerate(codes) if c != 0), 0)
        how = f"killed by signal {_signal_name(-code)}" if code < 0 else f"exit status {code}"
        last = tail(t, rank)
        return reason, code, how + (f"; its log ends: {last}" if last else "")
    if any(r is None for r in results):
        return "no-result", code, ("exited with status 0 before GavelIterator's end-of-run report: the script "
                                   "must iterate a GavelIterator (docs/deploy.md, Adapting a training script)")
    return reason, code, ""


def _unrunnable(req: pb.RunJobRequest) -> str:
    """Why a RunJob cannot run on any worker ("" : nothing found): said before it is queued, so it never
    takes a GPU (the scheduler checked the job at submission; this catches a state written before that)."""
    spec = req.spec
    field, value, why = unrunnable(list(spec.command), dict(spec.env), spec.working_dir)
    if why:
        return f"spec.{field}={value[:80]!r}: {why}"
    if spec.steps < 1 or not spec.job_type:
        return "spec: no steps or no job type"
    if not req.checkpoint_dir.startswith("/") or "\0" in req.checkpoint_dir:
        return f"checkpoint_dir={req.checkpoint_dir[:200]!r}: must be an absolute path"
    if req.run_as and not ACCOUNT_NAME.match(req.run_as):
        return f"run_as={req.run_as[:40]!r}: not an account name"
    return ""


def _signal_name(n: int) -> str:
    try:
        return signal.Signals(n).name
    except ValueError:
        return str(n)
