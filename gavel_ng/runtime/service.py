"""The scheduler service: gRPC front end, the round loop thread, and start/stop/restore.

`SchedulerService(config, state_dir).start()` serves until stop(). The round loop is
gavel_ng.mechanism's SchedulerLoop, the same one the simulator runs, with
DeployExecutor in place of the simulated clock. This module is where protobuf meets the
scheduler's domain objects: requests become Registration, AttemptRef, DoneReport and
JobSpec; Kill orders, heartbeat answers, leases, jobs and status become replies.
"""

from __future__ import annotations

import functools
import logging
import operator
import os
import sqlite3
import threading
import time
from dataclasses import replace
from pathlib import Path

import grpc
import numpy as np
from grpc_health.v1 import health, health_pb2

from ..assembly import Keep, World, assemble, check_job, runs_adaptive
from ..cluster import resolve_prices
from ..errors import InputError, PolicyError
from ..estimator import ThroughputEstimator
from ..mechanism import MechanismConfig, SchedulerLoop
from ..policies import get_policy
from ..protocol.client import placement_label
from ..protocol.jobspec import JobSpec
from ..protocol.limits import MAX_BATCH
from ..protocol.protos import gavel_pb2 as pb
from ..protocol.rpc import (
    ADMIN,
    Principal,
    Security,
    Stub,
    caller,
    make_server,
    new_token,
    open_channel,
    same,
)
from ..rules import AdmissionControl, RuleCompiler, ServerRules, check_entity
from .adaptive import AdaptiveReport
from .backfill import LiveBackfill
from .checks import Checks
from .config import ClusterConfig, validate_submission
from .credentials import (
    Access,
    Credentials,
    PermissionDenied,
    UnknownWorker,
    check_user_request,
    principal_of,
    redact,
)
from .executor import DeployExecutor, Lease
from .front import HeartbeatFront
from .gcpace import GcPacer
from .heartbeats import heartbeat_reply
from .jobs import FINISHED, MAX_DETAIL, AttemptRef, DoneReport, JobState
from .listing import (
    MAX_STATUS_JOBS,
    STATUS_JOBS,
    LimitReached,
    check_queue,
    check_submission,
    digest,
    list_page,
    slim,
    status_page,
)
from .liveness import TimedPool
from .measured import MeasuredTable
from .metrics import Metrics
from .planner import DynamicPlanner
from .probe import probe_policy
from .records import ClusterInfo, Credential, StateDamaged
from .rounds import ClusterRounds, ClusterSource
from .state import ClusterState, Registration
from .statedir import BACKUP_NAME, StateLock, check_layout, damaged, secure, state_id
from .store import Store, StoreError, private
from .tables import cluster_table
from .waiting import Waiting
from .workers import WorkerConflict

log = logging.getLogger(__name__)
TOKEN_FILE = "token"
HANDLERS = 64            # gRPC handler threads (protocol.limits shares them out)
# Every allocation is solved from scratch: the workers (capacity) and the measured throughputs change between
# solves, which a warm LP (policies.lp.warm) cannot follow. A warm solve of a degenerate LP (las's max-min)
# returns another optimum than a cold one, so a simulation meant to predict this runtime solves cold too
# (SimConfig.warm_start; experiments/sim_vs_cluster.py).
WARM_SOLVES = False
# seconds `status` waits for the state's lock before it reads its page without it: none. At a boundary at 10,000
# GPUs the lock is held most of the time, so a wait almost always ran out: 50 ms was most of a status call there
STATUS_LOCK_WAIT = 0.0
# calls with handler threads of their own (liveness.TimedPool): a worker's heartbeat, and a status read, are
# never queued behind a round's thousands of reports and launches waiting for the state's lock
LANES = (("express", ("Heartbeat",), 8), ("reads", ("GetStatus",), 4))   # Scheduler methods, threads


_ORDER = operator.attrgetter("order")      # workers in registration order


def _service_name(name: str) -> str:
    return pb.DESCRIPTOR.services_by_name[name].full_name


def _lanes() -> tuple:
    """LANES with each method's full path, as TimedPool matches it."""
    service = _service_name("Scheduler")
    return tuple((lane, tuple(f"/{service}/{m}" for m in methods), n) for lane, methods, n in LANES)


def _rpc(method):
    """Map user errors to status codes; never let a handler exception escape unexplained."""

    @functools.wraps(method)
    def wrapper(self, request, context):
        try:
            return method(self, request, context)
        except LimitReached as exc:
            context.abort(grpc.StatusCode.RESOURCE_EXHAUSTED, str(exc))
        except InputError as exc:
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, str(exc))
        except KeyError as exc:
            context.abort(grpc.StatusCode.NOT_FOUND, f"unknown job {exc.args[0]}")
        except WorkerConflict as exc:
            context.abort(grpc.StatusCode.ALREADY_EXISTS, str(exc))
        except PermissionDenied as exc:
            log.warning("refused %s to %s: %s", method.__name__, _actor(), exc)
            context.abort(grpc.StatusCode.PERMISSION_DENIED, str(exc))
        except UnknownWorker as exc:
            context.abort(grpc.StatusCode.NOT_FOUND, f"{exc}: register again")
        except StoreError as exc:       # disk full, I/O error: nothing changed, the caller may retry
            context.abort(grpc.StatusCode.UNAVAILABLE, f"{exc}; nothing was changed, try again later")

    return wrapper


