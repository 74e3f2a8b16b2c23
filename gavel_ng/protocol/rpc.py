"""gRPC plumbing shared by the scheduler, the workers, the iterator and the client.

Stubs and server handlers are built from gavel.proto's descriptor, so only the message
module is generated. Authentication: every call carries `authorization: Bearer TOKEN`;
a server interceptor refuses anything else with UNAUTHENTICATED before a handler runs.
A job process gets a token derived from the shared one (HMAC over its job and attempt)
that is good only for the iterator's calls, so user code never holds the cluster token.
"""

from __future__ import annotations

import hashlib
import hmac
import logging
import os
import secrets
from collections.abc import Callable
from concurrent import futures
from dataclasses import dataclass
from functools import partial
from pathlib import Path

import grpc
from grpc_health.v1 import health, health_pb2, health_pb2_grpc

from ..errors import InputError
from .limits import JOB_METHODS, CallLimiter, Caps  # JOB_METHODS: what a job-scoped token may call
from .protos import gavel_pb2 as pb

log = logging.getLogger(__name__)
# probes (Kubernetes' native gRPC probes send no token) may Check health unauthenticated; Watch holds a
# handler thread for as long as it streams, so it needs the token like any other call
OPEN_METHODS = frozenset({"/grpc.health.v1.Health/Check"})
TOKEN_ENV = "GAVEL_NG_TOKEN"
_JOB_PREFIX = "job:"


@dataclass(frozen=True)
class Security:
    """Shared token plus optional TLS files (PEM paths)."""

    token: str
    tls_cert: str | None = None   # this process's certificate (servers)
    tls_key: str | None = None
    tls_ca: str | None = None     # CA that signed the peers' certificates (clients)

    def __post_init__(self) -> None:
        if not self.token:
            raise InputError("token", "", "a shared token is required (--token-file or $GAVEL_NG_TOKEN)")
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
    """The shared token from a file, else from $GAVEL_NG_TOKEN, else ''."""
    if path:
        try:
            return Path(path).read_text().strip()
        except OSError as exc:
            raise InputError("--token-file", path, f"cannot read ({exc.strerror})") from None
    return os.environ.get(TOKEN_ENV, "").strip()


def new_token() -> str:
    return secrets.token_urlsafe(24)


def job_token(secret: str, job_id: int, attempt: int) -> str:
    mac = hmac.new(secret.encode(), f"{job_id}:{attempt}".encode(), hashlib.sha256).hexdigest()
    return f"{_JOB_PREFIX}{job_id}:{attempt}:{mac}"


@dataclass(frozen=True)
class Principal:
    """Who is calling: the cluster (shared token) or one job attempt."""

    job: tuple[int, int] | None = None   # (job_id, attempt) for a job token

    @property
    def is_cluster(self) -> bool:
        return self.job is None


def authenticate(secret: str, metadata, method: str) -> Principal | None:
    """The caller behind `metadata`, or None when the token is missing, wrong or not allowed here."""
    value = next((v for k, v in metadata or () if k == "authorization"), "")
    if not isinstance(value, str) or not value.startswith("Bearer "):
        return None
    token = value[len("Bearer "):]
    if hmac.compare_digest(token.encode(), secret.encode()):
        return Principal()
    if token.startswith(_JOB_PREFIX) and method in JOB_METHODS:
        try:
            job_s, attempt_s, _ = token[len(_JOB_PREFIX):].split(":")
            job, attempt = int(job_s), int(attempt_s)
        except ValueError:
            return None
        if hmac.compare_digest(token.encode(), job_token(secret, job, attempt).encode()):
            return Principal((job, attempt))
    return None


class _AuthInterceptor(grpc.ServerInterceptor):
    """Refuses unauthenticated calls, and calls over the caller's share of handler threads (limits.py)."""

    def __init__(self, secret: str, limiter: CallLimiter):
        self.secret = secret
        self.limiter = limiter

        def deny(request, context):
            context.abort(grpc.StatusCode.UNAUTHENTICATED, "missing or invalid token")

        self._deny = grpc.unary_unary_rpc_method_handler(deny)

    def intercept_service(self, continuation, details):
        if details.method in OPEN_METHODS:
            return continuation(details)
        method = details.method.rsplit("/", 1)[-1]
        who = authenticate(self.secret, details.invocation_metadata, method)
        if who is None:
            log.warning("refused %s: missing or invalid token", details.method)
            return self._deny
        handler = continuation(details)
        if handler is None or handler.unary_unary is None:
            return handler
        return grpc.unary_unary_rpc_method_handler(
            partial(self._limited, handler.unary_unary, method, who.job),
            request_deserializer=handler.request_deserializer, response_serializer=handler.response_serializer)

    def _limited(self, behaviour, method: str, job, request, context):
        """Run the handler while holding one of the caller's slots; RESOURCE_EXHAUSTED when it has none."""
        cls, caller = self.limiter.classify(method, job, context.peer())
        refusal = self.limiter.enter(cls, caller)
        if refusal is not None:
            log.debug("refused %s from %s: %s", method, caller, refusal)
            context.abort(grpc.StatusCode.RESOURCE_EXHAUSTED, f"{method}: {refusal}; retry later")
        try:
            return behaviour(request, context)
        finally:
            self.limiter.leave(cls, caller)


def _service(name: str):
    return pb.DESCRIPTOR.services_by_name[name]


def make_server(bind: str, port: int, services: dict[str, object], security: Security,
                max_workers: int = 32, health_servicer: health.HealthServicer | None = None,
                pool: futures.ThreadPoolExecutor | None = None) -> tuple[grpc.Server, int]:
    """Start a server for `services` ({"Scheduler": impl}) and the standard gRPC health service
    (grpc.health.v1.Health: SERVING for "" and each service's full name unless the caller, passing
    its own `health_servicer`, says otherwise); returns the server and the bound port. `pool`: the
    handler threads (max_workers of them) when the caller keeps its own (e.g. to time waits for them)."""
    limiter = CallLimiter(Caps(max_workers))
    server = grpc.server(pool or futures.ThreadPoolExecutor(max_workers=max_workers, thread_name_prefix="grpc"),
                         interceptors=[_AuthInterceptor(security.token, limiter)],
                         options=[("grpc.so_reuseport", 0)])
    for name, impl in services.items():
        desc = _service(name)
        methods = {}
        for m in desc.methods:
            req, resp = getattr(pb, m.input_type.name), getattr(pb, m.output_type.name)
            methods[m.name] = grpc.unary_unary_rpc_method_handler(
                getattr(impl, m.name), request_deserializer=req.FromString,
                response_serializer=resp.SerializeToString)
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
