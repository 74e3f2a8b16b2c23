"""`gavel-ng status --state DIR`: the scheduler's view read from its SQLite state, with no scheduler
(stopped, or running alongside), the same formatter as the live view, one-line errors naming --state."""

from __future__ import annotations

import json
import re
import sqlite3
import subprocess
import sys
import time

import pytest

from gavel_ng.cli import main
from gavel_ng.cli.status_cmd import format_status
from gavel_ng.protocol.client import ClusterStatus, SchedulerClient
from gavel_ng.protocol.jobspec import JobSpec
from gavel_ng.protocol.protos import gavel_pb2 as pb
from gavel_ng.runtime.config import ClusterConfig
from gavel_ng.runtime.records import StateReader
from gavel_ng.runtime.service import SchedulerService
from gavel_ng.runtime.status import read_state_dir
from gavel_ng.runtime.store import Store

JOBS = [JobSpec("ResNet-18 (batch size 32)", steps=1000, size="tiny", name="r18"),
        JobSpec("LM (batch size 20)", steps=500, size="tiny", name="lm"),
        JobSpec("ResNet-18 (batch size 16)", steps=300, size="tiny", scale_factor=2, name="wide")]


def make_state(state_dir) -> SchedulerService:
    """A scheduler's state as a few rounds leave it: workers, jobs (one running, one done), an
    attempt, a measured throughput, an allocation and a round number. The service is not started."""
    svc = SchedulerService(ClusterConfig(round_seconds=2.0, policy="fifo"), state_dir, port=0,
                           bind="127.0.0.1")
    st = svc.state
    for wid, gpu_type, gpus in (("w-v100", "v100", 2), ("w-k80", "k80", 1)):
        st.register(pb.RegisterWorkerRequest(worker_id=wid, address=f"10.0.0.1:{gpus}", gpu_type=gpu_type,
                                             gpus=gpus), lambda address: (None, None))
    ids = st.submit(JOBS)
    svc.planner.arrive(ids)
    svc.planner.plan(time.time())                  # the first solve: the allocation status shows
    store = svc.store
    store.add_attempt(ids[0], 1, [("w-v100", 1)], "v100", time.time(), 0)
    store.update_job(ids[0], status="running", attempts=1, steps_done=400)
    store.update_job(ids[1], status="done", attempts=2, steps_done=500, finished=time.time())
    store.save_throughput("ResNet-18 (batch size 32)", 1, "v100", True, 12.5, 3)
    store.set_meta("round", 7)
    store.set_meta("launches", 3)
    return svc


@pytest.fixture
def state(tmp_path):
    svc = make_state(tmp_path / "state")
    yield tmp_path / "state", svc
    svc.stop(grace=0.1)


