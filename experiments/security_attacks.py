"""Attacks on a loopback cluster by two users, a hostile job and a rogue worker (issue 43); prints what each achieved.

    sudo python experiments/security_attacks.py [--json OUT.json]

Real processes: a scheduler, two worker daemons (v100 x2, p100 x1) and training jobs, on loopback. The
same script runs against the code before and after per-user credentials: where `gavel-ng user` exists,
alice, bob and the workers get their own credentials (alice and bob are Unix accounts, `gv-alice` and
`gv-bob`, made with useradd when run as root and removed at the end); before it, everyone holds the
cluster token, as every user of such a cluster must. Each line of the table is one attack, what it
got, and whether that is what a multi-user cluster must allow ("safe"). Figures, not assertions:
docs/deploy.md ("Security") quotes them.
"""

from __future__ import annotations

import argparse
import json
import os
import pwd
import re
import shutil
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import grpc

from gavel_ng.protocol.protos import gavel_pb2 as pb
from gavel_ng.protocol.rpc import Stub, open_channel

R18 = "ResNet-18 (batch size 32)"
USERS = ("gv-alice", "gv-bob")
ENV = {**os.environ, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "PYTHONUNBUFFERED": "1",
       "AWS_SECRET_ACCESS_KEY": "planted-cloud-credential"}     # what a worker's environment may hold

# the hostile job: looks for credentials, other jobs' secrets, their checkpoints and the state
HOSTILE = r'''
import glob, json, os, shutil, sys, time
from pathlib import Path
import grpc
from gavel_ng.protocol.protos import gavel_pb2 as pb
from gavel_ng.protocol.rpc import Stub, open_channel

out, victim, decoy, worker = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
env = os.environ
res = {"uid": os.getuid(), "foreign_env": sorted(k for k in env if k in ("AWS_SECRET_ACCESS_KEY", "GAVEL_NG_TOKEN"))}
ckpt = Path(env["GAVEL_NG_CHECKPOINT_DIR"])

def read(path):
    try:
        with open(path, "rb") as f:
            return f.read(1 << 20)
    except OSError as exc:
        return None

found, paths = {}, set()
for p in [ckpt.parent.parent / "token", ckpt.parent / "token"]:
    paths.add(str(p))
states = set()
for cmd in glob.glob("/proc/[0-9]*/cmdline"):
    argv = (read(cmd) or b"").decode(errors="replace").split("\0")
    for flag, into in (("--token-file", paths), ("--state", states)):
        if flag in argv and argv.index(flag) + 1 < len(argv):
            into.add(argv[argv.index(flag) + 1])
secret_seen = []
for _ in range(3):                  # alice's sleeper restarts at each lease end: look more than once
    for e in glob.glob("/proc/[0-9]*/environ"):
        data = read(e)
        if not data:
            continue
        for item in data.split(b"\0"):
            if item.startswith(b"GAVEL_NG_TOKEN="):
                found[e] = item.split(b"=", 1)[1].decode()
            if item.startswith(b"SECRET_ALICE="):
                secret_seen.append(e)
    time.sleep(0.5)
cluster = str(ckpt.parent.parent.parent)       # this cluster's scratch directory (others may run on the machine)
for p in sorted(x for x in paths if x.startswith(cluster)):
    data = read(p)
    if data:
        found[p] = data.decode(errors="replace").strip()
res["credentials_found"] = sorted(found)
res["other_job_secret_read"] = bool(secret_seen)
codes = {}
for where, token in found.items():
    stub = Stub(open_channel(env["GAVEL_NG_SCHEDULER"], None), "Scheduler", token, timeout=10)
    try:
        codes[where] = stub.CancelJob(pb.CancelJobRequest(job_id=decoy)).status or "OK"
    except grpc.RpcError as exc:
        codes[where] = exc.code().name
res["cancel_with_found_credential"] = codes
for token_name, token in [("job token", env.get("GAVEL_NG_JOB_TOKEN", "")), *[(w, t) for w, t in found.items()]]:
    ws = Stub(open_channel(worker, None), "Worker", token, timeout=10)
    req = pb.RunJobRequest(job_id=999999, attempt=1, gpus=[0], lease_seconds=30,
                           spec=pb.JobSpec(job_type="x", steps=1, command=["touch", out + ".pwned"]),
                           checkpoint_dir=out + ".pwned-ckpt")
    try:
        ws.RunJob(req)
        res.setdefault("runjob", {})[token_name] = "OK"
    except grpc.RpcError as exc:
        res.setdefault("runjob", {})[token_name] = exc.code().name
vdirs = [p for p in ckpt.parent.glob(f"job-{victim}*")
         if p.name == f"job-{victim}" or p.name.startswith(f"job-{victim}-")]
planted = False
for d in vdirs:
    try:
        src = sorted(d.glob("ckpt-*"))
        dst = d / "ckpt-000000090000-a1"
        if src:
            shutil.copytree(src[-1], dst)
        else:
            dst.mkdir()
        (dst / "gavel.json").write_text(json.dumps({"step": 90000, "attempt": 1}))
        planted = True
    except OSError:
        pass
res["victim_checkpoint_dir_found"] = bool(vdirs)
res["planted_checkpoint"] = planted
db = {}
for s in (x for x in states if x.startswith(cluster)):
    p = Path(s) / "gavel.sqlite"
    db["read"] = db.get("read", False) or read(p) is not None
    try:
        with open(p, "ab"):
            db["write"] = True
    except OSError:
        db["write"] = db.get("write", False)
res["state_db"] = db
Path(out).write_text(json.dumps(res))
'''

