"""Heartbeats, and a copy of the status page, answered by a process of their own (cluster-config
`heartbeat_port`).

At 10,000 GPUs the scheduler's one Python process runs gRPC's dispatching thread, its handler
threads and the round's planning and launches under one GIL: a heartbeat, cheap in itself, waited
0.2-1.6 s for its turn at a round's boundary (issue 42; docs/deploy.md, "Scale"). Here a second
process serves Heartbeat only, from a copy of every worker's row (runtime.heartbeats) that the
scheduler sends it every PUBLISH_EVERY seconds, and tells the scheduler when it last heard each
worker (`last_seen`).

The copy decides only the usual heartbeat, which changes nothing but `last_seen`. Whatever it
cannot answer as the scheduler would (an attempt it does not know yet, a dead, unknown or fenced
worker, a caller it does not recognise, a copy older than MAX_AGE) it leaves to the scheduler: the
reply says `ask_scheduler` and the daemon sends that heartbeat to the scheduler's own port. So a copy
that is behind costs a heartbeat a second call, never a wrong answer: kills and refusals are said by
the scheduler only, and the lease ends the port tells are at most MAX_AGE older than the scheduler's.
An attempt's lease end only grows, so a worker keeps the later of the end it holds and the one it is
told (worker.daemon): a copy behind a renewal the job already wrote down cannot shorten its lease
(it did until issue 42's sixth pass, and a paused scheduler's worker stopped renewed jobs early).

The port also serves GetStatus: the default page as an admin sees it, which the scheduler builds every
STATUS_EVERY seconds and sends as bytes. At a round's end the scheduler's own port answered `status`
in up to 140-200 ms (issue 42, sixth pass): its one dispatching thread works through every worker's
end report first, each waiting for the GIL. Here nothing waits for the scheduler; the page is at most
STATUS_EVERY old (its `now` says when it was read). Anything else (another page size, a user's own
view, which is redacted for that user) is refused FAILED_PRECONDITION: the scheduler's own port
answers it.
"""

from __future__ import annotations

import logging
import math
import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from multiprocessing.connection import Connection
from pathlib import Path

import grpc

from ..errors import InputError
from ..protocol.limits import STATUS_JOBS
from ..protocol.protos import gavel_pb2 as pb
from ..protocol.rpc import Principal, Security, caller, make_server, same
from .credentials import principal_of, token_hash
from .heartbeats import WorkerRow, heartbeat_reply, quick_answer

log = logging.getLogger(__name__)
PUBLISH_EVERY = 0.2      # seconds between the scheduler's updates of the copy
SEEN_EVERY = 0.1         # seconds between the port's reports of the workers it heard
THREADS = 8              # the port's gRPC handler threads
MAX_AGE = 5.0            # seconds: a copy older than this answers nothing (the scheduler is stopped or starved)
FULL_EVERY = 2.0         # seconds between reads of every row even when the state's mark did not change
START_TIMEOUT = 60.0     # seconds for the process to start and bind its port
STATUS_EVERY = 0.5       # seconds between the scheduler's status pages for the port
STATUS_MAX_AGE = 5.0     # seconds: an older page is not served (the scheduler is stopped or starved)


@dataclass
class Copy:
    """The port's copy: rows by worker id, owners (worker id -> the credential that registered it), active
    credentials (token hash -> principal); and what the port heard since its last report."""

    secret: str
    rows: dict[str, WorkerRow] = field(default_factory=dict)
    owners: dict[str, str] = field(default_factory=dict)
    principals: dict[str, Principal] = field(default_factory=dict)
    seen: dict[str, float] = field(default_factory=dict)
    read_at: float = -math.inf                      # time.monotonic() when the scheduler read the latest update
    page: tuple[float, bytes] | None = None         # the status page: (time.monotonic() when read, its bytes)
    answered: int = 0
    asked: int = 0
    pages: int = 0                                  # status pages served
    lock: threading.Lock = field(default_factory=threading.Lock)

    def apply(self, update: tuple) -> None:
        read_at, rows, owners, principals = update
        for wid, row in rows.items():
            if row is None:
                self.rows.pop(wid, None)
            else:
                self.rows[wid] = row
        if owners is not None:
            self.owners = owners
        if principals is not None:
            self.principals = principals
        self.read_at = read_at

    def authenticate(self, token: str) -> Principal | None:
        return principal_of(token, self.secret, lambda t: self.principals.get(token_hash(t)))

    def speaks_for(self, who: Principal | None, worker_id: str, row: WorkerRow, call_token: str) -> bool:
        """As SchedulerService.check_worker would allow it (anything else: the scheduler says why not)."""
        if who is None or who.is_admin:
            return True
        return self.owners.get(worker_id) == who.actor and (not row.call_token or same(row.call_token, call_token))

    def heard(self, worker_id: str, answered: bool) -> None:
        with self.lock:
            if answered:
                self.seen[worker_id] = time.monotonic()
                self.answered += 1
            else:
                self.asked += 1

    def served_page(self) -> None:
        with self.lock:
            self.pages += 1

    def take(self) -> tuple[dict[str, float], int, int, int]:
        with self.lock:
            out = self.seen, self.answered, self.asked, self.pages
            self.seen, self.answered, self.asked, self.pages = {}, 0, 0, 0
        return out