def test_offline_view_of_a_stopped_scheduler(state, capsys):
    state_dir, svc = state
    alloc_rows = svc.state.allocation[0]
    svc.stop(grace=0.1)
    assert main(["status", "--state", str(state_dir), "--all"]) == 0
    out = capsys.readouterr().out
    assert f"state read from {state_dir}" in out and "round 7" in out and "policy fifo" in out
    assert "w-v100" in out and "w-k80" in out
    r18 = next(line for line in out.splitlines() if "[r18]" in line)
    assert "running" in r18 and "400/1000" in r18 and "v100 w-v100:1" in r18
    lm = next(line for line in out.splitlines() if "[lm]" in line)
    assert "done" in lm and " 2  " in lm               # attempts
    assert "allocation" in out and "12.50" in out

    assert main(["status", "--state", str(state_dir), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["source"] == str(state_dir) and data["round"] == 7 and data["round_ends_in"] is None
    assert data["policy"] == "fifo" and data["worker_types"] == ["v100", "p100", "k80"]
    assert [tuple(r) for r, _ in data["allocation"]] == [r for r in alloc_rows if 2 not in r]   # lm is done
    assert data["throughputs"] == {"ResNet-18 (batch size 32)|1|v100": 12.5}
    w = {x["worker_id"]: x for x in data["workers"]}
    assert w["w-v100"]["running_jobs"] == [1] and w["w-k80"]["gpus"] == 1
    assert [j["attempts"] for j in data["jobs"]] == [1, 2, 0]


def test_reads_while_the_scheduler_writes(state):
    state_dir, svc = state
    with StateReader(state_dir) as rd:
        with rd.snapshot():
            before = rd.get_meta("round")
            svc.store.set_meta("round", 8)              # the writer is not blocked by the reader
            assert rd.get_meta("round") == before       # one consistent snapshot
        assert rd.get_meta("round") == "8"
    svc.store.set_meta("round", 9)                      # nothing left held once read
    assert read_state_dir(state_dir).round == 9


def test_live_and_offline_views_share_the_formatter(state):
    """The same state seen by a scheduler restarted on it (its GetStatus reply, before its loop
    re-solves) and read from the directory: the job and allocation sections print the same."""
    state_dir, svc = state
    svc.stop(grace=0.1)
    restarted = SchedulerService(ClusterConfig(round_seconds=2.0, policy="fifo"), state_dir, port=0,
                                 bind="127.0.0.1")
    try:
        online = ClusterStatus.from_proto(restarted.status())
        offline = read_state_dir(state_dir, now=online.now)     # the same instant: waited/elapsed alike
    finally:
        restarted.stop(grace=0.1)
    assert online.live and not offline.live and online.allocation

    def section(text: str, title: str) -> list[str]:
        lines = text.splitlines()
        start = next(i for i, line in enumerate(lines) if line.startswith(title))
        return lines[start: next((i for i in range(start + 1, len(lines)) if not lines[i]), len(lines))]

    a, b = format_status(online, show_all=True), format_status(offline, show_all=True)
    assert section(a, "jobs") == section(b, "jobs")
    assert section(a, "allocation") == section(b, "allocation")
    assert a.startswith("policy fifo, round 7 (2s, starting: no round planned yet)")


def test_a_round_policy_shows_its_decision_live_and_offline(tmp_path):
    """A round policy has no allocation: status shows the round's decision (job -> type x GPUs), the
    same from the scheduler and from its state directory; a cancelled job leaves it at once."""
    svc = SchedulerService(ClusterConfig(round_seconds=2.0, policy="tiresias", worker_types=["v100", "k80"]),
                           tmp_path / "state", port=0, bind="127.0.0.1")
    try:
        for wid, gpu_type, gpus in (("w-v100", "v100", 2), ("w-k80", "k80", 1)):
            svc.state.register(pb.RegisterWorkerRequest(worker_id=wid, address=f"10.0.0.1:{gpus}",
                                                        gpu_type=gpu_type, gpus=gpus), lambda address: (None, None))
        ids = svc.state.submit(JOBS)
        svc.planner.arrive(ids)
        svc.planner.plan(time.time())
        online = ClusterStatus.from_proto(svc.status())
        offline = read_state_dir(tmp_path / "state")
        svc.state.cancel(ids[0])
        after = ClusterStatus.from_proto(svc.status())
    finally:
        svc.stop(grace=0.1)
    assert online.allocation == [] and sorted(online.decision) == sorted(offline.decision)
    assert {m for m, _, _ in online.decision} == set(ids[:2]) and dict((m, k) for m, _, k in online.decision) == \
        {ids[0]: 1, ids[1]: 1}                          # wide (2 GPUs) waits: 3 GPUs, two of one type
    assert ids[0] not in {m for m, _, _ in after.decision}
    text = format_status(online)
    assert "this round's decision (tiresias decides every round" in text
    assert all(re.search(rf"^\s+{m}\s+{w}\s+{k}$", text, re.M) for m, w, k in online.decision), text
    assert format_status(offline).split("this round's decision")[1] == text.split("this round's decision")[1]


def test_status_over_grpc(state, capsys):
    state_dir, svc = state
    svc.stop(grace=0.1)
    live = SchedulerService(ClusterConfig(round_seconds=2.0), state_dir, port=0, bind="127.0.0.1")
    live.start()
    try:
        with SchedulerClient(f"127.0.0.1:{live.port}", token=live.secret) as c:
            assert c.status().live
        token = state_dir / "token"
        assert main(["status", "--scheduler", f"127.0.0.1:{live.port}", "--token-file", str(token)]) == 0
    finally:
        live.stop(grace=0.1)
    out = capsys.readouterr().out
    assert out.startswith("policy las, round") and "[r18]" in out


@pytest.mark.parametrize("what", ["missing", "file", "empty", "garbage", "foreign"])
def test_errors_name_the_flag_and_exit_2(tmp_path, capsys, what):
    target = tmp_path / "s"
    if what == "file":
        target.write_text("x")
    elif what != "missing":
        target.mkdir()
    if what == "garbage":
        (target / "gavel.sqlite").write_bytes(b"not a database" * 100)
    if what == "foreign":
        db = sqlite3.connect(target / "gavel.sqlite")
        db.execute("CREATE TABLE t (x)")
        db.close()
    assert main(["status", "--state", str(target)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"gavel-ng status: error: --state='{target}': ") and err.count("\n") == 1, err
    if what == "empty":
        assert list(target.iterdir()) == []            # read-only: nothing created


def test_cli_process_prints_one_line_and_no_traceback(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "gavel_ng", "status", "--state", str(tmp_path / "nope")],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2 and "--state" in proc.stderr and "Traceback" not in proc.stderr
    assert proc.stderr.strip() == f"gavel-ng status: error: --state='{tmp_path / 'nope'}': no such directory"


def test_a_store_written_state_dir_reads_back(tmp_path):
    """A state directory with only what a fresh scheduler writes still prints."""
    Store(tmp_path).close()
    st = read_state_dir(tmp_path)
    assert st.jobs == [] and st.workers == [] and st.policy == "?" and st.round == 0
    assert "jobs (0 submitted, 0 done)" in format_status(st)
