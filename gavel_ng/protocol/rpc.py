"""gRPC plumbing shared by the scheduler, the workers, the iterator and the client.

Stubs and server handlers are built from gavel.proto's descriptor, so only the message
module is generated. Every call carries `authorization: Bearer TOKEN`; the server turns the
token into a `Principal` (who is calling, in which role) with the `authenticate` function
it was given, and lets the call through only if that role may call the method (`ALLOWED`):

- admin: the cluster token (STATE/token); may do anything, and is what every client of a
  cluster that predates per-user credentials holds;
- user: a credential an admin issued (`gavel-ng user add`); submits, lists, cancels;
- worker: a worker credential; registers, heartbeats and reports, nothing else;
- job: a token derived from the cluster token for one attempt (HMAC over job and attempt),
  good only for that attempt's own lease calls;
- scheduler: what a worker's own service accepts (RunJob, KillJob), with the token the worker
  gave the scheduler when it registered.

A handler reads its caller with `caller()`. Malformed requests, refused tokens and handler
errors are answered with a status, never a traceback, and said in the log in one line with
the caller's address, at most once a minute per kind and address (`SayOnce`).
"""

from __future__ import annotations

import hashlib
import hmac
import logging
import os
import re
import secrets
import threading
import time
from collections.abc import Callable
from concurrent import futures
from contextvars import ContextVar
from dataclasses import dataclass
from functools import partial
from pathlib import Path

import grpc
from grpc_health.v1 import health, health_pb2, health_pb2_grpc

from ..errors import InputError
from .limits import CallLimiter, Caps
from .protos import gavel_pb2 as pb

log = logging.getLogger(__name__)
# probes (Kubernetes' native gRPC probes send no token) may Check health unauthenticated; Watch holds a
# handler thread for as long as it streams, so it needs a credential like any other call
OPEN_METHODS = frozenset({"/grpc.health.v1.Health/Check"})
TOKEN_ENV = "GAVEL_NG_TOKEN"
_JOB_PREFIX = "job:"
# who may call what (method names are unique across the Scheduler and Worker services)
ALLOWED: dict[str, frozenset[str]] = {
    **dict.fromkeys(("RegisterWorker", "Heartbeat", "ReportDone", "ReportDones"), frozenset({"worker", "admin"})),
    **dict.fromkeys(("InitJob", "UpdateLease"), frozenset({"job", "admin"})),
    **dict.fromkeys(("SubmitJobs", "CancelJob", "ListJobs", "GetStatus"), frozenset({"user", "admin"})),
    "ManageUsers": frozenset({"admin"}),
    **dict.fromkeys(("RunJob", "RunJobs", "KillJob"), frozenset({"scheduler"})),
    "Watch": frozenset({"admin", "user", "worker"}),
}
SAY_EVERY_S = 60.0        # a refusal of the same kind from the same address is logged at most this often
# a credential's name: a POSIX account name, since a user's jobs run as the account of that name where workers
# run as root (runtime.credentials issues them, worker.isolation looks them up)
ACCOUNT_NAME = re.compile(r"^[a-z_][a-z0-9_.-]{0,31}$")


@dataclass(frozen=True)
class Principal:
    """Who is calling: a role, and the credential's name (users, workers) or the job attempt (jobs)."""

    role: str                            # admin | user | worker | job | scheduler
    name: str = ""
    job: tuple[int, int] | None = None   # (job_id, attempt) for a job token

    @property
    def actor(self) -> str:
        """How events and logs name it: admin, user:alice, worker:node3, job:7.2, scheduler."""
        if self.job is not None:
            return f"job:{self.job[0]}.{self.job[1]}"
        return f"{self.role}:{self.name}" if self.name else self.role

    @property
    def is_admin(self) -> bool:
        return self.role == "admin"


ADMIN = Principal("admin")
SCHEDULER = Principal("scheduler")
_CALLER: ContextVar[Principal | None] = ContextVar("gavel_ng_caller", default=None)


def caller() -> Principal | None:
    """The principal of the call this handler serves (None outside a call: the round loop, tests)."""
    return _CALLER.get()