class SchedulerServicer:
    def __init__(self, service: SchedulerService):
        self.svc = service
        self.state = service.state

    @_rpc
    def RegisterWorker(self, req, context):
        if req.gpu_type not in self.state.worker_types:
            raise InputError("gpu_type", req.gpu_type, f"not a worker type of this cluster "
                                                       f"({', '.join(self.state.worker_types)})")
        if req.gpus < 1 or req.gpus > 1024:
            raise InputError("gpus", req.gpus, "must be between 1 and 1024")
        if not req.worker_id or not req.address:
            raise InputError("worker_id" if not req.worker_id else "address", "", "required")
        who = caller()
        self.svc.check_worker(req.worker_id, req.call_token, claim=True)
        if who is not None and who.is_admin:
            log.warning("worker %s registered with the cluster (admin) token: jobs that run as the worker's account "
                        "can read it; give workers a credential of their own (gavel-ng user add NAME --role worker)",
                        req.worker_id)
        labels = frozenset(list(req.labels) + list(self.state.config.worker_labels.get(req.worker_id, [])))
        reg = Registration(req.worker_id, req.address, req.gpu_type, req.gpus, [_ref(r) for r in req.running],
                           self.svc.checks.pending(req.worker_id, [_done(r) for r in req.pending]), labels,
                           req.call_token)
        kills = self.state.register(reg, lambda address: self.svc.worker_stub(address, req.call_token))
        self.svc.executor.send_kills(kills)
        cfg = self.state.config
        front = self.svc.front
        return pb.RegisterWorkerReply(heartbeat_seconds=cfg.heartbeat_seconds, grace_seconds=cfg.grace,
                                      round_seconds=cfg.round_seconds, lease_key=self.svc.executor.lease_key,
                                      # named while its process is restarted too: the daemon falls back meanwhile
                                      heartbeat_port=front.port if front is not None else 0)

    @_rpc
    def Heartbeat(self, req, context):
        self.svc.check_worker(req.worker_id, req.call_token)
        answer = self.state.heartbeat(req.worker_id, [_ref(r) for r in req.running])
        if answer is None:
            context.abort(grpc.StatusCode.NOT_FOUND, "unknown worker: register again")
        return heartbeat_reply(answer)

    @_rpc
    def ReportDone(self, req, context):
        rep = _done(req)
        self.svc.check_worker(rep.worker_id, req.call_token)
        self.state.seen(rep.worker_id)          # alive now, however long the report waits for the lock
        with self.state.lock:                   # one wait for the lock: the check and the report take it again
            self.svc.checks.report(rep)
            self.state.report(rep)
        return pb.Empty()

    @_rpc
    def ReportDones(self, req, context):
        """A worker's ends in one call, each taken as ReportDone takes it; one refused (its numbers, not this
        worker's attempt) is said in its place of the reply, the others are taken. The call waits for the
        state's lock once: at a round's end 1,250 workers' calls each waiting for it twice per report made
        a convoy of 0.5-1.2 s waits (the holds themselves took milliseconds)."""
        if len(req.reports) > MAX_BATCH:
            raise InputError("reports", len(req.reports), f"at most {MAX_BATCH} reports a call")
        self.svc.check_worker(req.worker_id, req.call_token)
        self.state.seen(req.worker_id)
        with self.state.lock:
            return pb.BatchReply(refused=[self._take(req.worker_id, i, r) for i, r in enumerate(req.reports)])

    def _take(self, worker_id: str, i: int, r: pb.DoneReport) -> str:
        """One report of a batch, taken (""), or why not."""
        try:
            rep = _done(r)
            if rep.worker_id != worker_id:
                raise InputError(f"reports[{i}].worker_id", rep.worker_id, f"not the caller {worker_id}")
            self.svc.checks.report(rep)
            self.state.report(rep)
            return ""
        except InputError as exc:
            return str(exc)
        except KeyError as exc:
            return f"unknown job {exc.args[0]}"

    @staticmethod
    def _job_caller(job_id: int, attempt: int) -> None:
        who = caller()
        if who is not None and who.job is not None and who.job != (job_id, attempt):
            raise PermissionDenied(f"token is for job {who.job[0]} attempt {who.job[1]}, not job {job_id} attempt "
                                   f"{attempt}")

    @_rpc
    def InitJob(self, req, context):
        self._job_caller(req.job_id, req.attempt)
        self.svc.checks.checkpoint(req.job_id, req.attempt, req.checkpoint_step)
        return _lease(self.svc.executor.init_job(req.job_id, req.attempt, req.checkpoint_step))

    @_rpc
    def UpdateLease(self, req, context):
        self._job_caller(req.job_id, req.attempt)
        report = AdaptiveReport.from_proto(req.report, "", time.time()) if req.HasField("report") else None
        self.svc.checks.progress(req.job_id, req.attempt, req.steps, req.compute_seconds, req.checkpoint_step)
        return _lease(self.svc.executor.update_lease(req.job_id, req.attempt, req.steps, req.compute_seconds, report,
                                                     req.checkpoint_step, progress_only=req.progress_only))

    @_rpc
    def SubmitJobs(self, req, context):
        check_submission(req)
        who = caller() or ADMIN
        specs = []
        declared: dict[tuple[str, int], dict] = {}
        for i, m in enumerate(req.jobs):
            [spec] = self.svc.access.stamp(who, [JobSpec.from_proto(m)], first=i)
            validate_submission(spec, self.svc.table, self.state.worker_types, f"jobs[{i}]",
                                estimated=self.state.throughputs.estimator is not None)
            self.svc.check_policy_jobs(spec, f"jobs[{i}]")
            if spec.throughputs and declared.setdefault(spec.key, spec.throughputs) != spec.throughputs:
                raise InputError(f"jobs[{i}].throughputs", spec.throughputs, f"class {spec.job_type!r} is declared "
                                 f"with other rates by an earlier job of this submission: {declared[spec.key]}")
            specs.append(spec)
        key = req.idempotency_key
        if key and not who.is_admin:        # a user's keys are their own: another's cannot collide with them
            key = f"{who.actor}/{key}"
        bound = digest(specs) if key else ""
        # one submission at a time, so that the idempotency key, the queue's bound and the insert agree; the
        # state's lock only for the checks and for adding the stored jobs (ClusterState.submit)
        with self.svc.submitting:
            done = self.svc.store.find_submission(key) if key else None
            if done is not None:   # a retry of a submission already stored: its ids, nothing added
                if done[0] != bound:
                    raise InputError("idempotency_key", key, "already used for a submission of other jobs")
                log.info("submission %s retried: jobs %d-%d already accepted", key, done[1][0], done[1][-1])
                return pb.SubmitJobsReply(job_ids=done[1])
            with self.state.lock:   # rules and admission: refused as a whole, naming the job and the rule
                check_queue(self.state.index, len(specs), self.svc.config.max_unfinished_jobs)
                self.svc.check_rules(specs)
                never = self.svc.cannot_run_all(specs)
            if req.strict and any(never):
                i = next(i for i, text in enumerate(never) if text)
                raise InputError(f"jobs[{i}]", specs[i].name or specs[i].job_type,
                                 f"no current worker can run it: {never[i]} (--strict: nothing was submitted; "
                                 f"{sum(map(bool, never))} of {len(specs)} jobs cannot run)")

            def admit(ids: list[int], chunk: list[JobSpec]) -> None:
                # admitted by check_rules above, the whole batch at once; counted now under their ids (nothing
                # else admits meanwhile: one submission at a time, and the round loop admits nothing on a cluster)
                for m, spec in zip(ids, chunk):
                    self.svc.admission.add(m, getattr(spec.rules, "user", None), spec.scale_factor)

            ids = self.state.submit(specs, key, bound, admit)
        log.info("accepted %d jobs (%d-%d)", len(ids), ids[0], ids[-1])
        warnings = [f"job {m} ({spec.name or spec.job_type}): no current worker can run it: {text}"
                    for m, spec, text in zip(ids, specs, never) if text]
        return pb.SubmitJobsReply(job_ids=ids, warnings=warnings)

    @_rpc
    def CancelJob(self, req, context):
        with self.state.lock:
            job = self.state.jobs.get(req.job_id)
            if job is None:
                raise KeyError(req.job_id)
            self.svc.access.check_cancel(caller(), job)
        status, kills = self.state.cancel(req.job_id)
        self.svc.executor.send_kills(kills)
        return pb.CancelJobReply(status=status)

    @_rpc
    def ListJobs(self, req, context):
        who, access = caller(), self.svc.access
        with self.state.lock:
            return list_page(self.state.jobs, req, lambda j: redact(self.svc.job_info(j), access.manages(who, j)))

    @_rpc
    def GetStatus(self, req, context):
        return self.svc.status(req.job_limit, caller())

    @_rpc
    def ManageUsers(self, req, context):
        """Credentials (admin only, protocol.rpc.ALLOWED): add (answers the token, once), list, grant, revoke."""
        check_user_request(req)
        creds, token = self.svc.credentials, ""
        if req.action == "add":
            cred, token = creds.add(req.name, req.role or "user", list(req.entities), list(req.manages))
        elif req.action == "grant":
            cred = creds.grant(req.name, list(req.entities), list(req.manages))
        elif req.action == "revoke":
            cred = creds.revoke(req.name)
        users = creds.all() if req.action == "list" else [cred]
        return pb.UserReply(users=[_user_info(c) for c in users], token=token)


