"""Heartbeats answered by a process of their own (cluster-config heartbeat_port; runtime.front).

A real scheduler service on loopback with its heartbeat port's real process, a Worker service that
runs nothing, and heartbeats sent as the daemon sends them (worker.heartbeat_route): the port
answers the usual heartbeat as the scheduler would, and its answers keep the worker alive; what
it cannot answer (a stray attempt, an unknown or dead worker, another credential's worker) goes to
the scheduler, which decides as before. The port's process killed (-9) or stopped (SIGSTOP) costs
heartbeats a second call, never a worker: they go to the scheduler's own port, and a killed port
process is started again on the same port.
"""

from __future__ import annotations

import os
import signal
import time

import grpc
import pytest
from service_helpers import FakeWorker, wait_for

from gavel_ng.protocol.jobspec import JobSpec
from gavel_ng.protocol.protos import gavel_pb2 as pb
from gavel_ng.protocol.rpc import Security, Stub, open_channel
from gavel_ng.runtime.config import ClusterConfig
from gavel_ng.runtime.heartbeats import WorkerRow, quick_answer
from gavel_ng.runtime.jobs import AttemptRef
from gavel_ng.runtime.service import SchedulerService
from gavel_ng.worker import heartbeat_route
from gavel_ng.worker.heartbeat_route import HeartbeatRoute


@pytest.fixture
def cluster(tmp_path):
    """(service, main stub, worker address) with the heartbeat port on any free port."""
    svc = SchedulerService(ClusterConfig(round_seconds=1.0, heartbeat_port=0), tmp_path / "state", port=0,
                           bind="127.0.0.1")
    svc.start()
    worker = FakeWorker()
    server, address = worker.serve(svc.secret)
    channel = open_channel(f"127.0.0.1:{svc.port}", Security(svc.secret))
    yield svc, Stub(channel, "Scheduler", svc.secret, timeout=10.0), address
    channel.close()
    server.stop(0)
    svc.stop(grace=0.1)


def _register(stub, address: str, worker_id: str = "w1", token: str = "daemon-1"):
    return stub.RegisterWorker(pb.RegisterWorkerRequest(worker_id=worker_id, address=address, gpu_type="v100",
                                                        gpus=4, call_token=token))


def _beat(worker_id: str = "w1", token: str = "daemon-1", running=()) -> pb.HeartbeatRequest:
    return pb.HeartbeatRequest(worker_id=worker_id, call_token=token,
                               running=[pb.AttemptRef(job_id=m, attempt=a) for m, a in running])


def _route(svc, reply, token: str | None = None) -> HeartbeatRoute:
    route = HeartbeatRoute(f"127.0.0.1:{svc.port}", Security(token or svc.secret))
    route.registered(reply.heartbeat_port)
    return route


def _answered(route: HeartbeatRoute, main, request, n: int = 1):
    """Send until the port has answered n heartbeats (its copy lags the scheduler by a publication; a call
    that timed out on a loaded machine would leave the port alone for 30 s: tried again each time here)."""

    def answered() -> bool:
        route.skip_until = 0.0
        route.send(main, request)
        return route.answered >= n

    wait_for(answered, "the port answered", timeout=30)


def _refused(route: HeartbeatRoute, main, code: grpc.StatusCode):
    """A predicate for wait_for: a heartbeat sent by the route is refused with `code` (by the scheduler)."""

    def check() -> bool:
        try:
            route.send(main, _beat())
        except grpc.RpcError as exc:
            return exc.code() == code
        return False

    return check


def _stub(port: int, token: str) -> Stub:
    return Stub(open_channel(f"127.0.0.1:{port}", Security(token)), "Scheduler", token)


def test_the_port_answers_the_usual_heartbeat_and_keeps_its_worker_alive(cluster):
    svc, main, address = cluster
    reply = _register(main, address)
    assert reply.heartbeat_port not in (0, svc.port)
    route = _route(svc, reply)
    _answered(route, main, _beat())
    w = svc.state.workers["w1"]
    before = w.last_seen
    _answered(route, main, _beat(), route.answered + 3)
    # the port's answers reached the scheduler: the worker was heard without a call to its port
    wait_for(lambda: w.last_seen > before, "last_seen moved by the port's answers", timeout=10)
    # and its counts reach the scheduler's metrics
    from prometheus_client import generate_latest

    wait_for(lambda: svc.front.answered >= route.answered, "the port's counts", timeout=10)
    text = generate_latest(svc.metrics.registry).decode()
    assert f'gavel_heartbeat_port_heartbeats_total{{outcome="answered"}} {float(svc.front.answered)}' in text
    assert "gavel_heartbeat_port_up 1.0" in text