def bearer(metadata) -> str:
    """The token of `authorization: Bearer TOKEN` among a call's metadata ("" when none)."""
    value = next((v for k, v in metadata or () if k == "authorization"), "")
    return value[len("Bearer "):] if isinstance(value, str) and value.startswith("Bearer ") else ""


@dataclass(frozen=True)
class Security:
    """The token this process presents, plus optional TLS files (PEM paths)."""

    token: str
    tls_cert: str | None = None   # this process's certificate (servers)
    tls_key: str | None = None
    tls_ca: str | None = None     # CA that signed the peers' certificates (clients)

    def __post_init__(self) -> None:
        if not self.token:
            raise InputError("token", "", "a token is required (--token-file or $GAVEL_NG_TOKEN)")
        if (self.tls_cert is None) != (self.tls_key is None):
            raise InputError("--tls-cert/--tls-key", self.tls_cert or self.tls_key, "give both or neither")
        for name in ("tls_cert", "tls_key", "tls_ca"):
            path = getattr(self, name)
            if path is not None and not Path(path).is_file():
                raise InputError(f"--{name.replace('_', '-')}", path, "no such file")

    def server_credentials(self) -> grpc.ServerCredentials | None:
        if self.tls_cert is None:
            return None
        pair = (Path(self.tls_key).read_bytes(), Path(self.tls_cert).read_bytes())
        return grpc.ssl_server_credentials([pair])

    def channel_credentials(self) -> grpc.ChannelCredentials | None:
        if self.tls_ca is None:
            return None
        return grpc.ssl_channel_credentials(root_certificates=Path(self.tls_ca).read_bytes())


def read_token(path: str | None = None) -> str:
    """A token from a file, else from $GAVEL_NG_TOKEN, else ''."""
    if path:
        try:
            return Path(path).read_text().strip()
        except OSError as exc:
            raise InputError("--token-file", path, f"cannot read ({exc.strerror})") from None
    return os.environ.get(TOKEN_ENV, "").strip()


def new_token() -> str:
    return secrets.token_urlsafe(24)


def same(a: str, b: str) -> bool:
    return hmac.compare_digest(a.encode(), b.encode())


def derive(secret: str, purpose: str) -> str:
    """A key for one purpose derived from the cluster token: holding it tells nothing of the token."""
    return hmac.new(secret.encode(), f"gavel-ng:{purpose}".encode(), hashlib.sha256).hexdigest()


def job_token(secret: str, job_id: int, attempt: int) -> str:
    mac = hmac.new(secret.encode(), f"{job_id}:{attempt}".encode(), hashlib.sha256).hexdigest()
    return f"{_JOB_PREFIX}{job_id}:{attempt}:{mac}"


def job_principal(secret: str, token: str) -> Principal | None:
    """The job attempt a job token was made for, or None when it is not one (or forged)."""
    if not token.startswith(_JOB_PREFIX):
        return None
    try:
        job_s, attempt_s, _ = token[len(_JOB_PREFIX):].split(":")
        job, attempt = int(job_s), int(attempt_s)
    except ValueError:
        return None
    if same(token, job_token(secret, job, attempt)):
        return Principal("job", job=(job, attempt))
    return None


def token_authenticator(token: str, principal: Principal = ADMIN) -> Callable[[str], Principal | None]:
    """Who holds exactly `token` is `principal` (a worker's service: the scheduler; a bare server: the admin)."""
    return lambda presented: principal if presented and same(presented, token) else None


class SayOnce:
    """Refusals said in one line each, at most once every `every` seconds per (kind, caller address),
    with the count of those held back since: a hostile client cannot fill the log."""

    def __init__(self, every: float = SAY_EVERY_S, clock=time.monotonic):
        self.every, self.clock = every, clock
        self._last: dict[tuple[str, str], tuple[float, int]] = {}
        self._lock = threading.Lock()

    def __call__(self, kind: str, peer: str, text: str) -> None:
        """Say `text` (its "{host}" replaced by the caller's address) unless said for (kind, host) lately."""
        host = _host(peer)
        now = self.clock()
        with self._lock:
            last, held = self._last.get((kind, host), (-float("inf"), 0))
            if now - last < self.every:
                self._last[(kind, host)] = (last, held + 1)
                return
            self._last[(kind, host)] = (now, 0)
            if len(self._last) > 10_000:        # many addresses: forget the oldest half
                for key in sorted(self._last, key=lambda k: self._last[k][0])[:5_000]:
                    del self._last[key]
        more = f" ({held} more like it since)" if held else ""
        log.warning("%s%s", text.replace("{host}", host), more, extra={"kind": f"rpc {kind} {host}"})