class SchedulerService:
    def __init__(self, config: ClusterConfig, state_dir: str | Path, port: int = 50060, bind: str = "0.0.0.0",
                 token: str | None = None, pace_gc: bool = False):
        """`pace_gc`: the process is the scheduler's own (`gavel-ng scheduler`), so its collector may be paced
        (runtime.gcpace: it freezes every object of the process, which a library caller's may not want)."""
        self.pace_gc = pace_gc
        config = config.resolved()     # the policy's declared round length unless the config gives one
        self.config = config
        self.state_dir = Path(state_dir)
        # everything the config names is checked before anything is written (a state, a token)
        base = cluster_table(list(config.worker_types), config.throughputs)
        if config.plugins:   # the user's policies, so that config.policy may name one
            from ..policies.plugins import load_plugins

            load_plugins(config.plugins, field="cluster-config.plugins")
        spec = get_policy(config.policy)
        config.check_policy(spec)
        # the policy's own errors found before any job is at stake: the scheduler refuses to start (probe.py)
        probe_policy(spec, list(config.worker_types), resolve_prices(config.worker_types, config.prices,
                                                                     list_prices=False), config.policy_options)
        root = config.checkpoint_root
        # absolute: workers refuse a relative checkpoint_dir (their cwd is not the scheduler's)
        self.checkpoint_root = (Path(root) if root else self.state_dir / "checkpoints").absolute()
        check_layout(self.state_dir, self.checkpoint_root, config.token_file)
        self.bind, self.port = bind, port
        self.state_lock = StateLock(self.state_dir)      # one scheduler per state directory (statedir.py)
        try:
            self._open(config, base, spec, token)
        except BaseException:
            self.state_lock.release()
            raise

    def _open(self, config: ClusterConfig, base, spec, token: str | None) -> None:
        crules = config.cluster_rules
        entities = config.entity_specs          # what the hierarchical policy shares across, quotas are keyed by
        try:
            self.store = Store(self.state_dir)
            self.store.check()
        except StateDamaged as exc:
            raise damaged(self.state_dir, str(exc)) from None
        self.secret = token or self._token()
        self.security = Security(self.secret, config.tls_cert, config.tls_key, config.tls_ca)
        self.state_id = state_id(self.store)
        self.table = MeasuredTable(base, list(config.worker_types), config.measured_throughputs)
        estimator = ThroughputEstimator(base) if config.estimator else None
        self.state = ClusterState(config, self.store, self.table, self.secret, estimator)
        try:
            self.credentials = Credentials(self.store, config.entities)
            self.state.restore()
        except (StateDamaged, sqlite3.DatabaseError, ValueError, TypeError, KeyError) as exc:
            raise damaged(self.state_dir, _what(exc)) from None
        self.access = Access(self.credentials)
        if not self.credentials.any_active:
            log.warning("a single-token cluster: no user or worker credentials are issued, so every client and worker "
                        "holds the cluster token and acts as admin; issue credentials with `gavel-ng user add` "
                        "(docs/deploy.md, Security)")
        self.checks = Checks(self.state, base)       # what jobs and workers report, before it is stored
        self.stop_event = threading.Event()
        if not self.checkpoint_root.exists():
            self.checkpoint_root.mkdir(parents=True)
            self.checkpoint_root.chmod(0o755)        # jobs, as their users, reach their own directories in it
        secure(self.state_dir, self.checkpoint_root)
        # placement rules and admission (gavel_ng.rules): the simulator's code, on the live workers
        self.rules = RuleCompiler(crules, self.state.registry.servers)
        self.admission = AdmissionControl(crules.admission)
        for m, job in self.state.jobs.items():   # a restart keeps the active jobs counted
            if job.status not in FINISHED:
                self.admission.add(m, getattr(job.spec.rules, "user", None), job.spec.scale_factor)
                check_entity(getattr(job.spec.rules, "entity", None), entities, f"job {m}.entity",
                             "cluster-config.entities")
        self.entities = entities
        self.spec = spec
        self.round_policy_error: PolicyError | None = None   # a round policy's last error, until it decides again
        self.round_policy_errors = 0
        # the planner as the simulator's is built (gavel_ng.assembly), kept on the live workers and durable
        topology, gpu_map, version = self.state.topology()
        world = World(topology, time.time, self.state, self.state.throughputs,
                      ClusterSource(self.state, adapts=runs_adaptive(spec)), self.state.capacity, rules=self.rules,
                      server_rules=ServerRules(crules, self._job_rules, self._job_tags), entities=entities,
                      # the configured prices only, no list prices: a cost policy needs every type priced in the config
                      prices=resolve_prices(config.worker_types, config.prices, list_prices=False),
                      options=config.policy_options,
                      mechanism=MechanismConfig(mid_round_backfill=config.backfill, round_seconds=config.round_seconds),
                      space_sharing=config.space_sharing, warm=WARM_SOLVES, lock=self.state.lock, on_solve=self._solved,
                      policy_errors="fallback", realloc_delay=config.realloc_delay_seconds)
        built = assemble(spec, world, Keep(lambda p: DynamicPlanner(self.state, p, gpu_map, version),
                                           lambda p: ClusterRounds(self.state, p, gpu_map, version)))
        self.planner, self.allocator, self.policy_name = built.planner, built.allocator, built.name
        self.store.save_cluster_info(ClusterInfo(self.policy_name, config.round_seconds, list(config.worker_types),
                                                 str(self.checkpoint_root.resolve()), built.decides_rounds,
                                                 dict(config.prices), self.state_id))
        try:
            self.planner.restore()
        except (sqlite3.DatabaseError, ValueError, TypeError, KeyError) as exc:
            raise damaged(self.state_dir, _what(exc)) from None
        self._saved_classes = None
        self._row_index: tuple[object, dict[int, list[int]]] = (None, {})   # allocation rows by job (status)
        self._infos: dict[str, tuple] = {}      # worker id -> (what it says, WorkerInfo): status's kept messages
        self._infos_lock = threading.Lock()
        self.submitting = threading.Lock()     # one SubmitJobs at a time (SchedulerServicer.SubmitJobs)
        self.metrics = Metrics(self.state, self.policy_errors)
        self.waiting = Waiting(self.state, crules.quotas, self.policy_name)
        # GPUs freed mid-round go to the plan's waiting entries (a round policy's plans have none) and to jobs
        # that arrived since the plan (those the policy can place without a solve: built.arrivals)
        backfill = functools.partial(LiveBackfill, gpu_map=lambda: self.planner.plan_map,
                                     arrivals=built.arrivals) if config.backfill else None
        self.executor = DeployExecutor(self.state, self.planner.placement, self.checkpoint_root, self.stop_event,
                                       self.state_id, waiting=self.waiting, backfill=backfill,
                                       on_publish=self._save_classes, on_launch_batch=self.metrics.launches.observe)
        # no admission in the loop: a job is admitted once, when it is submitted (check_rules: a refusal refuses
        # the submission, naming the limit), and counted until it ends (released at the next submission)
        self.executor.gc = GcPacer() if self.pace_gc else None
        self.loop = SchedulerLoop(self.planner, self.executor)
        self.metrics_port = config.metrics_port
        self.health = health.HealthServicer()     # readiness: NOT_SERVING while the store cannot be written
        self._set_health(False)
        self.store.on_failing = self._set_health
        self.server: grpc.Server | None = None
        self.front: HeartbeatFront | None = None     # heartbeats in a process of their own (runtime.front)
        self.pool: TimedPool | None = None        # the server's handler threads (start)
        self._thread: threading.Thread | None = None
        self._backup()

    def _backup(self) -> None:
        """The copy a damaged state is restored from (statedir.damaged), taken now that it opened cleanly."""
        try:
            self.store.backup(self.state_dir / BACKUP_NAME)
        except (OSError, sqlite3.Error) as exc:
            log.warning("no backup of the state written (%s): a damaged state could not be restored from one", exc)

    def authenticate(self, token: str) -> Principal | None:
        """Who holds `token`: the admin (the cluster token), a job attempt, or a credential an admin issued."""
        return principal_of(token, self.secret, self.credentials.authenticate)

    def _job_rules(self, job: int):
        j = self.state.jobs.get(job)
        return None if j is None else j.spec.rules

    def _job_tags(self, job: int) -> set[str]:
        """What (anti-)affinity rules may call a job: its id and its name (README: job names or groups)."""
        j = self.state.jobs.get(job)
        return {str(job)} | ({j.spec.name} if j is not None and j.spec.name else set())

    def check_rules(self, specs) -> None:
        """InputError naming the job and the rule when its rules leave it no worker type, its entity
        is not declared, or admission refuses it (checked for the whole batch before any is accepted; lock held)."""
        for m in [m for m, _ in self.admission.active.items() if m in self.state.jobs
                  and self.state.jobs[m].status in FINISHED]:   # ended since the last submission
            self.admission.release(m)
        types = list(self.state.worker_types)
        taken = []
        try:
            for i, spec in enumerate(specs):
                where = f"jobs[{i}]"
                rules = spec.rules.with_type_names(types, f"{where}.allowed_types") if spec.rules else None
                check_entity(getattr(rules, "entity", None), self.entities, f"{where}.entity",
                             "cluster-config.entities")
                T = np.array([[1.0 if self.declared_rate(spec, w) > 0 else 0.0 for w in types]])
                if rules is not None or self.rules.rules.quotas:
                    no_labels = RuleCompiler(self.rules.rules, [])   # workers come and go: labels checked when placed
                    no_labels.compile([rules and replace(rules, labels=())], [where], [spec.scale_factor], T,
                                      np.full(len(types), np.inf), types, strict=True)
                refusal = self.admission.admit(("pending", i), getattr(rules, "user", None), spec.scale_factor)
                if refusal is not None:
                    raise InputError(f"{where}.{refusal.rule}", refusal.limit,
                                     f"refused by admission: {refusal.reason}")
                taken.append(("pending", i))
        finally:
            for key in taken:
                self.admission.release(key)

    def check_policy_jobs(self, spec: JobSpec, where: str) -> None:
        """What the policy's declared properties refuse of a job (assembly.check_job)."""
        check_job(self.spec, spec.adaptive is not None, spec.rules.preferred_types if spec.rules is not None else (),
                  where)

    def _class_rates(self, jobs: list[JobState]):
        """(class, rates, sources) of these jobs' classes as the policy believes them (lock held)."""
        live: dict[tuple[str, int], int] = {}
        for j in jobs:
            live.setdefault(j.key, j.job_id)
        return self.state.throughputs.class_rates(list(live), live)

    def _save_classes(self) -> None:
        """What the policy believes of the unfinished jobs' classes, for `status --state` (when it changed)."""
        st = self.state
        with st.lock:
            rows = self._class_rates([j for j in st.jobs.values() if j.status not in FINISHED])
        if rows != self._saved_classes:
            try:
                self.store.save_classes(list(st.worker_types), rows)
                self._saved_classes = rows
            except StoreError:
                pass                       # for status --state only; saved with the next plan

    def declared_rate(self, spec: JobSpec, w: str) -> float:
        """A job's rate on `w` as submission judges it: the table's for its classes, the declared one for a
        class of the user's own (1: unknown until estimated or measured)."""
        key = (spec.job_type, spec.scale_factor)
        if self.table.known(key):
            return self.table.base.get(key, w)
        return (spec.throughputs or self.table.declared.get(key, {})).get(w, 1.0)

    def cannot_run_all(self, specs: list[JobSpec]) -> list[str | None]:
        """cannot_run of each spec, asked once per kind of job (lock held): 10,000 jobs of a few kinds cost a few."""
        said: dict[tuple, str | None] = {}
        out = []
        for spec in specs:
            kind = (spec.key, spec.rules, tuple(sorted(spec.throughputs.items())))
            if kind not in said:
                said[kind] = self.cannot_run(spec)
            out.append(said[kind])
        return out

    def cannot_run(self, spec: JobSpec) -> str | None:
        """Why no live worker can run a job of `spec` (lock held), by the throughput table as submit checks it."""
        def rate(w: str) -> float:
            return self.declared_rate(spec, w)

        rules = spec.rules.with_type_names(list(self.state.worker_types), "rules") if spec.rules else None
        return self.waiting.never(replace(spec, rules=rules) if rules else spec, rate)

    def _token(self) -> str:
        """The configured token, else STATE/token (created once, readable by the owner only)."""
        if self.config.token_file:
            text = Path(self.config.token_file).read_text().strip()
            if not text:
                raise InputError("cluster-config.token_file", self.config.token_file, "is empty")
            return text
        path = self.state_dir / TOKEN_FILE
        if not path.exists():
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(fd, "w") as f:
                f.write(new_token() + "\n")
            log.info("wrote a new cluster token to %s", path)
        private(path)
        return path.read_text().strip()

    def _set_health(self, failing: bool) -> None:
        status = health_pb2.HealthCheckResponse.NOT_SERVING if failing else health_pb2.HealthCheckResponse.SERVING
        for name in ("", _service_name("Scheduler")):
            self.health.set(name, status)

    def _solved(self, jobs: list[int], capacity, alloc, seconds: float) -> None:
        self.metrics.solves.observe(seconds)
        try:
            self.store.event("solve", round_no=self.state.round_no, jobs=len(jobs), seconds=round(seconds, 4),
                             capacity=capacity.tolist(), pairs=sum(len(r) == 2 for r in alloc.rows))
        except StoreError:
            pass                           # a record for people only; the store said why once

    def check_worker(self, worker_id: str, call_token: str, claim: bool = False) -> None:
        """Heartbeats and reports for a worker come from its credential, and from the daemon that registered
        it (it proves so with the token it gave then): another holder of a shared worker credential cannot
        speak for it, nor (`claim`: a registration) take over its id while it lives."""
        who = caller()
        self.access.check_worker(who, worker_id, claim=claim)
        w = self.state.workers.get(worker_id)
        if who is None or who.is_admin or w is None or not w.call_token or same(w.call_token, call_token):
            return
        if not claim:
            raise PermissionDenied(f"not the daemon that registered worker {worker_id!r}")
        if w.alive:
            raise WorkerConflict(f"worker_id {worker_id!r} is held by the live daemon at {w.address} (which "
                                 "registered with another token); it is free again once that one is declared dead")

    def worker_stub(self, address: str, call_token: str = ""):
        """The link to a worker's service, with the token it gave at registration (a worker older than those
        tokens accepts the cluster's)."""
        channel = open_channel(address, self.security)
        return channel, Stub(channel, "Worker", call_token or self.secret)

    # ----- lifecycle -------------------------------------------------------------------------
    def start(self) -> int:
        if self.metrics_port:
            self.metrics.serve(self.bind, self.metrics_port)
        if self.config.heartbeat_port is not None:
            self.front = HeartbeatFront(self.state, self.credentials, self.access, self.security, self.bind,
                                       self.config.heartbeat_port,
                                       status_page=lambda: self.status(0, None).SerializeToString())
            self.front.start()
            self.metrics.watch_front(self.front)
        self.pool = TimedPool(HANDLERS, self.state.stalls, lanes=_lanes())
        self.server, self.port = make_server(self.bind, self.port, {"Scheduler": SchedulerServicer(self)},
                                             self.security, max_workers=HANDLERS, health_servicer=self.health,
                                             authenticate=self.authenticate,
                                             pool=self.pool)
        self.state_lock.describe(self.bind, self.port)
        threading.Thread(target=self.state.stalls.run_ticker, args=(self.stop_event,), name="stalls",
                         daemon=True).start()
        self._thread = threading.Thread(target=self._run_loop, name="rounds", daemon=True)
        self._thread.start()
        log.info("scheduler listening on %s:%d (policy %s, rounds of %gs, state %s)", self.bind, self.port,
                 self.policy_name, self.config.round_seconds, self.state_dir)
        return self.port

    def _run_loop(self) -> None:
        while not self.stop_event.is_set():
            try:
                before, start = self.state.round_no, time.monotonic()
                self.loop.step()
                if self.state.round_no != before:     # a round ran (not an idle wait): its wall time
                    self.metrics.rounds.observe(time.monotonic() - start)
                self.round_policy_error = None
            except StoreError:             # the store logged it once; the round is tried again
                self.stop_event.wait(1.0)
            except PolicyError as exc:     # a round policy's own error: no decision, said loudly, tried again
                self.round_policy_error = exc
                self.round_policy_errors += 1
                log.error("%s; no round is decided until it decides again", exc, extra={"kind": "policy error"})
                self.stop_event.wait(1.0)
            except Exception:              # a bad round must not end the service
                log.exception("round failed")
                self.stop_event.wait(1.0)

    def policy_errors(self) -> int:
        """Solves or decisions at which the policy's own code or formulation failed (`gavel_policy_errors`)."""
        return self.round_policy_errors + (self.allocator.policy_errors if self.allocator is not None else 0)

    @property
    def policy_error(self) -> PolicyError | None:
        """The policy's error in force (its own code or formulation failed at the last solve or decision)."""
        return self.allocator.policy_error if self.allocator is not None else self.round_policy_error

    def stop(self, grace: float = 1.0, why: str = "stopped") -> None:
        """Stop serving (the state stays for a restart); one line says why and what is left."""
        with self.state.lock:
            left = sum(j.status not in FINISHED for j in self.state.jobs.values())
            running = sum(j.live is not None for j in self.state.jobs.values())
        log.info("scheduler stopping (%s): %d unfinished jobs, %d attempts running (their workers keep them and "
                 "report to the next scheduler on this state, %s)", why, left, running, self.state_dir)
        self.stop_event.set()
        self.health.enter_graceful_shutdown()
        with self.state.cv:
            self.state.cv.notify_all()
        self.metrics.close()
        if self.front is not None:
            self.front.stop()
        if self.server is not None:
            self.server.stop(grace).wait(grace + 1)
        if self._thread is not None:
            self._thread.join(timeout=10)
        self.executor.launcher.close()
        for w in list(self.state.workers.values()):
            if w.channel is not None:
                w.channel.close()
        self.store.close()
        self.state_lock.release()

    def wait(self) -> None:
        while not self.stop_event.wait(0.5):
            pass

    # ----- status ------------------------------------------------------------------------------
    def job_info(self, j: JobState) -> pb.JobInfo:
        live = j.live                       # read once: `status` may read a job without the lock
        placement = placement_label(live.worker_type, live.placement) if live is not None else ""
        info = pb.JobInfo(job_id=j.job_id, spec=j.spec.to_proto(), status=j.status, steps_done=j.steps_done,
                          steps_live=max(j.steps_live, j.steps_done), submitted=j.submitted,
                          finished=j.finished or 0.0, attempts=j.attempts, placement=placement, renewals=j.renewals,
                          resizes=j.resizes, gpus=len(live.placement) if live is not None else 0,
                          reason=self._reason(j), first_start=j.first_start or 0.0, preemptions=j.preemptions,
                          gpu_seconds=j.gpu_seconds, error=j.error)
        report = j.report
        if report is not None:
            info.report.CopyFrom(report.to_proto())
        return info

    def _reason(self, j: JobState) -> str:
        """Why a queued job waits (lock held); with the time to the next round where that may end it."""
        text = self.waiting.current(j)
        ends = self.executor.round_end
        if text and j.waits_for_round and not self.executor.idle and ends is not None and ends > time.time():
            text += f"; next round in {ends - time.time():.0f}s"
        return text

    def _round_note(self, counts: dict[str, int]) -> str:
        """What the round display says instead of a countdown: idle, or planning past the round's end; first of
        all, the policy's error while it lasts."""
        error = self.policy_error
        if error is not None:
            fallback = "equal shares until it solves again" if self.allocator is not None else "no round decided"
            return f"POLICY ERROR ({fallback}): {error}"
        ex = self.executor
        if ex.round_end is None and not ex.idle:
            return "starting: no round planned yet"
        if ex.idle:
            queued = counts.get("queued", 0)
            return "idle: nothing to run" + (f" ({queued} queued job{'s' if queued != 1 else ''} cannot run now: "
                                            f"see their reasons)" if queued else " (no queued jobs)")
        if time.time() > ex.round_end:
            return "planning the next round"
        return ""

    def _status_reads(self, job_limit: int, who: Principal | None, first: list[int]) -> tuple:
        """What `status` reads of the jobs on its page, in one pass."""
        st = self.state
        counts, page = status_page(st.jobs, job_limit, st.index, first)
        jobs = [redact(slim(self.job_info(j)), self.access.manages(who, j)) for j in page]
        listed = {j.job_id for j in page}
        classes = self._class_rates([j for j in page if j.status not in FINISHED])
        rows, X = st.allocation
        shares = [(rows[r], X[r]) for r in self._rows_of(listed)
                  if all(m in st.jobs and st.jobs[m].status not in FINISHED for m in rows[r])]
        decision = None if st.decision is None else [
            d for d in st.decision if d[0] in st.jobs and st.jobs[d[0]].status not in FINISHED]
        reply = pb.StatusReply(worker_types=st.worker_types, policy=self.policy_name, round=st.round_no,
                               round_seconds=self.config.round_seconds,
                               round_ends_in=self.executor.round_ends_in(),
                               renewals=st.stats["renewals"], launches=st.stats["launches"],
                               throughputs=self.table.measured(), job_counts=counts,
                               round_note=self._round_note(counts), now=time.time())
        return jobs, classes, shares, decision, reply

    def status(self, job_limit: int = 0, who: Principal | None = None) -> pb.StatusReply:
        """Workers, job counts by status, a page of jobs (listing.status_page; redacted where `who` does not
        manage the job) and the allocation rows and decisions of the jobs on it. Most of it is read without
        the state's lock (`_add_workers`, the counts and the page's ids: copies atomic under the GIL); the
        page's jobs, their classes and rows in one short pass (about 1 ms at 20,000 jobs and 1,250 workers),
        under the lock when it is free (STATUS_LOCK_WAIT), else without it: at a round's boundary at
        10,000 GPUs the reports' holds of the lock made `status` wait 200-300 ms for it. A page read without
        it may show a job mid-change (e.g. ended, not yet counted); one that fails to read (a dict changed
        while walked) is read again under the lock. The reply is built after."""
        st = self.state
        first = st.index.first_unfinished(job_limit or STATUS_JOBS) if 0 <= job_limit <= MAX_STATUS_JOBS else []
        if st.lock.acquire(timeout=STATUS_LOCK_WAIT):
            try:
                jobs, classes, shares, decision, reply = self._status_reads(job_limit, who, first)
            finally:
                st.lock.release()
        else:
            try:
                jobs, classes, shares, decision, reply = self._status_reads(job_limit, who, first)
            except (RuntimeError, KeyError, AttributeError, TypeError):
                with st.lock:
                    jobs, classes, shares, decision, reply = self._status_reads(job_limit, who, first)
        self._add_workers(reply)
        reply.jobs.extend(jobs)
        for key, rates, sources in classes:
            reply.classes.add(job_type=key[0], scale_factor=key[1], rates=dict(zip(st.worker_types, rates)),
                              sources=dict(zip(st.worker_types, sources)))
        for row, x in shares:
            reply.allocation.add(jobs=list(row), share={w: float(x[k]) for k, w in enumerate(st.worker_types)})
        reply.round_policy = decision is not None
        for job, worker_type, gpus in decision or ():
            reply.decision.add(job_id=job, worker_type=worker_type, gpus=gpus)
        return reply

    def _add_workers(self, reply: pb.StatusReply) -> None:
        """Every worker into the reply, in registration order, read without the state's lock: the registry's
        dict and each worker's set of jobs are copied by single C calls (atomic under the GIL), and a worker's
        fields are single reads. Each worker's message is kept until what it says changes, and only its
        `last_seen_ago` is set anew: 1,250 workers were most of a status reply's cost, and at a boundary every
        millisecond of it waits for the GIL again."""
        st, now = self.state, time.monotonic()
        held = st.index.by_worker
        kept: dict[str, tuple] = {}
        with self._infos_lock:              # the status lane's threads share the kept messages
            for w in sorted(list(st.workers.values()), key=_ORDER):
                try:
                    running = tuple(held.get(w.worker_id, ()))
                except RuntimeError:        # changed while copied (not expected: the copy is one C call)
                    running = ()
                key = (w.address, w.gpu_type, w.gpus, w.alive, running)
                hit = self._infos.get(w.worker_id)
                if hit is None or hit[0] != key:
                    hit = (key, pb.WorkerInfo(worker_id=w.worker_id, address=w.address, gpu_type=w.gpu_type,
                                              gpus=w.gpus, alive=w.alive, running_jobs=sorted(running)))
                hit[1].last_seen_ago = now - w.last_seen
                kept[w.worker_id] = hit
            self._infos = kept              # workers gone from the registry are forgotten
            reply.workers.extend(info for _, info in kept.values())

    def _rows_of(self, jobs: set[int]) -> list[int]:
        """The allocation rows (indices) holding any of `jobs`, in order; the row index is kept per allocation."""
        rows = self.state.allocation[0]
        if self._row_index[0] is not rows:
            index: dict[int, list[int]] = {}
            for r, row in enumerate(rows):
                for m in row:
                    index.setdefault(m, []).append(r)
            self._row_index = (rows, index)
        index = self._row_index[1]
        return sorted({r for m in jobs for r in index.get(m, ())})