class FrontServicer:
    """The Scheduler service with Heartbeat and GetStatus only (make_server serves the methods an object has)."""

    def __init__(self, copy: Copy):
        self.copy = copy

    def Heartbeat(self, req, context):
        row = self.copy.rows.get(req.worker_id)
        answer = None
        if row is not None and time.monotonic() - self.copy.read_at <= MAX_AGE and \
                self.copy.speaks_for(caller(), req.worker_id, row, req.call_token):
            answer = quick_answer(row, [(r.job_id, r.attempt) for r in req.running], time.time())
        self.copy.heard(req.worker_id, answer is not None)
        return pb.HeartbeatReply(ask_scheduler=True) if answer is None else heartbeat_reply(answer)

    def GetStatus(self, req, context):
        """The page the scheduler sent (bytes, as sent), to an admin asking for the default page."""
        who = caller()
        sized = req.job_limit in (0, STATUS_JOBS)
        if not sized or (who is not None and not who.is_admin):
            context.abort(grpc.StatusCode.FAILED_PRECONDITION,
                          f"the heartbeat port serves the default status page ({STATUS_JOBS} jobs) to admin tokens "
                          "only; ask the scheduler's own port for " + ("your view" if sized else "this page size"))
        page = self.copy.page
        if page is None or time.monotonic() - page[0] > STATUS_MAX_AGE:
            context.abort(grpc.StatusCode.UNAVAILABLE, f"no status page from the scheduler in the last "
                                                       f"{STATUS_MAX_AGE:g}s; ask the scheduler's own port")
        self.copy.served_page()
        return page[1]


def serve(conn: Connection) -> None:
    """The port process's body: serve until the scheduler's end of the pipe closes."""
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(levelname)s heartbeat port: %(message)s")
    bind, port, security = conn.recv()
    copy = Copy(security.token)
    try:
        server, bound = make_server(bind, port, {"Scheduler": FrontServicer(copy)}, security, max_workers=THREADS,
                                    authenticate=copy.authenticate)
    except Exception as exc:             # InputError (port taken) or gRPC's own: said to the scheduler
        conn.send(("error", str(exc)))
        return
    conn.send(("port", bound))
    stop = threading.Event()

    def report() -> None:
        while not stop.wait(SEEN_EVERY):
            seen, answered, asked, pages = copy.take()
            try:
                conn.send(("seen", seen, answered, asked, pages))
            except OSError:
                return

    threading.Thread(target=report, name="front-seen", daemon=True).start()
    try:
        while True:
            message = conn.recv()
            if message[0] == "status":
                copy.page = message[1:]
            else:
                copy.apply(message[1])
    except (EOFError, OSError):          # the scheduler stopped or died: so does its port
        pass
    finally:
        stop.set()
        server.stop(0)