def _host(peer: str) -> str:
    """'ipv4:10.0.0.7:51234' -> '10.0.0.7' (the port changes with every connection)."""
    kind, _, rest = (peer or "unknown").partition(":")
    if kind == "ipv6":
        return rest.rsplit(":", 1)[0].strip("[]")
    return rest.rsplit(":", 1)[0] if kind == "ipv4" else peer or "unknown"


@dataclass(frozen=True)
class Malformed:
    """A request that did not parse as its message type (what the deserializer hands the handler)."""

    reason: str


def _parser(cls):
    def parse(data: bytes):
        try:
            return cls.FromString(data)
        except Exception as exc:        # DecodeError, invalid UTF-8, recursion: all are the caller's fault
            return Malformed(str(exc)[:200] or type(exc).__name__)

    return parse


class _AuthInterceptor(grpc.ServerInterceptor):
    """Authenticates and authorizes every call, refuses malformed ones and calls over the caller's share
    of handler threads (limits.py), and turns any handler exception into one line and a status."""

    def __init__(self, authenticate: Callable[[str], Principal | None], limiter: CallLimiter):
        self.authenticate = authenticate
        self.limiter = limiter
        self.say = SayOnce()

        def deny(request, context):
            context.abort(grpc.StatusCode.UNAUTHENTICATED, "missing or invalid token")

        self._deny = grpc.unary_unary_rpc_method_handler(deny)

    def intercept_service(self, continuation, details):
        if details.method in OPEN_METHODS:
            return continuation(details)
        method = details.method.rsplit("/", 1)[-1]
        handler = continuation(details)
        if handler is None:
            return None
        if handler.unary_unary is None:    # a stream (health Watch): no context here, so refused before it runs
            who = self.authenticate(bearer(details.invocation_metadata))
            return handler if who is not None and who.role in ALLOWED.get(method, ()) else self._deny
        return grpc.unary_unary_rpc_method_handler(
            partial(self._guarded, handler.unary_unary, method),
            request_deserializer=handler.request_deserializer, response_serializer=handler.response_serializer)

    def _guarded(self, behaviour, method: str, request, context):
        peer = context.peer()
        who = self.authenticate(bearer(context.invocation_metadata()))
        if who is None:
            self.say("token", peer, f"refused {method} from {{host}}: missing or invalid token")
            context.abort(grpc.StatusCode.UNAUTHENTICATED, "missing or invalid token")
        if isinstance(request, Malformed):
            self.say("malformed", peer, f"refused {method} from {{host}} ({who.actor}): not a valid request "
                                        f"({request.reason})")
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, f"{method}: malformed request ({request.reason})")
        if who.role not in ALLOWED.get(method, ()):
            self.say(f"denied {who.actor}", peer, f"refused {method} from {{host}} ({who.actor}): a {who.role} may "
                                                  "not call it")
            roles = ", ".join(sorted(ALLOWED.get(method, ())))
            context.abort(grpc.StatusCode.PERMISSION_DENIED, f"{who.actor} may not call {method} (it is for: {roles})")
        key = f"user:{who.name}" if who.role == "user" else peer      # a user's connections share one cap
        cls, slot = self.limiter.classify(method, who.job, key)
        refusal = self.limiter.enter(cls, slot)
        if refusal is not None:
            log.debug("refused %s from %s: %s", method, slot, refusal)
            context.abort(grpc.StatusCode.RESOURCE_EXHAUSTED, f"{method}: {refusal}; retry later")
        bound = _CALLER.set(who)
        try:
            return behaviour(request, context)
        except Exception as exc:
            if context.code() is not None:            # the handler's own abort: its status stands
                raise
            self.say(f"error {method}", peer, f"{method} from {{host}} ({who.actor}) failed: "
                                              f"{type(exc).__name__}: {str(exc)[:200]}")
            context.abort(grpc.StatusCode.INTERNAL, f"{method} failed ({type(exc).__name__}); the server's log says "
                                                    "more")
        finally:
            _CALLER.reset(bound)
            self.limiter.leave(cls, slot)