def test_a_running_attempt_gets_its_lease_from_the_port_as_the_scheduler_would_give_it(cluster):
    from gavel_ng.protocol.jobspec import JobSpec

    svc, main, address = cluster
    route = _route(svc, _register(main, address, token=""))    # FakeWorker takes the cluster token's RunJob
    [m] = svc.state.submit([JobSpec("ResNet-18 (batch size 32)", 10**6, size="tiny")])
    wait_for(lambda: svc.state.jobs[m].live is not None, "the job did not start", timeout=30)
    ref = (m, svc.state.jobs[m].live.attempt)
    port, end = None, time.monotonic() + 30
    while port is None and time.monotonic() < end:     # until the port answers (its copy has the new attempt)
        before, route.skip_until = route.answered, 0.0
        reply = route.send(main, _beat(token="", running=[ref]))
        port = reply if route.answered > before else None
    sent = time.time()
    theirs = svc.state.heartbeat("w1", [AttemptRef(*ref)])       # the scheduler's own answer, just after
    assert port is not None and not port.kill and not theirs.kills
    [lease] = port.leases
    [(their_ref, left)] = theirs.leases
    assert (lease.job_id, lease.attempt) == ref == (their_ref.job_id, their_ref.attempt)
    # the copy's lease end is the scheduler's, or an earlier one (it lags a renewal by a publication at most)
    assert sent + lease.seconds_left <= time.time() + left + 0.05


def test_a_stray_attempt_is_killed_by_the_scheduler_not_the_copy(cluster):
    svc, main, address = cluster
    route = _route(svc, _register(main, address))
    _answered(route, main, _beat())
    asked = route.asked
    reply = route.send(main, _beat(running=[(999, 1)]))
    assert route.asked == asked + 1
    assert [(k.job_id, k.attempt) for k in reply.kill] == [(999, 1)]


def test_a_dead_worker_is_told_to_register_again(cluster):
    svc, main, address = cluster
    route = _route(svc, _register(main, address))
    _answered(route, main, _beat())
    svc.state.worker_lost(svc.state.workers["w1"], "test")
    wait_for(_refused(route, main, grpc.StatusCode.NOT_FOUND), "NOT_FOUND once the copy has the worker dead",
             timeout=10)
    assert not svc.state.workers["w1"].alive


def test_another_credential_cannot_keep_a_worker_alive_through_the_port(cluster):
    svc, main, address = cluster
    _, token_a = svc.credentials.add("node-a", role="worker")
    _, token_b = svc.credentials.add("node-b", role="worker")
    main_a = _stub(svc.port, token_a)
    reply = _register(main_a, address)
    route_a = _route(svc, reply, token_a)
    _answered(route_a, main_a, _beat())
    port_b = _stub(reply.heartbeat_port, token_b)
    assert port_b.Heartbeat(_beat()).ask_scheduler                      # the port does not decide it ...
    main_b = _stub(svc.port, token_b)
    with pytest.raises(grpc.RpcError) as err:                           # ... the scheduler refuses it
        _route(svc, reply, token_b).send(main_b, _beat())
    assert err.value.code() == grpc.StatusCode.PERMISSION_DENIED
    assert port_b.Heartbeat(_beat(token="not-the-daemon")).ask_scheduler
    bad = _stub(reply.heartbeat_port, "nobody")
    with pytest.raises(grpc.RpcError) as err:
        bad.Heartbeat(_beat())
    assert err.value.code() == grpc.StatusCode.UNAUTHENTICATED
    svc.credentials.revoke("node-a")                  # a revoked credential: the port stops answering it
    wait_for(_refused(route_a, main_a, grpc.StatusCode.UNAUTHENTICATED), "the revoked credential refused", timeout=10)


