"""A cluster two users share, on loopback with real processes: alice and bob hold credentials of their own,
the worker a worker credential, and jobs run as their users' Unix accounts (the worker runs as root).

One cluster start-up for the issue's checks: bob cannot cancel alice's job (PERMISSION_DENIED naming the
owner and the job), nor submit as alice or into an entity not granted to him; bob's job runs as bob and can
find no credential of the scheduler or the worker, cannot read alice's job's environment nor write its
checkpoints; the worker credential cannot submit, and a report of steps beyond what the job reported is
refused; a revoked user is refused at once; the audit lists every submit and cancel with its actor.
Needs root (it makes the accounts gv-alice and gv-bob with useradd); skipped otherwise, saying why.
"""

from __future__ import annotations

import csv
import io
import json
import os
import pwd
import queue
import shutil
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

import grpc
import pytest
from loopback_cluster import ENV, LocalCluster, wait_for

from gavel_ng.protocol.client import SchedulerClient, SchedulerError
from gavel_ng.protocol.protos import gavel_pb2 as pb
from gavel_ng.protocol.rpc import SCHEDULER, Security, Stub, make_server, open_channel, token_authenticator

pytestmark = pytest.mark.slow
USERS = ("gv-alice", "gv-bob")

# runs as bob: looks for every credential of the scheduler and the worker, alice's job's secret, her checkpoints
HOSTILE = r'''
import glob, json, os, sys
from pathlib import Path
out, victim_dir, cluster = sys.argv[1], Path(sys.argv[2]), sys.argv[3]

def read(path):
    try:
        with open(path, "rb") as f:
            return f.read(1 << 16)
    except OSError:
        return None

paths, found = set(), []
ckpt = Path(os.environ["GAVEL_NG_CHECKPOINT_DIR"])
paths |= {str(ckpt.parent.parent / "token"), str(ckpt.parent.parent / "gavel.sqlite")}
for cmd in glob.glob("/proc/[0-9]*/cmdline"):
    argv = (read(cmd) or b"").decode(errors="replace").split("\0")
    for flag in ("--token-file", "--state"):
        if flag in argv and argv.index(flag) + 1 < len(argv):
            value = argv[argv.index(flag) + 1]
            paths |= {value} if flag == "--token-file" else {value + "/token", value + "/gavel.sqlite"}
secret = False
for env in glob.glob("/proc/[0-9]*/environ"):
    data = read(env) or b""
    if b"GAVEL_NG_TOKEN=" in data:
        found.append(env)
    secret = secret or b"SECRET_ALICE=" in data
found += [p for p in sorted(paths) if p.startswith(cluster) and read(p)]   # this cluster's (others may run here)
try:
    (victim_dir / "ckpt-000000900000-a1").mkdir()
    planted = True
except OSError:
    planted = False
Path(out).write_text(json.dumps({"uid": os.getuid(), "found": found, "secret": secret, "planted": planted,
                                 "inherited": sorted(k for k in os.environ if k in ("AWS_SECRET_ACCESS_KEY",
                                                                                    "GAVEL_NG_TOKEN"))}))
'''

# alice's job: a standby interpreter takes its environment after it started, so it starts a process that has
# the job's environment (SECRET_ALICE) in its own /proc/PID/environ from the start, as a job's tools do
VICTIM = "import subprocess, sys\nopen(sys.argv[1], 'w').close()\nsubprocess.run(['sleep', '600'])\n"


@pytest.fixture(scope="module")
def accounts():
    """gv-alice and gv-bob as Unix accounts (made here, removed after)."""
    if os.geteuid() != 0:
        pytest.skip("needs root: jobs run as their users' accounts only where the worker runs as root")
    if shutil.which("useradd") is None:
        pytest.skip("needs useradd to make the users' accounts")
    made = []
    for u in USERS:
        try:
            pwd.getpwnam(u)
        except KeyError:
            subprocess.run(["useradd", "--no-create-home", "--shell", "/usr/sbin/nologin", u], check=True,
                           capture_output=True)
            made.append(u)
    yield {u: pwd.getpwnam(u).pw_uid for u in USERS}
    for u in made:
        subprocess.run(["userdel", u], capture_output=True)


class _Rogue:
    """A worker service that runs nothing: it tells the test what it was asked to run."""

    def __init__(self, placed: queue.Queue):
        self.placed = placed

    def RunJob(self, req, context):
        self.placed.put(req)
        return pb.Empty()

    def KillJob(self, req, context):
        return pb.Empty()


