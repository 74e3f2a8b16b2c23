"""A real cluster on loopback: scheduler and worker daemons as processes, torch jobs on the CPU.

Every process is started here and stopped by its pid at teardown (SIGTERM, then SIGKILL).
"""

from __future__ import annotations

import json
import os
import re
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from gavel_ng.protocol.client import SchedulerClient
from gavel_ng.runtime.records import job_dir

ENV = {**os.environ, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "PYTHONUNBUFFERED": "1"}


def _read_port(proc: subprocess.Popen, log: Path, timeout: float = 30.0) -> int:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        text = log.read_text() if log.exists() else ""
        for line in text.splitlines():
            m = re.match(r"^(scheduler|worker \S+) listening on \S+:(\d+)$", line)
            if m:
                return int(m[2])
        if proc.poll() is not None:
            raise RuntimeError(f"process exited: {text}")
        time.sleep(0.05)
    raise TimeoutError(f"no port from {log}")


class LocalCluster:
    def __init__(self, root: Path, round_seconds: float = 3.0, **config):
        self.root = root
        self.state = root / "state"
        self.config = root / "cluster.json"
        self.config.write_text(json.dumps({"worker_types": ["v100", "p100", "k80"], "heartbeat_seconds": 0.3,
                                           "round_seconds": round_seconds, "grace_seconds": 3.0, **config}))
        self.procs: list[subprocess.Popen] = []
        self.workers: dict[str, subprocess.Popen] = {}
        self.port = 0
        self.scheduler: subprocess.Popen | None = None

    def _spawn(self, args: list[str], name: str) -> tuple[subprocess.Popen, Path]:
        log = self.root / f"{name}.log"
        with open(log, "ab") as out:
            proc = subprocess.Popen([sys.executable, "-m", "gavel_ng", "-v", *args], stdout=out,
                                    stderr=subprocess.STDOUT, env=ENV, cwd=self.root)
        self.procs.append(proc)
        return proc, log

    def start_scheduler(self, *extra: str) -> None:
        name = f"scheduler{sum(1 for p in self.root.glob('scheduler*.log'))}"
        self.scheduler, log = self._spawn(["scheduler", "--cluster-config", str(self.config), "--state",
                                           str(self.state), "--port", str(self.port), "--bind", "127.0.0.1",
                                           *extra], name)
        self.port = _read_port(self.scheduler, log)

    @property
    def token(self) -> str:
        return (self.state / "token").read_text().strip()

    def start_worker(self, name: str, gpu_type: str, gpus: int, *extra: str, token_file: Path | None = None) -> None:
        """A worker with the cluster token, or the credential in `token_file`."""
        proc, log = self._spawn(["worker", "--scheduler", f"127.0.0.1:{self.port}", "--gpu-type", gpu_type,
                                 "--gpus", str(gpus), "--bind", "127.0.0.1", "--advertise", "127.0.0.1",
                                 "--token-file", str(token_file or self.state / "token"), *extra], name)
        self.workers[name] = proc
        _read_port(proc, log)

    def start(self, *workers: tuple[str, str, int]) -> None:
        """The scheduler, then each (name, GPU type, GPUs) worker; returns once all registered."""
        self.start_scheduler()
        for name, gpu_type, gpus in workers:
            self.start_worker(name, gpu_type, gpus)
        self.wait_workers(len(workers))

    def client(self) -> SchedulerClient:
        return SchedulerClient(f"127.0.0.1:{self.port}", token=self.token)

    def wait_workers(self, n: int, timeout: float = 30.0) -> None:
        end = time.monotonic() + timeout
        with self.client() as c:
            while sum(w.alive for w in c.status().workers) < n:
                assert time.monotonic() < end, "workers did not register"
                time.sleep(0.1)

    def stop_process(self, proc: subprocess.Popen, sig: int = signal.SIGTERM, timeout: float = 10.0) -> None:
        if proc.poll() is None:
            proc.send_signal(sig)
            try:
                proc.wait(timeout)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(5)

    def close(self) -> None:
        for proc in reversed(self.procs):
            self.stop_process(proc, timeout=5.0)

    # ----- what happened -------------------------------------------------------------------------
    def events(self, kind: str | None = None) -> list[dict]:
        db = sqlite3.connect(f"file:{self.state / 'gavel.sqlite'}?mode=ro", uri=True, timeout=30)
        try:
            rows = db.execute("SELECT kind, job_id, worker_id, detail, ts, round FROM events ORDER BY seq").fetchall()
        finally:
            db.close()
        out = [{"kind": k, "job_id": j, "worker_id": w, "ts": ts, "round_no": r, **(json.loads(d) if d else {})}
               for k, j, w, d, ts, r in rows]
        return [e for e in out if kind is None or e["kind"] == kind]

    def job_dir(self, job_id: int) -> Path:
        """The job's checkpoint and log directory (its name carries the state's id: runtime.records.job_dir)."""
        db = sqlite3.connect(f"file:{self.state / 'gavel.sqlite'}?mode=ro", uri=True, timeout=30)
        try:
            row = db.execute("SELECT value FROM meta WHERE key = 'state_id'").fetchone()
        finally:
            db.close()
        return job_dir(self.state / "checkpoints", job_id, row[0] if row else "")

    def train_log(self, job_id: int) -> list[dict]:
        path = self.job_dir(job_id) / "train.jsonl"
        return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []

    def rank_logs(self, job_id: int) -> dict[str, str]:
        logs = self.job_dir(job_id) / "logs"
        return {p.name: p.read_text() for p in sorted(logs.glob("*.log"))}