def test_the_port_serves_the_schedulers_status_page_to_an_admin_and_refuses_other_views(cluster):
    """The default page as the scheduler read it (at most STATUS_EVERY old), as bytes through the port's server;
    another page size, or a user's own (redacted) view, is the scheduler's port's to answer: said, not served."""
    svc, main, address = cluster
    _register(main, address)
    svc.state.submit([JobSpec("ResNet-18 (batch size 64)", 100, size="tiny")])
    port = _stub(svc.front.port, svc.secret)

    def shows_both() -> bool:
        try:
            page = port.GetStatus(pb.StatusRequest())
        except grpc.RpcError as exc:     # UNAVAILABLE until the scheduler sent its first page
            assert exc.code() == grpc.StatusCode.UNAVAILABLE
            return False
        return [w.worker_id for w in page.workers] == ["w1"] and len(page.jobs) == 1

    wait_for(shows_both, "the port's page shows the worker and the job", timeout=10)
    page, own = port.GetStatus(pb.StatusRequest()), main.GetStatus(pb.StatusRequest())
    assert (page.policy, list(page.worker_types), page.jobs[0].job_id) == \
        (own.policy, list(own.worker_types), own.jobs[0].job_id)
    assert page.jobs[0].spec.job_type == "ResNet-18 (batch size 64)"     # an admin's view: nothing redacted
    assert port.GetStatus(pb.StatusRequest(job_limit=100)).jobs[0].job_id == page.jobs[0].job_id   # the CLI's
    with pytest.raises(grpc.RpcError) as err:
        port.GetStatus(pb.StatusRequest(job_limit=5))
    assert err.value.code() == grpc.StatusCode.FAILED_PRECONDITION and "page size" in err.value.details()
    _, user_token = svc.credentials.add("alice", role="user")
    as_user = _stub(svc.front.port, user_token)

    def refused_as_a_view() -> bool:     # UNAUTHENTICATED until the port's copy has the new credential
        try:
            as_user.GetStatus(pb.StatusRequest())
        except grpc.RpcError as exc:
            return exc.code() == grpc.StatusCode.FAILED_PRECONDITION and "your view" in exc.details()
        return False

    wait_for(refused_as_a_view, "a user's status refused by the port", timeout=10)
    assert len(_stub(svc.port, user_token).GetStatus(pb.StatusRequest()).workers) == 1   # the scheduler answers it
    from prometheus_client import generate_latest

    def counted() -> bool:               # at least the pages compared above and the CLI's page size (not refusals)
        pages = svc.front.pages
        return pages >= 3 and f"gavel_heartbeat_port_status_pages_total {float(pages)}" in \
            generate_latest(svc.metrics.registry).decode()

    wait_for(counted, "the port's pages served, in the scheduler's metrics", timeout=10)


def test_gavel_ng_status_reads_the_page_from_the_heartbeat_port(cluster, tmp_path, capsys):
    from gavel_ng.cli import main

    svc, main_stub, address = cluster
    _register(main_stub, address)
    (tmp_path / "token").write_text(svc.secret)
    argv = ["status", "--scheduler", f"127.0.0.1:{svc.front.port}", "--token-file", str(tmp_path / "token"), "--json"]

    def lists_the_worker() -> bool:         # exit 2 ("no status page ... yet") until the first page came
        capsys.readouterr()
        return main(argv) == 0 and '"worker_id": "w1"' in capsys.readouterr().out

    wait_for(lists_the_worker, "gavel-ng status through the heartbeat port", timeout=10)


def test_a_killed_port_process_is_replaced_and_heartbeats_go_to_the_scheduler_meanwhile(cluster):
    svc, main, address = cluster
    reply = _register(main, address)
    route = _route(svc, reply)
    _answered(route, main, _beat())
    old = svc.front._proc.pid
    os.kill(old, signal.SIGKILL)
    wait_for(lambda: svc.front.restarts == 1 and svc.front.alive, "a new port process", timeout=30)
    assert svc.front._proc.pid != old and svc.front.port == reply.heartbeat_port
    route.send(main, _beat())          # answered by one port or the other, never an error for the worker
    _answered(route, main, _beat(), route.answered + 1)


def test_a_stopped_port_process_costs_one_timeout_then_heartbeats_go_to_the_scheduler(cluster):
    svc, main, address = cluster
    route = _route(svc, _register(main, address))
    _answered(route, main, _beat())
    pid = svc.front._proc.pid
    os.kill(pid, signal.SIGSTOP)
    try:
        wait_for(lambda: _stopped(pid), "the port's process stopped", timeout=10)
        route.skip_until, failed, answered = 0.0, route.failed, route.answered   # a slow call before: tried again
        start = time.monotonic()
        route.send(main, _beat())                  # the port times out; the scheduler answers
        first = time.monotonic() - start
        assert route.failed == failed + 1 and first >= heartbeat_route.PORT_TIMEOUT * 0.9
        route.send(main, _beat())                  # the port is left alone now: straight to the scheduler
        assert route.failed == failed + 1 and route.answered == answered
    finally:
        os.kill(pid, signal.SIGCONT)
    assert svc.state.workers["w1"].alive


def _stopped(pid: int) -> bool:
    """Whether the process is stopped (a signal reaches another process asynchronously)."""
    with open(f"/proc/{pid}/stat") as f:
        return f.read().rsplit(")", 1)[1].split()[0] == "T"


def test_quick_answer_leaves_to_the_scheduler_what_a_copy_cannot_know():
    row = WorkerRow(True, False, "t", ((3, 1, 100.0, False), (5, 2, 200.0, True)))
    answer = quick_answer(row, [(3, 1), (5, 2)], now=90.0)
    assert answer.kills == [] and answer.leases == [(AttemptRef(3, 1), 10.0)]     # reported: no lease
    assert quick_answer(row, [(3, 1)], now=90.0) is not None                    # not yet started there: fine
    assert quick_answer(row, [(3, 2)], now=90.0) is None                        # another attempt
    assert quick_answer(row, [(4, 1)], now=90.0) is None                        # unknown to the copy
    assert quick_answer(row, [], now=101.0).leases == [(AttemptRef(3, 1), -1.0)]  # ended: the worker's grace
    assert quick_answer(WorkerRow(False, False, "t", ()), [], now=0.0) is None   # dead
    assert quick_answer(WorkerRow(True, True, "t", ()), [], now=0.0) is None     # a fence waits for it