# a job that reports inflated progress with its own token (within the 1000x plausibility band)
LIAR = r'''
import os, sys, time
from gavel_ng.protocol.protos import gavel_pb2 as pb
from gavel_ng.protocol.rpc import Stub, open_channel
env = os.environ
stub = Stub(open_channel(env["GAVEL_NG_SCHEDULER"], None), "Scheduler", env["GAVEL_NG_JOB_TOKEN"], timeout=10)
job, attempt = int(env["GAVEL_NG_JOB_ID"]), int(env["GAVEL_NG_ATTEMPT"])
stub.InitJob(pb.InitJobRequest(job_id=job, attempt=attempt))
t0, steps = time.monotonic(), 0
while time.monotonic() - t0 < float(sys.argv[1]):
    time.sleep(0.5)
    steps += int(sys.argv[2])
    try:
        stub.UpdateLease(pb.UpdateLeaseRequest(job_id=job, attempt=attempt, steps=steps,
                                               compute_seconds=time.monotonic() - t0))
    except Exception as exc:
        print("refused:", exc)
'''


class Procs:
    def __init__(self, root: Path):
        self.root, self.procs, self.n = root, [], 0

    def spawn(self, args: list[str], name: str, env: dict | None = None) -> tuple[subprocess.Popen, Path]:
        self.n += 1
        log = self.root / f"{self.n:02d}-{name}.log"
        with open(log, "ab") as out:
            p = subprocess.Popen([sys.executable, "-m", "gavel_ng", "-v", *args], stdout=out, stderr=subprocess.STDOUT,
                                 env=env or ENV, cwd=self.root, start_new_session=True)
        self.procs.append(p)
        return p, log

    def stop(self, p: subprocess.Popen) -> None:
        if p.poll() is None:
            os.killpg(p.pid, signal.SIGTERM)
            try:
                p.wait(10)
            except subprocess.TimeoutExpired:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait(5)

    def close(self) -> None:
        for p in reversed(self.procs):
            self.stop(p)


def port_of(p: subprocess.Popen, log: Path, timeout: float = 60.0) -> int | None:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        m = re.search(r"^(?:scheduler|worker \S+) listening on \S+:(\d+)$", log.read_text(), re.M)
        if m:
            return int(m[1])
        if p.poll() is not None:
            return None
        time.sleep(0.05)
    return None


def code(call) -> str:
    try:
        r = call()
        return "OK" + (f" ({r.status})" if hasattr(r, "status") and r.status else "")
    except grpc.RpcError as exc:
        return f"{exc.code().name}: {exc.details()}"