def _stub(cl, token: str) -> Stub:
    return Stub(open_channel(f"127.0.0.1:{cl.port}", None), "Scheduler", token, timeout=20)


def _code(call) -> tuple[str, str]:
    try:
        call()
    except grpc.RpcError as exc:
        return exc.code().name, exc.details()
    return "OK", ""


def test_users_jobs_and_workers_hold_only_their_own(accounts):
    root = Path(tempfile.mkdtemp(prefix="gavel-users-"))   # not under pytest's 0700 tmp: jobs run as other users
    root.chmod(0o755)
    scripts, out = root / "scripts", root / "out"
    scripts.mkdir(mode=0o755)
    out.mkdir()
    out.chmod(0o1777)
    (scripts / "hostile.py").write_text(HOSTILE)
    (scripts / "victim.py").write_text(VICTIM)
    # a lease of 3 + 30 s: a job that a standby interpreter still importing torch takes up (a loaded machine) is
    # not stopped before it starts (as the users' accounts cannot read this interpreter, jobs run in standbys)
    cl = LocalCluster(root, grace_seconds=30.0, entities={"nlp": {"weight": 1}, "vision": {"weight": 1}})
    try:
        cl.start_scheduler()
        add = subprocess.run([sys.executable, "-m", "gavel_ng", "user", "add", "gv-alice", "--entity", "nlp",
                              "--scheduler", f"127.0.0.1:{cl.port}", "--token-file", str(cl.state / "token")],
                             capture_output=True, text=True, env=ENV, timeout=60)
        assert add.returncode == 0, add.stderr
        alice = add.stdout.strip()
        with cl.client() as admin:
            _, bob = admin.add_user("gv-bob", entities=["nlp"])
            _, node = admin.add_user("node", role="worker")
        creds = root / "creds"
        creds.mkdir(mode=0o700)
        (creds / "worker").write_text(node + "\n")
        (creds / "worker").chmod(0o600)
        cl.start_worker("w-v100", "v100", 2, token_file=creds / "worker")
        cl.wait_workers(1)
        a, b, w = _stub(cl, alice), _stub(cl, bob), _stub(cl, node)
        on_v100 = json.dumps({"allowed_types": ["v100"]})
        started = out / "victim.started"
        [victim] = a.SubmitJobs(pb.SubmitJobsRequest(jobs=[pb.JobSpec(
            job_type="ResNet-18 (batch size 32)", steps=1000, name="victim", rules=on_v100,
            command=[sys.executable, str(scripts / "victim.py"), str(started)],
            env={"SECRET_ALICE": "alice-secret"})])).job_ids

        # a job file claiming another user, or an entity not granted, is refused; the user is filled in otherwise
        for rules, words in ((json.dumps({"user": "gv-alice"}), "jobs[0].user: 'gv-alice' is not you (gv-bob)"),
                             (json.dumps({"entity": "vision"}), "jobs[0].entity: 'vision' is not granted to gv-bob")):
            code, details = _code(lambda r=rules: b.SubmitJobs(pb.SubmitJobsRequest(jobs=[pb.JobSpec(
                job_type="ResNet-18 (batch size 32)", steps=10, rules=r)])))
            assert code == "PERMISSION_DENIED" and words in details, (code, details)
        wait_for(started.exists, 60, "alice's job never started")

        # bob's job, as bob: no credential, no secret of alice's job, no write into her checkpoints
        victim_dir = cl.job_dir(victim)
        result = out / "hostile.json"
        [hostile] = b.SubmitJobs(pb.SubmitJobsRequest(jobs=[pb.JobSpec(
            job_type="ResNet-18 (batch size 32)", steps=10, name="hostile", rules=on_v100,
            command=[sys.executable, str(scripts / "hostile.py"), str(result), str(victim_dir),
                     str(root)])])).job_ids
        got = json.loads(wait_for(lambda: result.exists() and result.read_text(), 240, "bob's job never ran"))
        assert got == {"uid": accounts["gv-bob"], "found": [], "secret": False, "planted": False, "inherited": []}
        assert victim_dir.stat().st_uid == accounts["gv-alice"] and victim_dir.stat().st_mode & 0o777 == 0o700

        # bob's cancel of alice's job names its owner and the job
        code, details = _code(lambda: b.CancelJob(pb.CancelJobRequest(job_id=victim)))
        assert code == "PERMISSION_DENIED" and f"job {victim} belongs to gv-alice" in details, (code, details)
        shown = b.ListJobs(pb.ListJobsRequest(job_ids=[victim])).jobs[0]
        assert shown.spec.name == "victim" and not shown.spec.env and not shown.spec.command   # no secrets

        # the worker credential: no submission; it speaks only as the daemon that registered a worker, and a
        # daemon of its own (a rogue) is believed no further than the job's own reports
        code, _ = _code(lambda: w.SubmitJobs(pb.SubmitJobsRequest(jobs=[pb.JobSpec(job_type="x", steps=1)])))
        assert code == "PERMISSION_DENIED"
        [worker] = [x for x in a.GetStatus(pb.StatusRequest()).workers if x.alive]
        code, details = _code(lambda: w.ReportDone(pb.DoneReport(worker_id=worker.worker_id, job_id=victim, attempt=1,
                                                                 done=True, steps=1000, steps_run=1000,
                                                                 reason="exited")))
        assert code == "PERMISSION_DENIED" and "not the daemon that registered" in details, (code, details)
        placed = queue.Queue()
        rogue, rport = make_server("127.0.0.1", 0, {"Worker": _Rogue(placed)}, Security("rogue"),
                                   authenticate=token_authenticator("rogue", SCHEDULER))
        beating = threading.Event()

        def beat():                               # alive as long as the test needs it
            while not beating.wait(0.2):
                _code(lambda: w.Heartbeat(pb.HeartbeatRequest(worker_id="rogue", call_token="rogue")))

        try:
            w.RegisterWorker(pb.RegisterWorkerRequest(worker_id="rogue", address=f"127.0.0.1:{rport}",
                                                      gpu_type="k80", gpus=1, call_token="rogue"))
            threading.Thread(target=beat, daemon=True).start()
            [mine] = a.SubmitJobs(pb.SubmitJobsRequest(jobs=[pb.JobSpec(
                job_type="ResNet-18 (batch size 32)", steps=1000, rules=json.dumps({"allowed_types": ["k80"]}))]
            )).job_ids
            run = placed.get(timeout=60)
            assert run.job_id == mine
            code, details = _code(lambda: w.ReportDone(pb.DoneReport(
                worker_id="rogue", call_token="rogue", job_id=mine, attempt=run.attempt, done=True, steps=1000,
                steps_run=1000, reason="exited")))
            assert code == "INVALID_ARGUMENT" and details.startswith("steps=1000"), (code, details)
            assert a.ListJobs(pb.ListJobsRequest(job_ids=[mine])).jobs[0].status == "running"
        finally:
            beating.set()
            rogue.stop(0)
        assert b.ListJobs(pb.ListJobsRequest(job_ids=[victim])).jobs[0].status == "running"

        # revoked: refused at the next call
        with cl.client() as admin:
            admin.revoke("gv-bob")
        assert _code(lambda: b.ListJobs(pb.ListJobsRequest()))[0] == "UNAUTHENTICATED"
        with SchedulerClient(f"127.0.0.1:{cl.port}", token=alice) as c:
            assert c.cancel(victim) == "cancelled"
            with pytest.raises(SchedulerError) as err:
                c.users()                         # credentials are the admin's business
            assert err.value.code == "PERMISSION_DENIED"
        with cl.client() as admin:
            admin.cancel(hostile)

        # the audit: every submit and cancel with its actor
        audit = subprocess.run([sys.executable, "-m", "gavel_ng", "report", "--state", str(cl.state), "--audit",
                                "--format", "csv"], capture_output=True, text=True, env=ENV, timeout=60)
        assert audit.returncode == 0, audit.stderr
        rows = [(r["action"], r["job_id"], r["actor"]) for r in csv.DictReader(io.StringIO(audit.stdout))]
        assert ("submit", str(victim), "user:gv-alice") in rows and ("submit", str(hostile), "user:gv-bob") in rows
        assert ("cancelled", str(victim), "user:gv-alice") in rows and ("cancelled", str(hostile), "admin") in rows
        assert ("user_revoke", "", "admin") in rows and ("worker_up", "", "worker:node") in rows
        assert all(actor for _, _, actor in rows)
        shutil.rmtree(root, ignore_errors=True)           # kept when the test failed, with every process's log
    finally:
        cl.close()