def _service(name: str):
    return pb.DESCRIPTOR.services_by_name[name]


def _serializer(message_type) -> Callable:
    """A reply's bytes; a handler may return them already serialized (runtime.front's status page)."""
    serialize = message_type.SerializeToString
    return lambda reply: reply if isinstance(reply, bytes) else serialize(reply)


def make_server(bind: str, port: int, services: dict[str, object], security: Security,
                max_workers: int = 32, health_servicer: health.HealthServicer | None = None,
                authenticate: Callable[[str], Principal | None] | None = None,
                pool: futures.ThreadPoolExecutor | None = None) -> tuple[grpc.Server, int]:
    """Start a server for `services` ({"Scheduler": impl}) and the standard gRPC health service
    (grpc.health.v1.Health: SERVING for "" and each service's full name unless the caller, passing
    its own `health_servicer`, says otherwise); returns the server and the bound port. `authenticate`
    turns a token into its principal (default: `security.token` is the admin's, nothing else is).
    `pool`: the handler threads (max_workers of them) when the caller keeps its own (e.g. to time
    waits for them)."""
    limiter = CallLimiter(Caps(max_workers))
    who = authenticate or token_authenticator(security.token)
    server = grpc.server(pool or futures.ThreadPoolExecutor(max_workers=max_workers, thread_name_prefix="grpc"),
                         interceptors=[_AuthInterceptor(who, limiter)],
                         options=[("grpc.so_reuseport", 0)])
    for name, impl in services.items():
        desc = _service(name)
        methods = {}
        for m in desc.methods:
            if not hasattr(impl, m.name):      # a peer of an earlier protocol: callers fall back (UNIMPLEMENTED)
                continue
            req, resp = getattr(pb, m.input_type.name), getattr(pb, m.output_type.name)
            methods[m.name] = grpc.unary_unary_rpc_method_handler(
                getattr(impl, m.name), request_deserializer=_parser(req),
                response_serializer=_serializer(resp))
        server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(desc.full_name, methods),))
    own = health_servicer is None
    servicer = health.HealthServicer() if own else health_servicer
    if own:
        for name in ("", *(_service(n).full_name for n in services)):
            servicer.set(name, health_pb2.HealthCheckResponse.SERVING)
    health_pb2_grpc.add_HealthServicer_to_server(servicer, server)
    address = f"{bind}:{port}"
    creds = security.server_credentials()
    bound = server.add_secure_port(address, creds) if creds else server.add_insecure_port(address)
    if bound == 0:
        raise InputError("--port", port, f"cannot listen on {address}")
    server.start()
    return server, bound


def open_channel(address: str, security: Security | None) -> grpc.Channel:
    creds = security.channel_credentials() if security is not None else None
    # gRPC's own reconnect backoff grows to 2 minutes by default: a worker started before its
    # scheduler would then wait that long to notice it came up
    opts = [("grpc.enable_retries", 0), ("grpc.initial_reconnect_backoff_ms", 500),
            ("grpc.max_reconnect_backoff_ms", 10000)]
    return grpc.secure_channel(address, creds, options=opts) if creds else grpc.insecure_channel(address, options=opts)


class Stub:
    """Client of one service: `stub.Method(request, timeout=...)` with the token attached."""

    def __init__(self, channel: grpc.Channel, service: str, token: str, timeout: float = 10.0):
        self.timeout = timeout
        self._metadata = (("authorization", f"Bearer {token}"),)
        desc = _service(service)
        for m in desc.methods:
            req, resp = getattr(pb, m.input_type.name), getattr(pb, m.output_type.name)
            call = channel.unary_unary(f"/{desc.full_name}/{m.name}", request_serializer=req.SerializeToString,
                                       response_deserializer=resp.FromString)
            setattr(self, m.name, partial(self._call, call))

    def _call(self, call: Callable, request, timeout: float | None = None):
        return call(request, metadata=self._metadata, timeout=self.timeout if timeout is None else timeout)