class HeartbeatFront:
    """The scheduler's side: starts the port's process, keeps its copy current, takes what it heard.
    A port process that dies is started again on the same port; meanwhile workers' heartbeats to it
    fail and go to the scheduler's own port (worker.daemon)."""

    def __init__(self, state, credentials, access, security: Security, bind: str, port: int,
                 status_page: Callable[[], bytes] | None = None):
        """`status_page()`: the default status page as an admin sees it, serialized (the service's)."""
        self.state, self.credentials, self.access = state, credentials, access
        self.security, self.bind, self.port = security, bind, port
        self.status_page = status_page
        self.page_failures = 0
        self.answered = self.asked = self.restarts = 0      # heartbeats answered there, left to the scheduler
        self.pages = 0                                      # status pages served there
        self._stop = threading.Event()
        self._proc = self._conn = None
        self._link = threading.Lock()        # one process's pipe and what was sent through it
        self._sent: dict[str, WorkerRow] = {}
        self._sent_owners = self._sent_principals = None
        self._mark, self._full_at = None, -math.inf      # the state's rows_mark at the last read of every row
        self._threads: list[threading.Thread] = []

    @property
    def alive(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    def start(self) -> int:
        """Start the process; its port (the chosen one when `port` was 0)."""
        self._spawn()
        for target, name in ((self._publish, "front-publish"), (self._listen, "front-listen")):
            t = threading.Thread(target=target, name=name, daemon=True)
            t.start()
            self._threads.append(t)
        log.info("heartbeats answered on port %d by a process of their own (pid %d)", self.port, self._proc.pid)
        return self.port

    def _spawn(self) -> None:
        # a fresh interpreter (`python -m gavel_ng.runtime.front`), not a fork (gRPC's threads do not survive
        # one) nor multiprocessing's spawn (it imports the caller's __main__ again)
        ours, theirs = socket.socketpair()
        root = str(Path(__file__).resolve().parents[2])     # this gavel_ng, however the scheduler found it
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, (root, os.environ.get("PYTHONPATH"))))}
        proc = subprocess.Popen([sys.executable, "-m", __name__, str(theirs.fileno())], pass_fds=(theirs.fileno(),),
                                env=env)
        theirs.close()
        conn = Connection(ours.detach())
        conn.send((self.bind, self.port, self.security))
        if not conn.poll(START_TIMEOUT):
            proc.kill()
            raise RuntimeError(f"the heartbeat port's process did not start in {START_TIMEOUT:g}s")
        try:
            kind, value = conn.recv()
        except EOFError:
            kind, value = "error", f"it exited ({proc.wait()})"
        if kind != "port":
            proc.wait(5)
            raise InputError("heartbeat_port", self.port, f"its process cannot serve on {self.bind}:{self.port}: "
                                                           f"{value}")
        with self._link:                                # a new process starts from an empty copy
            self.port, self._proc, self._conn = value, proc, conn
            self._sent, self._sent_owners, self._sent_principals = {}, None, None
            self._mark, self._full_at = None, -math.inf

    def _publish(self) -> None:
        page_at = -math.inf
        while not self._stop.wait(PUBLISH_EVERY):
            messages = []
            if self.status_page is not None and time.monotonic() - page_at >= STATUS_EVERY:
                page_at = time.monotonic()
                try:
                    messages.append(("status", page_at, self.status_page()))
                except Exception:                   # a page that fails to build: said, the port's copy ages
                    self.page_failures += 1
                    if self.page_failures == 1 or self.page_failures % 100 == 0:
                        log.exception("the status page for the heartbeat port failed (%d time(s) in all)",
                                      self.page_failures)
            with self._link:
                try:
                    for message in (("copy", self._update()), *messages):
                        self._conn.send(message)
                except (OSError, ValueError):       # the process died: _listen starts another
                    continue

    def _update(self) -> tuple:
        """What changed since the last update: rows (None: the worker is gone; a row read while it changed
        is sent at a later update), and owners and principals when they changed (None: as before)."""
        read_at = time.monotonic()         # the same clock as the port's (one machine)
        mark = self.state.rows_mark()
        owners, principals = dict(self.access.worker_owner), self.credentials.principals()
        if mark == self._mark and read_at - self._full_at < FULL_EVERY:    # nothing a row says changed
            rows, changed = self._sent, {}
        else:
            self._mark, self._full_at = mark, read_at
            rows = self.state.worker_rows()      # 6 ms of the scheduler's time at 1,250 workers
            changed = {wid: row for wid, row in rows.items() if row is not None and self._sent.get(wid) != row}
            changed.update((wid, None) for wid in self._sent.keys() - rows.keys())
            rows = {wid: self._sent.get(wid) if row is None else row for wid, row in rows.items()}   # read next time
        out = (read_at, changed, owners if owners != self._sent_owners else None,
               principals if principals != self._sent_principals else None)
        self._sent, self._sent_owners, self._sent_principals = rows, owners, principals
        return out

    def _listen(self) -> None:
        while not self._stop.is_set():
            try:
                kind, seen, answered, asked, pages = self._conn.recv()
            except (EOFError, OSError):
                if self._stop.is_set():
                    return
                self._restart()
                continue
            self.answered += answered
            self.pages += pages
            self.asked += asked
            workers = self.state.workers
            for wid, t in seen.items():
                w = workers.get(wid)
                if w is not None and w.alive and t > w.last_seen:
                    w.last_seen = t

    def _restart(self) -> None:
        code = self._proc.wait() if self._proc is not None else None
        log.warning("the heartbeat port's process ended (exit %s): starting another on port %d; workers send their "
                    "heartbeats to the scheduler's port meanwhile", code, self.port)
        while not self._stop.wait(1.0):
            try:
                self._spawn()
                self.restarts += 1
                return
            except (RuntimeError, OSError, InputError) as exc:
                log.warning("%s; trying again", exc)

    def stop(self) -> None:
        self._stop.set()
        if self._proc is not None:
            self._proc.terminate()             # its end of the pipe closes: _listen returns
            try:
                self._proc.wait(5)
            except subprocess.TimeoutExpired:
                self._proc.kill()
                self._proc.wait()
        for t in self._threads:
            t.join(timeout=5)
        if self._conn is not None:
            self._conn.close()
        log.info("heartbeat port: %d heartbeats answered there, %d left to the scheduler, %d restarts",
                 self.answered, self.asked, self.restarts)


if __name__ == "__main__":
    serve(Connection(int(sys.argv[1])))
