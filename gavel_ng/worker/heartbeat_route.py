"""Where a worker's heartbeats go: the scheduler's heartbeat port when its registration reply names one
(runtime.front), else the scheduler's own port.

The port answers the usual heartbeat; one it leaves to the scheduler (`ask_scheduler`), and any call
to it that fails, is sent to the scheduler's own port at once, so a port that is down or behind costs
a heartbeat a second call, never the worker's life. A port that cannot be reached is left alone for
SKIP_AFTER_FAILURE seconds, so a stopped port process does not add its timeout to every heartbeat.
"""

from __future__ import annotations

import logging
import time

import grpc

from ..protocol.rpc import Security, Stub, open_channel

log = logging.getLogger(__name__)
PORT_TIMEOUT = 1.0            # seconds a heartbeat waits for the port before it goes to the scheduler's port
SKIP_AFTER_FAILURE = 30.0     # seconds the port is not tried after it could not be reached
# the port is down or stopped; any other refusal (e.g. a credential issued since its copy was made) is the
# scheduler's to make: that heartbeat goes there, the next one to the port again
UNREACHABLE = (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED)


class HeartbeatRoute:
    def __init__(self, scheduler: str, security: Security, clock=time.monotonic):
        self.host = scheduler.rsplit(":", 1)[0]
        self.security, self.clock = security, clock
        self.port = 0
        self.stub: Stub | None = None
        self._channel = None
        self.skip_until = 0.0
        self.answered = self.asked = self.failed = 0   # by the port; left by it to the scheduler; failed calls

    def registered(self, port: int) -> None:
        """The registration reply's `heartbeat_port` (0: none): heartbeats go there from now on."""
        if port == self.port:
            return
        self.close()
        self.port = port
        if port:
            self._channel = open_channel(f"{self.host}:{port}", self.security)
            self.stub = Stub(self._channel, "Scheduler", self.security.token, timeout=PORT_TIMEOUT)
            self.skip_until = 0.0
            log.info("heartbeats go to the scheduler's heartbeat port %s:%d", self.host, port)

    def send(self, scheduler: Stub, request):
        """The heartbeat's reply: from the port when it answers, else from `scheduler` (its own port)."""
        if self.stub is not None and self.clock() >= self.skip_until:
            try:
                reply = self.stub.Heartbeat(request)
            except grpc.RpcError as exc:
                self.failed += 1
                unreachable = exc.code() in UNREACHABLE
                if unreachable:             # down or stopped: not tried again for a while
                    self.skip_until = self.clock() + SKIP_AFTER_FAILURE
                if self.failed == 1 or self.failed % 100 == 0:
                    log.warning("heartbeat port %s:%d failed (%s; %d time(s) in all): the heartbeat goes to the "
                                "scheduler's own port%s", self.host, self.port, exc.code().name, self.failed,
                                f", and the next ones for {SKIP_AFTER_FAILURE:g}s" if unreachable else "")
            else:
                if not reply.ask_scheduler:
                    self.answered += 1
                    return reply
                self.asked += 1
        return scheduler.Heartbeat(request)

    def close(self) -> None:
        if self._channel is not None:
            self._channel.close()
        self._channel, self.stub, self.port = None, None, 0