# ----- protobuf <-> domain ----------------------------------------------------------------------
def _ref(m: pb.AttemptRef) -> AttemptRef:
    return AttemptRef(m.job_id, m.attempt)


def _done(m: pb.DoneReport) -> DoneReport:
    return DoneReport(m.worker_id, m.job_id, m.attempt, m.exit_code, m.done, m.steps, m.steps_run, m.compute_seconds,
                      m.wall_seconds, m.reason[:40], m.detail[:MAX_DETAIL])


def _user_info(c: Credential) -> pb.UserInfo:
    return pb.UserInfo(name=c.name, role=c.role, entities=list(c.entities), manages=list(c.manages), created=c.created,
                       revoked=c.revoked or 0.0)


def _what(exc: BaseException) -> str:
    """What is wrong with a damaged state, in a few words."""
    return (str(exc) if isinstance(exc, StateDamaged) else f"{type(exc).__name__}: {exc}")[:300]


def _actor() -> str:
    who = caller()
    return who.actor if who is not None else "scheduler"


def _lease(lease: Lease) -> pb.Lease:
    return pb.Lease(steps_total=lease.steps_total, seconds_left=lease.seconds_left, renew_in=lease.renew_in,
                    renewed=lease.renewed, round_seconds=lease.round_seconds, lease_end=lease.lease_end,
                    lease_mac=lease.lease_mac, stop=lease.stop)