def wait_for(pred, timeout: float, poll: float = 0.2):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        v = pred()
        if v:
            return v
        time.sleep(poll)
    return None


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json", metavar="OUT.json", help="also write the table as JSON")
    ap.add_argument("--keep", action="store_true", help="keep the scratch directory")
    args = ap.parse_args()
    root = Path(tempfile.mkdtemp(prefix="gavel-attacks-"))
    root.chmod(0o755)
    rows: list[tuple[str, str, bool]] = []
    procs = Procs(root)
    made_users = []
    try:
        run(root, procs, rows, made_users)
    finally:
        procs.close()
        for u in made_users:
            subprocess.run(["userdel", u], capture_output=True)
        if not args.keep:
            shutil.rmtree(root, ignore_errors=True)
    width = max(len(a) for a, _, _ in rows)
    print(f"\n{'attack':<{width}}  safe  outcome")
    for attack, outcome, safe in rows:
        print(f"{attack:<{width}}  {'yes' if safe else 'NO ':<4}  {outcome}")
    if args.json:
        Path(args.json).write_text(json.dumps([{"attack": a, "outcome": o, "safe": s} for a, o, s in rows], indent=1))


def run(root: Path, procs: Procs, rows: list, made_users: list) -> None:
    state, scripts, out = root / "state", root / "scripts", root / "out"
    scripts.mkdir(mode=0o755)
    out.mkdir()
    out.chmod(0o1777)
    (scripts / "hostile.py").write_text(HOSTILE)
    (scripts / "liar.py").write_text(LIAR)
    (scripts / "sleeper.py").write_text("import subprocess\nsubprocess.run(['sleep', '600'])\n")
    config = root / "cluster.json"
    # a lease of 3 + 30 s: a job that a standby interpreter still importing torch takes up (a loaded machine)
    # is not stopped before it starts
    config.write_text(json.dumps({"worker_types": ["v100", "p100", "k80"], "heartbeat_seconds": 0.3,
                                  "round_seconds": 3.0, "grace_seconds": 30.0,
                                  "entities": {"nlp": {"weight": 1}, "vision": {"weight": 1}}}))
    modern = subprocess.run([sys.executable, "-m", "gavel_ng", "user", "--help"], capture_output=True).returncode == 0
    sched, log = procs.spawn(["scheduler", "--cluster-config", str(config), "--state", str(state), "--port", "0",
                              "--bind", "127.0.0.1"], "scheduler")
    port = port_of(sched, log)
    address = f"127.0.0.1:{port}"
    admin = (state / "token").read_text().strip()

    def issue(name: str, *flags: str) -> str:
        if not modern:
            return admin
        r = subprocess.run([sys.executable, "-m", "gavel_ng", "user", "add", name, *flags, "--scheduler", address,
                            "--token-file", str(state / "token")], capture_output=True, text=True, env=ENV)
        assert r.returncode == 0, r.stderr
        return r.stdout.strip().splitlines()[-1]

    if modern and os.geteuid() == 0:
        for u in USERS:
            try:
                pwd.getpwnam(u)
            except KeyError:
                subprocess.run(["useradd", "--no-create-home", "--shell", "/usr/sbin/nologin", u], check=True)
                made_users.append(u)
    alice, bob = issue("gv-alice", "--entity", "nlp"), issue("gv-bob", "--entity", "nlp")
    worker_token = issue("node", "--role", "worker")
    creds = root / "creds"
    creds.mkdir(mode=0o700)
    (creds / "worker-token").write_text(worker_token + "\n")
    (creds / "worker-token").chmod(0o600)
    workers = {}
    for name, gpu_type, gpus in (("w-v100", "v100", 3), ("w-p100", "p100", 1)):
        p, wlog = procs.spawn(["worker", "--scheduler", address, "--gpu-type", gpu_type, "--gpus", str(gpus), "--bind",
                               "127.0.0.1", "--advertise", "127.0.0.1", "--token-file", str(creds / "worker-token")],
                              name)
        workers[name] = (p, port_of(p, wlog))
    client = {who: Stub(open_channel(address, None), "Scheduler", tok, timeout=20)
              for who, tok in (("admin", admin), ("alice", alice), ("bob", bob), ("worker", worker_token))}

    def submit(who: str, *jobs: dict):
        specs = [pb.JobSpec(job_type=j.get("job_type", R18), steps=j["steps"], size=j.get("size", "tiny"),
                            name=j.get("name", ""), command=j.get("command", []), env=j.get("env", {}),
                            rules=json.dumps(j["rules"]) if j.get("rules") else "") for j in jobs]
        return client[who].SubmitJobs(pb.SubmitJobsRequest(jobs=specs))

    def jobs(ids):
        reply = client["admin"].ListJobs(pb.ListJobsRequest(job_ids=ids, include_finished=True))
        return {j.job_id: j for j in reply.jobs}

    wait_for(lambda: len(client["admin"].GetStatus(pb.StatusRequest()).workers) == 2, 60)
    on_v100 = {"allowed_types": ["v100"], "user": "gv-alice", "entity": "nlp"}
    [victim, decoy] = submit("alice", {"steps": 100000, "name": "victim", "env": {"SECRET_ALICE": "alice-secret"},
                                       "rules": on_v100},
                             {"steps": 100000, "name": "decoy", "rules": {**on_v100, "allowed_types": ["k80"]}}).job_ids
    # a job of alice's that starts a process with its environment: a standby interpreter takes its job's
    # environment after it started, but what the job starts has it in its /proc/PID/environ from the start
    submit("alice", {"steps": 100000, "name": "sleeper", "command": [sys.executable, str(scripts / "sleeper.py")],
                     "env": {"SECRET_ALICE": "alice-secret"}, "rules": on_v100})
    wait_for(lambda: jobs([victim])[victim].steps_live > 0, 120)

    # ----- users -----
    r = code(lambda: submit("bob", {"steps": 10, "rules": {"user": "gv-alice", "entity": "nlp"}}))
    rows.append(("bob submits a job file claiming user alice", r, not r.startswith("OK")))
    r = code(lambda: submit("bob", {"steps": 10, "rules": {"user": "gv-bob", "entity": "vision"}}))
    rows.append(("bob submits into entity vision (not granted)", r, not r.startswith("OK")))
    r = code(lambda: client["worker"].SubmitJobs(pb.SubmitJobsRequest(jobs=[pb.JobSpec(job_type=R18, steps=1)])))
    rows.append(("a worker credential submits a job", r, not r.startswith("OK")))
    r = code(lambda: client["bob"].RegisterWorker(pb.RegisterWorkerRequest(worker_id="bobs", address="127.0.0.1:1",
                                                                           gpu_type="v100", gpus=8)))
    rows.append(("bob's credential registers a worker", r, not r.startswith("OK")))
    seen = client["bob"].ListJobs(pb.ListJobsRequest(job_ids=[victim])).jobs
    leaked = bool(seen) and dict(seen[0].spec.env).get("SECRET_ALICE") == "alice-secret"
    rows.append(("bob lists alice's job: its env", "SECRET_ALICE shown" if leaked else "env not shown", not leaked))

    # ----- a hostile job (bob's) -----
    worker_addr = f"127.0.0.1:{workers['w-v100'][1]}"
    result = out / "hostile.json"
    [hostile] = submit("bob", {"steps": 10, "name": "hostile", "rules": {"allowed_types": ["v100"], "user": "gv-bob",
                                                                          "entity": "nlp"},
                               "command": [sys.executable, str(scripts / "hostile.py"), str(result), str(victim),
                                           str(decoy), worker_addr]}).job_ids
    got = wait_for(lambda: result.exists() and json.loads(result.read_text()), 120)

    def short(found: dict) -> dict:          # paths under the scratch directory, relative to it
        return {k.replace(str(root) + "/", ""): v for k, v in found.items()}

    if got:
        rows.append(("job: runs as uid", str(got["uid"]), got["uid"] != 0))
        rows.append(("job: worker env reaches it (cloud credential, token)", ", ".join(got["foreign_env"]) or "none",
                     not got["foreign_env"]))
        named = list(short(dict.fromkeys(got["credentials_found"])))
        rows.append(("job: scheduler/worker credentials it can read", ", ".join(named) or "none",
                     not got["credentials_found"]))
        rows.append(("job: cancels alice's job with a found credential",
                     json.dumps(short(got["cancel_with_found_credential"])) or "none found",
                     all(not v.startswith("OK") and v != "cancelled"
                         for v in got["cancel_with_found_credential"].values())))
        rows.append(("job: reads another job's environment (SECRET_ALICE)", str(got["other_job_secret_read"]),
                     not got["other_job_secret_read"]))
        rows.append(("job: writes a checkpoint into alice's job's directory", str(got["planted_checkpoint"]),
                     not got["planted_checkpoint"]))
        rows.append(("job: reads / writes the scheduler's SQLite state", json.dumps(got["state_db"]),
                     not any(got["state_db"].values())))
        rows.append(("job: RunJob straight to its worker", json.dumps(short(got.get("runjob", {}))),
                     not any(v == "OK" for v in got.get("runjob", {}).values())))
    else:
        rows.append(("hostile job", "never reported", False))
    client["admin"].CancelJob(pb.CancelJobRequest(job_id=hostile))

    # ----- a rogue worker with a worker credential (before: the cluster token) -----
    rogue_id, reports = "rogue1", []
    rogue = Stub(open_channel(address, None), "Scheduler", worker_token, timeout=10)

    class Rogue:
        def RunJob(self, req, context):
            rep = pb.DoneReport(worker_id=rogue_id, job_id=req.job_id, attempt=req.attempt, exit_code=0,
                                done=True, steps=req.spec.steps, steps_run=req.spec.steps,
                                compute_seconds=1.0, wall_seconds=1.0, reason="exited")
            if modern:
                rep.call_token = "rogue"          # its own registration's: the reports are its own worker's
            reports.append(rep)
            return pb.Empty()

        def KillJob(self, req, context):
            return pb.Empty()

    from concurrent import futures
    server = grpc.server(futures.ThreadPoolExecutor(4))
    from gavel_ng.protocol.protos import gavel_pb2 as _pb  # handlers without auth: the rogue accepts anything
    desc = _pb.DESCRIPTOR.services_by_name["Worker"]
    impl = Rogue()
    server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(desc.full_name, {
        m.name: grpc.unary_unary_rpc_method_handler(getattr(impl, m.name),
                                                    request_deserializer=getattr(_pb, m.input_type.name).FromString,
                                                    response_serializer=getattr(
                                                        _pb, m.output_type.name).SerializeToString)
        for m in desc.methods}),))
    rport = server.add_insecure_port("127.0.0.1:0")
    server.start()
    reg = pb.RegisterWorkerRequest(worker_id=rogue_id, address=f"127.0.0.1:{rport}", gpu_type="k80", gpus=4)
    if modern:
        reg.call_token = "rogue"
    rogue.RegisterWorker(reg)
    stop_beat = [False]
    import threading

    def beat():
        while not stop_beat[0]:
            try:
                rogue.Heartbeat(pb.HeartbeatRequest(worker_id=rogue_id, **({"call_token": "rogue"} if modern
                                                                          else {})))
            except grpc.RpcError:
                pass
            time.sleep(0.3)

    threading.Thread(target=beat, daemon=True).start()
    k80 = {"allowed_types": ["k80"], "user": "gv-alice", "entity": "nlp"}
    three = list(submit("alice", *[{"steps": 5000, "name": f"k80-{i}", "rules": k80} for i in range(3)]).job_ids)
    wait_for(lambda: len(reports) >= 3, 60)
    outcomes = [code(lambda rep=rep: rogue.ReportDone(rep)) for rep in reports[:3]]
    time.sleep(1.0)
    after = jobs(three)
    rows.append(("rogue worker reports 3 jobs done with 0 steps run",
                 "; ".join(f"{after[m].status} {after[m].steps_done}/{after[m].spec.steps}" for m in three)
                 + f" (ReportDone: {outcomes[0].split(':')[0] if outcomes else 'none'})",
                 not any(after[m].status == "done" for m in three)))
    v = jobs([victim])[victim]
    real = next((w for w in client["admin"].GetStatus(pb.StatusRequest()).workers if victim in w.running_jobs), None)
    forged = pb.DoneReport(worker_id=real.worker_id if real else "", job_id=victim, attempt=v.attempts, exit_code=1,
                           steps=-1, reason="exited", detail="forged")
    if modern:
        forged.call_token = "rogue"           # it holds the workers' shared credential, not that daemon's token
    r = code(lambda: rogue.ReportDone(forged))
    rows.append(("rogue worker forges a failure of alice's attempt on another worker", r, not r.startswith("OK")))
    # the same id and address as alice's job's worker, the rogue's own token: a take-over of that worker
    hijack = pb.RegisterWorkerRequest(worker_id=real.worker_id if real else "", address=real.address if real else "",
                                      gpu_type="v100", gpus=2)
    if modern:
        hijack.call_token = "rogue"
    r = code(lambda: rogue.RegisterWorker(hijack))
    rows.append(("rogue worker registers the id and address of alice's job's worker", r.split(" (")[0][:110],
                 not r.startswith("OK")))
    stop_beat[0] = True
    for m in three:
        client["admin"].CancelJob(pb.CancelJobRequest(job_id=m))
    server.stop(0)

    # ----- a job's speed reports move its class's rate -----
    before = client["admin"].GetStatus(pb.StatusRequest()).throughputs.get(f"{R18}|1|v100")
    [liar] = submit("bob", {"steps": 10**9, "name": "liar", "rules": {"allowed_types": ["v100"], "user": "gv-bob",
                                                                       "entity": "nlp"},
                            "command": [sys.executable, str(scripts / "liar.py"), "10", "5000"]}).job_ids
    wait_for(lambda: jobs([liar])[liar].status in ("cancelled", "failed", "done") or
             jobs([liar])[liar].steps_live > 40000, 90)
    time.sleep(2)
    rate = client["admin"].GetStatus(pb.StatusRequest()).throughputs.get(f"{R18}|1|v100")
    client["admin"].CancelJob(pb.CancelJobRequest(job_id=liar))
    rows.append(("a job's lease reports claim 10,000 steps/s (ResNet-18 on v100)",
                 f"measured rate {before or 0:.1f} -> {rate or 0:.1f} steps/s",
                 rate is not None and before is not None and rate < 3 * before))

    # ----- inputs that cannot run -----
    r = code(lambda: submit("alice", {"steps": 30, "name": "nul", "env": {"X": "a\0b"},
                                      "rules": {"allowed_types": ["p100"], "user": "gv-alice", "entity": "nlp"}}))
    nul_ok = r.startswith("OK")
    t0 = time.monotonic()
    [next_job] = submit("alice", {"steps": 30, "name": "after-nul",
                                  "rules": {"allowed_types": ["p100"], "user": "gv-alice", "entity": "nlp"}}).job_ids
    done = wait_for(lambda: jobs([next_job])[next_job].status in ("done", "failed"), 60)
    rows.append(("a job with a NUL byte in an env value",
                 f"submit {r.split(':')[0]}; the next job on its GPU "
                 + (f"finished in {time.monotonic() - t0:.0f} s" if done else "waited > 60 s"),
                 not nul_ok and bool(done)))
    r = code(lambda: submit("alice", {"steps": 10, "name": "\x1b[2J\x1b[31mred", "rules": {"user": "gv-alice",
                                                                                         "entity": "nlp"}}))
    rows.append(("a job name with terminal escapes", r.split(":")[0], not r.startswith("OK")))

    # ----- malformed calls and wrong tokens in the scheduler's log -----
    size0 = log.stat().st_size
    chan = grpc.insecure_channel(address)
    raw = chan.unary_unary("/gavel_ng.v1.Scheduler/SubmitJobs", request_serializer=lambda b: b,
                           response_deserializer=lambda b: b)
    for i in range(200):
        try:
            raw(b"\xff\xff\xff\xff" + bytes([i % 256]) * 7, metadata=(("authorization", f"Bearer {admin}"),), timeout=5)
        except grpc.RpcError:
            pass
    for i in range(200):
        try:
            raw(b"", metadata=(("authorization", "Bearer wrong"),), timeout=5)
        except grpc.RpcError:
            pass
    time.sleep(1)
    text = log.read_text(errors="replace")[size0:]
    lines = [x for x in text.splitlines() if x.strip()]
    rows.append(("400 malformed or wrong-token calls: scheduler log",
                 f"{len(lines)} lines, {text.count('Traceback')} tracebacks, caller address "
                 f"{'named' if '127.0.0.1' in text else 'not named'}",
                 text.count("Traceback") == 0 and len(lines) <= 10 and "127.0.0.1" in text))

    # ----- revocation and the audit -----
    r = code(lambda: client["bob"].CancelJob(pb.CancelJobRequest(job_id=victim)))
    rows.append(("bob cancels alice's job", r, not r.startswith("OK")))
    if modern:
        subprocess.run([sys.executable, "-m", "gavel_ng", "user", "revoke", "gv-bob", "--scheduler", address,
                        "--token-file", str(state / "token")], capture_output=True, env=ENV, check=True)
        r = code(lambda: client["bob"].ListJobs(pb.ListJobsRequest()))
        rows.append(("bob's credential right after `gavel-ng user revoke gv-bob`", r.split(":")[0],
                     not r.startswith("OK")))
    r = code(lambda: client["alice"].CancelJob(pb.CancelJobRequest(job_id=victim)))
    db = sqlite3.connect(f"file:{state / 'gavel.sqlite'}?mode=ro", uri=True)
    cols = [c[1] for c in db.execute("PRAGMA table_info(events)")]
    if "actor" in cols:
        acts = db.execute("SELECT kind, job_id, actor FROM events WHERE kind IN ('submit', 'cancelled')").fetchall()
        missing = [a for a in acts if not a[2]]
        outcome = f"{len(acts)} submit/cancel events, {len(missing)} without an actor"
    else:
        missing, outcome = [1], "events have no actor column"
    db.close()
    rows.append(("who submitted and cancelled (the audit)", outcome, not missing))

    # ----- a second scheduler on the same state -----
    second, slog = procs.spawn(["scheduler", "--cluster-config", str(config), "--state", str(state), "--port", "0",
                                "--bind", "127.0.0.1"], "second-scheduler")
    p2 = port_of(second, slog, timeout=20)
    procs.stop(second)
    rows.append(("a second scheduler on the same state directory",
                 f"serving on port {p2}" if p2 else "refused: " + slog.read_text().strip().splitlines()[-1][:120],
                 p2 is None))

    # ----- gavel-ng logs -----
    def logs(*a, timeout=20):
        p = subprocess.Popen([sys.executable, "-m", "gavel_ng", "logs", *a], stdout=subprocess.DEVNULL,
                             stderr=subprocess.PIPE, env=ENV)
        try:
            _, err = p.communicate(timeout=timeout)
            return p.returncode, err.decode(errors="replace")
        except subprocess.TimeoutExpired:
            p.kill()
            p.communicate()
            return None, f"blocked (killed after {timeout}s)"

    rc, err = logs(str(2**63), "--state", str(state))
    rows.append(("gavel-ng logs 2^63", f"exit {rc}: {err.strip().splitlines()[-1][:100] if err.strip() else ''}",
                 "Traceback" not in err and rc == 2))
    ck = state / "checkpoints"
    vdir = next(p for p in ck.iterdir() if p.name == f"job-{victim}" or p.name.startswith(f"job-{victim}-"))
    os.mkfifo(vdir / "logs" / "attempt90-rank0.log")
    rc, err = logs(str(victim), "--state", str(state), "--attempt", "90", timeout=10)
    rows.append(("gavel-ng logs of a FIFO planted as a log", f"exit {rc}: {err.strip()[:100]}", rc == 2))
    big = vdir / "logs" / "attempt91-rank0.log"
    with open(big, "wb") as f:
        line = b"x" * 1023 + b"\n"
        for _ in range(300 * 1024):
            f.write(line)
    p = subprocess.Popen([sys.executable, "-m", "gavel_ng", "logs", str(victim), "--state", str(state), "--attempt",
                          "91"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=ENV)
    _, status, ru = os.wait4(p.pid, 0)
    rows.append(("gavel-ng logs of a 300 MiB log", f"peak memory {ru.ru_maxrss / 1024:.0f} MiB",
                 ru.ru_maxrss < 200 * 1024))
    big.unlink()

    # ----- a lost state: does a new job 1 resume from the old job 1's checkpoint? -----
    for name, (wp, _) in workers.items():
        procs.stop(wp)
    procs.stop(sched)
    for f in state.glob("gavel.sqlite*"):
        shutil.copy(f, root / f.name)
        f.unlink()
    sched, log = procs.spawn(["scheduler", "--cluster-config", str(config), "--state", str(state), "--port", "0",
                              "--bind", "127.0.0.1"], "scheduler-empty")
    port = port_of(sched, log)
    address = f"127.0.0.1:{port}"
    admin = (state / "token").read_text().strip()
    (creds / "admin-token").write_text(admin + "\n")
    p, wlog = procs.spawn(["worker", "--scheduler", address, "--gpu-type", "v100", "--gpus", "1", "--bind",
                           "127.0.0.1", "--advertise", "127.0.0.1", "--token-file", str(creds / "admin-token")],
                          "worker-empty")
    port_of(p, wlog)
    st = Stub(open_channel(address, None), "Scheduler", admin, timeout=20)
    [first] = st.SubmitJobs(pb.SubmitJobsRequest(jobs=[pb.JobSpec(job_type=R18, steps=30, size="tiny")])).job_ids
    wait_for(lambda: st.ListJobs(pb.ListJobsRequest(job_ids=[first], include_finished=True)).jobs[0].status
             in ("done", "failed"), 120)
    dirs = [p for p in ck.iterdir() if p.name == f"job-{first}" or p.name.startswith(f"job-{first}-")]
    loads = []
    for d in dirs:
        tl = d / "train.jsonl"
        if tl.exists():
            loads += [json.loads(x) for x in tl.read_text().splitlines() if '"load"' in x]
    old = [e for e in loads if e.get("step", 0) > 0]
    rows.append((f"state deleted; the new job {first} resumes from",
                 f"the old job {first}'s checkpoint (step {old[0]['step']})" if old else "nothing (a fresh start)",
                 not old))
    procs.stop(p)
    procs.stop(sched)

    # ----- a damaged state file -----
    for what in ("zeroed", "row"):
        bad = root / f"damaged-{what}"
        bad.mkdir()
        for f in root.glob("gavel.sqlite*"):
            shutil.copy(f, bad / f.name)
        db = sqlite3.connect(bad / "gavel.sqlite")
        db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        if what == "row":
            db.execute("UPDATE jobs SET spec = '{not json' WHERE job_id = (SELECT MIN(job_id) FROM jobs)")
            db.commit()
        db.close()
        if what == "zeroed":
            with open(bad / "gavel.sqlite", "r+b") as f:
                n = f.seek(0, 2)
                f.seek(max(n - 3 * 4096, 0))
                f.write(b"\0" * 3 * 4096)
        sp, slog = procs.spawn(["scheduler", "--cluster-config", str(config), "--state", str(bad), "--port", "0",
                                "--bind", "127.0.0.1"], f"scheduler-{what}")
        ok = port_of(sp, slog, timeout=30)
        procs.stop(sp)
        text = slog.read_text(errors="replace")
        last = [x for x in text.splitlines() if x.strip()][-1][:400] if text.strip() else ""
        damage = "its last pages zeroed" if what == "zeroed" else "a job row not JSON"
        rows.append((f"scheduler on a state file with {damage}",
                     f"{'started' if ok else 'exited'}, {text.count('Traceback')} traceback(s): {last}",
                     text.count("Traceback") == 0))


if __name__ == "__main__":
    main()