@pytest.fixture
def cluster_factory(tmp_path):  # re-exported by conftest.py
    made: list[LocalCluster] = []

    def make(**kw) -> LocalCluster:
        c = LocalCluster(tmp_path, **kw)
        made.append(c)
        return c

    yield make
    for c in made:
        c.close()


def wait_for(predicate, timeout: float, what: str, poll: float = 0.2):
    end = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > end:
            raise TimeoutError(what)
        time.sleep(poll)


def check_training(cluster: LocalCluster, job_id: int, steps: int) -> None:
    """The job reached exactly `steps`, every restore loaded what was saved, and the loss fell."""
    log = cluster.train_log(job_id)
    saves = {e["step"]: e["checksum"] for e in log if e.get("event") == "save"}
    loads = [e for e in log if e.get("event") == "load"]
    assert max(saves) == steps, (job_id, sorted(saves))
    for e in loads:
        assert e["step"] in saves and abs(e["checksum"] - saves[e["step"]]) < 1e-6 * max(1, abs(e["checksum"])), e
    losses = [(e["step"], e["loss"]) for e in log if "loss" in e]
    assert max(s for s, _ in losses) == steps
    first = sum(v for _, v in losses[:3]) / 3
    last = sum(v for _, v in losses[-3:]) / 3
    assert last < 0.85 * first, (job_id, first, last)
    # after every restore the loss continues from where it was, not from an untrained model
    for e in loads:
        after = [v for s, v in losses if s == e["step"] + 1]
        if after and e["step"] >= 20:
            assert after[0] < 0.95 * first, (job_id, e, after[0], first)
    ckpts = sorted(cluster.job_dir(job_id).glob("ckpt-*"))
    assert json.loads((ckpts[-1] / "gavel.json").read_text())["step"] == steps


def worker_name(cluster: LocalCluster, worker_id: str) -> str:
    """The name a worker was started under (start_worker), from the id its log announces."""
    for name in cluster.workers:
        log = cluster.root / f"{name}.log"
        if log.exists() and re.search(rf"^worker {re.escape(worker_id)} listening on ", log.read_text(), re.M):
            return name
    raise KeyError(worker_id)