def test_heartbeat_port_in_the_config_is_checked():
    from gavel_ng.errors import InputError

    for bad in (-1, 70000, "x", 1.5):
        with pytest.raises(InputError, match="heartbeat_port"):
            ClusterConfig(heartbeat_port=bad).check()
    ClusterConfig(heartbeat_port=0).check()


def test_a_copy_the_scheduler_stopped_updating_answers_nothing():
    from gavel_ng.runtime.front import MAX_AGE, Copy, FrontServicer

    copy = Copy("secret")
    copy.apply((time.monotonic(), {"w1": WorkerRow(True, False, "", ())}, {}, {}))
    port = FrontServicer(copy)
    assert not port.Heartbeat(_beat(), None).ask_scheduler
    copy.read_at -= MAX_AGE + 1           # the scheduler stopped, or starved: its copy is not trusted
    assert port.Heartbeat(_beat(), None).ask_scheduler
    copy.apply((time.monotonic(), {"w1": None}, None, None))      # a worker gone from the state
    assert port.Heartbeat(_beat(), None).ask_scheduler


def test_a_status_page_the_scheduler_stopped_sending_is_not_served():
    from gavel_ng.runtime.front import STATUS_MAX_AGE, Copy, FrontServicer

    class Context:
        def abort(self, code, details):
            raise grpc.RpcError(code, details)

    port = FrontServicer(Copy("secret"))
    with pytest.raises(grpc.RpcError) as err:                           # none yet
        port.GetStatus(pb.StatusRequest(), Context())
    assert err.value.args[0] == grpc.StatusCode.UNAVAILABLE
    page = pb.StatusReply(policy="las").SerializeToString()
    port.copy.page = (time.monotonic(), page)
    assert port.GetStatus(pb.StatusRequest(), Context()) == page
    port.copy.page = (time.monotonic() - STATUS_MAX_AGE - 1, page)    # the scheduler stopped, or starved
    with pytest.raises(grpc.RpcError) as err:
        port.GetStatus(pb.StatusRequest(), Context())
    assert err.value.args[0] == grpc.StatusCode.UNAVAILABLE and "own port" in err.value.args[1]


def test_the_copy_is_sent_what_changed_and_every_row_again_now_and_then(make_service, monkeypatch):
    """HeartbeatFront._update against a real state (no process): all rows first, then only the rows the state's
    mark says may have changed, and every row again after FULL_EVERY (what the mark does not track)."""
    from gavel_ng.runtime import front
    from gavel_ng.runtime.front import HeartbeatFront
    from gavel_ng.runtime.state import Registration

    svc = make_service(worker_types=("v100",))
    st = svc.state
    port = HeartbeatFront(st, svc.credentials, svc.access, Security(svc.secret), "127.0.0.1", 0)
    for wid in ("w1", "w2"):
        st.register(Registration(wid, f"{wid}:1", "v100", 4, []), lambda a: (None, None))
    _, rows, owners, principals = port._update()
    assert set(rows) == {"w1", "w2"} and owners == {} and principals == {}
    assert port._update()[1:] == ({}, None, None)                     # nothing changed: nothing sent
    st.register(Registration("w3", "w3:1", "v100", 4, []), lambda a: (None, None))
    assert set(port._update()[1]) == {"w3"}
    svc.credentials.add("node-a", role="worker")
    assert len(port._update()[3]) == 1                                # a new credential is sent
    st.worker_lost(st.workers["w2"], "test")
    assert port._update()[1] == {"w2": WorkerRow(False, False, "", ())}
    st.workers["w1"].call_token = "changed behind the mark's back"
    assert port._update()[1] == {}
    monkeypatch.setattr(front, "FULL_EVERY", 0.0)
    assert port._update()[1] == {"w1": WorkerRow(True, False, "changed behind the mark's back", ())}


def test_a_heartbeat_port_that_cannot_be_listened_on_is_a_clear_error(tmp_path):
    import socket

    from gavel_ng.errors import InputError

    taken = socket.socket()
    taken.bind(("127.0.0.1", 0))
    taken.listen()
    port = taken.getsockname()[1]
    svc = SchedulerService(ClusterConfig(heartbeat_port=port), tmp_path / "state", port=0, bind="127.0.0.1")
    try:
        with pytest.raises(InputError, match=f"heartbeat_port={port}.*cannot serve on 127.0.0.1:{port}"):
            svc.start()
    finally:
        svc.stop(grace=0.1)
        taken.close()
