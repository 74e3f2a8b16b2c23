"""The scheduler at 10,000 GPUs: heartbeats, launches and status against a real scheduler process (issue 42).

    python experiments/bench_runtime_scale.py [--workers 100,500,1250] [--jobs 0,5000,20000]
        [--seconds 75] [--round-seconds 30] [--probe-workers 12] [--no-heartbeat-port] [--code DIR]
        [--out FILE.json]
    python experiments/bench_runtime_scale.py --calls [--repeat 3]

A real `gavel-ng scheduler` process (las, rounds of --round-seconds, its state in a temporary
directory; heartbeats answered by its heartbeat port's process, runtime.front, unless
--no-heartbeat-port) and, in a second process, simulated 8-GPU workers (experiments/scale_workers.py: they
register, heartbeat and report as `gavel-ng worker` does, with its messages, its token and its
5 s deadline; their Worker service accepts RunJob and runs nothing), a third of them of each of
v100, p100 and k80. For each worker count the scheduler starts afresh; once every worker is
registered, the queue is filled to each of --jobs in turn (jobs of 2 GPUs, so 5,000 of them fill
10,000 GPUs and 20,000 keep 5,000 running) and the next --seconds are measured:

- heartbeats: latency p50 / p99 as a worker sees it (its round trip), and the share that failed;
  also the p99 of those sent between round boundaries (not within 20 s after a round's start: in
  idle mode the last round's attempts end there, at their lease end + grace, and the round's
  launches follow, 10,000 calls the simulated workers' single process serves too); and the p99 of those
  sent 10 s or more into the window (the steady state: the first seconds carry the stage's submission of
  thousands of jobs at once and the first round that launches them); and the latency seen by
  --probe-workers (12) of the workers, simulated in a third process that does little else: at a
  boundary the second process also serves thousands of RunJobs calls and sends thousands of
  reports, and its own lag (printed too) adds to every latency it measures;
- workers declared dead (`worker_down` events in the window) and attempts lost;
- rounds: each round's planning (the loop's solve and plan before it, `plan_s` of its `round`
  event; on code without it, the solve's seconds), its launches (the round's start to its last
  RunJob answered, or to its last `launch` event on code that does not record it), and the time
  from one round's start to the next;
- `status` (GetStatus, default page) latency, called every --status-every (0.5) s from a client, so
  that a round's boundary gets several calls (every 2 s before the sixth pass of issue 42); and the
  same call to the heartbeat port, which serves a copy of that page (runtime.front);
- the scheduler process's CPU (share of one core over the window) and its RSS, and its heartbeat port's;
  the share of heartbeats the port answered (the rest it left to the scheduler's own port).

Each figure is printed beside its goal. `--code DIR` runs the scheduler from another checkout's
gavel_ng (e.g. `git archive main | tar -x -C /tmp/before`), to measure the code before a change
with the same simulated workers. The machine's load average is printed with each table: figures
taken under load say so (docs/deploy.md, "Scale").
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import socket
import sqlite3
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

import grpc
import numpy as np
from local_cluster import ENV, LocalProcesses

TYPES = ("v100", "p100", "k80")
JOB_TYPES = ("ResNet-18 (batch size 32)", "ResNet-50 (batch size 64)", "Transformer (batch size 64)",
             "LM (batch size 20)")
CALM_AFTER = 20.0         # seconds after a round's start that its launches (and ends) may take
SETTLE_S = 10.0           # seconds after a stage's submission left out of the steady-state heartbeat p99
GOALS = {"hb_p99_ms": 100.0, "failed_pct": 0.0, "dead": 0, "plan_launch_s": 5.0, "status_ms": 200.0}


def _cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _memory_mb(pid: int) -> tuple[float, float]:
    """(RSS, peak RSS) in MiB."""
    kb = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(("VmRSS:", "VmHWM:")):
            kb[line.split(":")[0]] = int(line.split()[1])
    return kb.get("VmRSS", 0) / 1024, kb.get("VmHWM", 0) / 1024


def _child(pid: int) -> int | None:
    """The scheduler's child process (the heartbeat port's), if it has one."""
    try:
        kids = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
    except OSError:
        return None
    return int(kids[0]) if kids else None


def _pct(xs, q) -> float:
    return float(np.percentile(xs, q)) if len(xs) else float("nan")


class Sim:
    """The simulated workers' process."""

    def __init__(self, address: str, token: str, workers: int, jobs: str = "idle"):
        sys.path.insert(0, str(Path(__file__).parent))
        import scale_workers

        counts = {t: workers // len(TYPES) + (k < workers % len(TYPES)) for k, t in enumerate(TYPES)}
        ctx = mp.get_context("spawn")
        self.conn, child = ctx.Pipe()
        self.proc = ctx.Process(target=scale_workers.serve, args=(child, address, token, counts, 8, 0, jobs),
                                daemon=True)
        self.proc.start()
        if not self.conn.poll(120):
            raise TimeoutError("the simulated workers did not start")
        self.conn.recv()

    def stats(self) -> dict:
        self.conn.send(("stats",))
        return self.conn.recv()[1]

    def close(self) -> None:
        try:
            self.conn.send(("stop",))
            if self.conn.poll(30):
                self.conn.recv()
        except (BrokenPipeError, EOFError):
            pass
        self.proc.join(10)
        if self.proc.is_alive():
            self.proc.kill()


def _events(db_path: Path, t0: float, t1: float) -> dict:
    """What the store recorded in [t0, t1]: deaths, losses, and per round its planning and launches."""
    db = sqlite3.connect(f"file:{db_path}?mode=ro", uri=True, timeout=30)
    try:
        q = "SELECT COUNT(*), COUNT(DISTINCT worker_id) FROM events WHERE kind = 'worker_down' AND ts BETWEEN ? AND ?"
        down, dead = db.execute(q, (t0, t1)).fetchone()
        lost = db.execute("SELECT COUNT(*) FROM events WHERE kind = 'lost' AND ts BETWEEN ? AND ?",
                          (t0, t1)).fetchone()[0]
        rounds = db.execute("SELECT round, ts, detail FROM events WHERE kind = 'round' AND ts BETWEEN ? AND ? "
                            "ORDER BY ts", (t0 - 600, t1)).fetchall()
        spans = {r: (n, lo, hi) for r, n, lo, hi in db.execute(
            "SELECT round, COUNT(*), MIN(ts), MAX(ts) FROM events WHERE kind = 'launch' AND ts BETWEEN ? AND ? "
            "GROUP BY round", (t0, t1 + 60))}
        batches: dict[int, float] = {}
        for r, detail in db.execute("SELECT round, detail FROM events WHERE kind = 'launched' AND ts BETWEEN ? AND ?",
                                    (t0, t1 + 60)):
            batches[r] = max(batches.get(r, 0.0), json.loads(detail)["seconds"])
        solves = [json.loads(d)["seconds"] for (d,) in db.execute(
            "SELECT detail FROM events WHERE kind = 'solve' AND ts BETWEEN ? AND ?", (t0 - 60, t1))]
    finally:
        db.close()
    out = []
    for i, (r, ts, detail) in enumerate(rounds):
        if ts < t0:
            continue
        d = json.loads(detail) if detail else {}
        n, lo, hi = spans.get(r, (0, None, None))
        # the longest batch, pick to last RunJob answered; code that does not record it: first to last launch
        # event of the round (its RunJob calls came after those)
        launch = batches.get(r, (hi - lo) if n else None)
        out.append({"round": r, "launches": n, "launch_s": launch, "plan_s": d.get("plan_s"),
                    "first_launch_s": (lo - d.get("start", ts)) if n else None,
                    "interval_s": (ts - rounds[i - 1][1]) if i else None})
    starts = [json.loads(detail).get("start", ts) if detail else ts for _, ts, detail in rounds]
    return {"down": down, "dead": dead, "lost": lost, "rounds": out, "solves": solves, "starts": starts}


def measure(sim: Sim, client, pid: int, db_path: Path, seconds: float, profile: Path | None = None,
            probe: Sim | None = None, status_every: float = 0.5, port_client=None) -> dict:
    sim.stats()                                      # starts the window
    if probe is not None:
        probe.stats()
    spy = None
    if profile is not None:                          # py-spy (pip install py-spy): collapsed stacks of the window
        spy = subprocess.Popen(["py-spy", "record", "--pid", str(pid), "--duration", str(int(seconds)), "--rate", "50",
                                "--format", "raw", "--nonblocking", "--gil", "-o", str(profile)],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    port_pid = _child(pid)                           # the heartbeat port's process (runtime.front), if any
    t0, cpu0 = time.time(), _cpu_seconds(pid)
    port_cpu0 = _cpu_seconds(port_pid) if port_pid else 0.0
    status_ms, status_at, dead_now, running = [], [], 0, 0
    port_ms, port_at, port_errors = [], [], Counter()  # the same page from the heartbeat port (runtime.front)
    while time.time() < t0 + seconds:
        if port_client is not None:
            start = time.perf_counter()
            try:
                port_client.status()
            except grpc.RpcError as exc:                # said in the figures, by code
                port_errors[exc.code().name] += 1
            port_ms.append(1000 * (time.perf_counter() - start))
            port_at.append(round(time.time() - t0, 1))
        start = time.perf_counter()
        try:
            st = client.status()
            status_ms.append(1000 * (time.perf_counter() - start))
            status_at.append(round(time.time() - t0, 1))
            dead_now = max(dead_now, sum(not w.alive for w in st.workers))
            running = st.job_counts.get("running", 0)
        except Exception as exc:                      # a status that times out is a figure too
            status_ms.append(1000 * (time.perf_counter() - start))
            status_at.append(round(time.time() - t0, 1))
            print(f"  status failed: {str(exc)[:100]}", flush=True)
        time.sleep(max(0.0, status_every - (time.perf_counter() - start)))
    t1 = time.time()
    cpu = (_cpu_seconds(pid) - cpu0) / (t1 - t0)
    port_cpu = (_cpu_seconds(port_pid) - port_cpu0) / (t1 - t0) if port_pid else float("nan")
    port_rss = _memory_mb(port_pid)[0] if port_pid else float("nan")
    if spy is not None:
        spy.wait(30)
    rss, peak = _memory_mb(pid)
    s = sim.stats()
    quiet = probe.stats() if probe is not None else {"latencies": [], "lag": []}
    ev = _events(db_path, t0, t1)
    lat = np.array(s["latencies"]) * 1000
    # heartbeats sent between round boundaries: not in the CALM_AFTER seconds from a round's start (in idle mode
    # the last round's attempts end there, at lease end + grace, and the round's launches follow: 10,000 calls
    # that the simulated workers' one process must also serve)
    sent = np.array(s.get("sent", []))
    calm = lat[[not any(0 <= t - r < CALM_AFTER for r in ev["starts"]) for t in sent]] if len(sent) == len(lat) else lat
    calls = len(lat) + sum(s["failed"].values())
    plans = [r["plan_s"] for r in ev["rounds"] if r["plan_s"] is not None] or ev["solves"]
    launches = [r["launch_s"] for r in ev["rounds"] if r["launch_s"] is not None]
    by_second = []                                   # (seconds into the window, heartbeats, p50, max ms)
    if len(sent) == len(lat):
        for k in range(int(seconds)):
            x = lat[(sent >= t0 + k) & (sent < t0 + k + 1)]
            by_second.append((k, len(x), _pct(x, 50), float(x.max()) if len(x) else float("nan")))
    # the steady state: heartbeats sent SETTLE_S or more into the window (the first seconds after a stage's queue was
    # filled carry its submission, thousands of jobs at once, and the first round that launches them)
    steady = lat[sent >= t0 + SETTLE_S] if len(sent) == len(lat) else lat
    return {"hb_p50_ms": _pct(lat, 50), "hb_p99_ms": _pct(lat, 99), "hb_calls": calls, "hb_by_second": by_second,
            "hb_steady_p99_ms": _pct(steady, 99),
            # the probe workers, in a process of their own that does little else: the scheduler's latency without
            # the lag of the process that simulates the other 1,238 workers (which at a boundary also serves
            # thousands of RunJobs calls and sends thousands of reports)
            "probe_hb_p50_ms": _pct(np.array(quiet["latencies"]) * 1000, 50),
            "probe_hb_p99_ms": _pct(np.array(quiet["latencies"]) * 1000, 99),
            "probe_hb_max_ms": 1000 * max(quiet["latencies"], default=float("nan")),
            "probe_hb_calls": len(quiet["latencies"]) + sum(quiet.get("failed", {}).values()),
            "probe_lag_max_ms": 1000 * max(quiet["lag"], default=float("nan")),
            "hb_calm_p99_ms": _pct(calm, 99), "hb_calm_share": len(calm) / max(len(lat), 1),
            "failed_pct": 100 * sum(s["failed"].values()) / max(calls, 1), "failed": s["failed"],
            "dead": ev["dead"], "down_events": ev["down"], "dead_at_once": dead_now, "unknown": s["unknown"],
            "lost": ev["lost"], "plan_s": max(plans) if plans else None,
            "launch_s": max(launches) if launches else None,
            "launches": sum(r["launches"] for r in ev["rounds"]), "rounds": ev["rounds"],
            "status_ms_p50": _pct(status_ms, 50), "status_ms_max": max(status_ms) if status_ms else float("nan"),
            "status_by_time": list(zip(status_at, status_ms)),     # (seconds into the window, ms) of each call
            "port_status_ms_p50": _pct(port_ms, 50), "port_status_ms_max": max(port_ms) if port_ms else float("nan"),
            "port_status_by_time": list(zip(port_at, port_ms)), "port_status_errors": dict(port_errors),
            "cpu_pct": 100 * cpu, "rss_mb": rss, "port_cpu_pct": 100 * port_cpu, "port_rss_mb": port_rss,
            # heartbeats the port answered, left to the scheduler's own port, failed there
            "port_answered": s.get("port_answered", 0), "port_asked": s.get("port_asked", 0),
            "port_failed": s.get("port_failed", {}), "peak_rss_mb": peak, "running": running,
            "sim_lag_p99_ms": 1000 * _pct(s["lag"], 99), "sim_lag_max_ms": 1000 * max(s["lag"], default=float("nan")),
            "registrations": s["registrations"],
            "reports": s["reports"], "runjobs": s["runjobs"], "job_calls": s["job_calls"],
            "job_failed": s["job_failed"], "load": os.getloadavg()}


def run_workers(workers: int, job_counts: list[int], args, root: Path) -> list[dict]:
    from gavel_ng.protocol.client import SchedulerClient
    from gavel_ng.protocol.jobspec import JobSpec

    env = dict(ENV)
    if args.code:
        env["PYTHONPATH"] = str(Path(args.code).resolve())
    config = {"worker_types": list(TYPES), "policy": args.policy, "round_seconds": args.round_seconds}
    if not args.no_heartbeat_port:
        config["heartbeat_port"] = _free_port()     # heartbeats, and a status page, in a process of their own
    (root / "cluster.json").write_text(json.dumps(config))
    rows = []
    with LocalProcesses(root, env) as procs:
        port = procs.start("scheduler", ["scheduler", "--cluster-config", "cluster.json", "--state", "state",
                                         "--port", "0", "--bind", "127.0.0.1"])
        pid = procs.procs[0].pid
        address = f"127.0.0.1:{port}"
        token = (root / "state" / "token").read_text().strip()
        probe_n = min(args.probe_workers, workers // 2)
        sim = Sim(address, token, workers - probe_n, args.job_mode)
        probe = Sim(address, token, probe_n, args.job_mode) if probe_n else None
        try:
            port_client = None if args.no_heartbeat_port else \
                SchedulerClient(f"127.0.0.1:{config['heartbeat_port']}", token=token, timeout=60.0)
            with SchedulerClient(address, token=token, timeout=60.0) as client:
                end = time.monotonic() + 120
                while sum(w.alive for w in client.status().workers) < workers:
                    if time.monotonic() > end:
                        raise TimeoutError(f"only {sum(w.alive for w in client.status().workers)} of {workers} "
                                           "workers registered")
                    time.sleep(0.5)
                time.sleep(2.0)
                queued = 0
                for jobs in job_counts:
                    submit_s = 0.0
                    if jobs > queued:
                        specs = [JobSpec(JOB_TYPES[i % len(JOB_TYPES)], steps=1_000_000, scale_factor=2, size="tiny")
                                 for i in range(queued, jobs)]
                        start = time.perf_counter()
                        client.submit(specs)
                        submit_s = time.perf_counter() - start
                        queued = jobs
                    profile = Path(args.profile) / f"w{workers}-j{jobs}.txt" if args.profile else None
                    row = {"workers": workers, "jobs": jobs, "submit_s": submit_s,
                           **measure(sim, client, pid, root / "state" / "gavel.sqlite", args.seconds, profile,
                                     probe, args.status_every, port_client)}
                    rows.append(row)
                    print(_line(row), flush=True)
        finally:
            if port_client is not None:
                port_client.close()
            sim.close()
            if probe is not None:
                probe.close()
    return rows


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _fmt(v, spec: str = ".0f", unit: str = "") -> str:
    return "—" if v is None or (isinstance(v, float) and np.isnan(v)) else f"{v:{spec}}{unit}"


HEADER = ("| workers | jobs (running) | heartbeat p50 / p99 (goal p99 < 100 ms); p99 between round boundaries; "
          "p99 from 10 s after the submission | "
          "heartbeats failed (goal 0 %) | "
          "workers declared dead (goal 0) | planning / launches (goal < 5 s) | status p50 / max (goal < 200 ms); "
          "from the heartbeat port | "
          "scheduler CPU (+ heartbeat port's) | scheduler RSS (+ port's) | heartbeats the port answered | "
          "load avg | simulated workers' own lag p99 / max | "
          "probe workers' heartbeat p50 / p99 / max (goal p99 < 100 ms) |\n"
          "|---|---|---|---|---|---|---|---|---|---|---|---|---|")


def _line(r: dict) -> str:
    return (f"| {r['workers']:,} | {r['jobs']:,} ({r['running']:,}) | {_fmt(r['hb_p50_ms'], '.1f')} / "
            f"{_fmt(r['hb_p99_ms'], '.0f')} ms; {_fmt(r.get('hb_calm_p99_ms'), '.0f')} ms; "
            f"{_fmt(r.get('hb_steady_p99_ms'), '.0f')} ms | "
            f"{r['failed_pct']:.1f} % | {r['dead']:,} | "
            f"{_fmt(r['plan_s'], '.2f', ' s')} / {_fmt(r['launch_s'], '.1f', ' s')} ({r['launches']:,} launches) | "
            f"{_fmt(r['status_ms_p50'], '.0f')} / {_fmt(r['status_ms_max'], '.0f')} ms; "
            f"{_fmt(r.get('port_status_ms_p50'), '.0f')} / {_fmt(r.get('port_status_ms_max'), '.0f')} ms | "
            f"{r['cpu_pct']:.0f} % "
            f"(+ {_fmt(r.get('port_cpu_pct'))} %) | {r['rss_mb']:.0f} MiB (+ {_fmt(r.get('port_rss_mb'))} MiB) | "
            f"{_answered(r)} | {r['load'][0]:.1f} | {_fmt(r['sim_lag_p99_ms'], '.0f')} / "
            f"{_fmt(r.get('sim_lag_max_ms'), '.0f')} ms | {_fmt(r.get('probe_hb_p50_ms'), '.1f')} / "
            f"{_fmt(r.get('probe_hb_p99_ms'), '.0f')} / {_fmt(r.get('probe_hb_max_ms'), '.0f')} ms |")


def _answered(r: dict) -> str:
    answered, asked, failed = r.get("port_answered", 0), r.get("port_asked", 0), sum(r.get("port_failed", {}).values())
    total = answered + asked + failed
    return f"{100 * answered / total:.1f} % ({asked:,} asked, {failed:,} failed)" if total else "—"


def calls(repeat: int) -> None:
    """The scheduler's calls in-process, timed: 1,250 workers, 20,000 queued jobs, 5,000 of them running (their
    attempts made by hand), no gRPC: what each call costs the scheduler itself."""
    from gavel_ng.protocol.jobspec import JobSpec
    from gavel_ng.runtime.config import ClusterConfig
    from gavel_ng.runtime.jobs import Attempt, AttemptRef
    from gavel_ng.runtime.metrics import StateCollector
    from gavel_ng.runtime.service import SchedulerService
    from gavel_ng.runtime.state import Registration

    with tempfile.TemporaryDirectory(prefix="gavel-calls-") as tmp:
        svc = SchedulerService(ClusterConfig(worker_types=TYPES, round_seconds=30.0), Path(tmp) / "state", port=0,
                               bind="127.0.0.1")
        st = svc.state
        for k in range(1250):
            st.register(Registration(f"w{k}", f"w{k}:1", TYPES[k % 3], 8, []), lambda a: (None, None))
        ids = st.submit([JobSpec(JOB_TYPES[i % 4], steps=10**6, scale_factor=2, size="tiny") for i in range(20000)])
        now = time.time()
        with st.lock:
            for n, m in enumerate(ids[:5000]):
                w, g = n // 4, (n % 4) * 2
                att = Attempt(m, 1, [(f"w{w}", g), (f"w{w}", g + 1)], TYPES[w % 3], True, now, now + 60, 0)
                job = st.jobs[m]
                job.live, job.status, job.attempts = att, "running", 1
                st.attempt_started(att)
        mine = [AttemptRef(m, 1) for m in ids[28:32]]          # what worker w7 runs
        collector = StateCollector(st)

        def ms(f, n: int) -> float:
            start = time.perf_counter()
            for _ in range(n):
                f()
            return 1000 * (time.perf_counter() - start) / n

        again = Registration("w7", "w7:1", TYPES[1], 8, mine)       # w7 registers again, running the same

        for _ in range(repeat):
            hb = ms(lambda: st.heartbeat("w7", mine), 2000)
            reg = ms(lambda: st.register(again, lambda a: (None, None)), 200)
            stat, scrape = ms(svc.status, 20), ms(lambda: list(collector.collect()), 20)
            print(f"heartbeat {hb:.3f} ms, registration {reg:.3f} ms, status {stat:.1f} ms, metrics scrape "
                  f"{scrape:.1f} ms (load average {os.getloadavg()[0]:.1f})", flush=True)
        svc.store.close()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--workers", default="100,500,1250", help="worker counts, comma-separated")
    ap.add_argument("--jobs", default="0,5000,20000", help="queue sizes for each worker count, in order")
    ap.add_argument("--seconds", type=float, default=75.0, help="measurement window of each stage")
    ap.add_argument("--probe-workers", type=int, default=12,
                    help="of --workers, simulated in a process of their own that does little else: their heartbeat "
                         "latency is the scheduler's, without the other simulated workers' process's own lag")
    ap.add_argument("--round-seconds", type=float, default=30.0)
    ap.add_argument("--no-heartbeat-port", action="store_true",
                    help="heartbeats to the scheduler's own port and process (before issue 42's fifth pass), not to "
                         "the heartbeat port's process (cluster-config heartbeat_port)")
    ap.add_argument("--status-every", type=float, default=0.5,
                    help="seconds between the bench's GetStatus calls (each waits for the one before)")
    ap.add_argument("--policy", default="las")
    ap.add_argument("--job-mode", choices=("idle", "renew"), default="idle",
                    help="idle: attempts run nothing and say nothing (their worker ends them at their lease end + "
                         "grace); renew: they keep their lease as GavelIterator does (progress reports every sixth "
                         "of a round, renewals)")
    ap.add_argument("--code", help="run the scheduler from this checkout's gavel_ng (default: this one)")
    ap.add_argument("--out", help="write every figure as JSON here")
    ap.add_argument("--keep", metavar="DIR", help="run in DIR/wWORKERS and keep it (scheduler log and state)")
    ap.add_argument("--profile", metavar="DIR", help="record the scheduler with py-spy during each stage (collapsed "
                                                     "stacks, DIR/wWORKERS-jJOBS.txt)")
    ap.add_argument("--calls", action="store_true", help="instead: time the scheduler's calls in-process (1,250 "
                                                         "workers, 20,000 jobs, 5,000 running), --repeat times")
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    if args.calls:
        calls(args.repeat)
        return 0
    if args.profile:
        Path(args.profile).mkdir(parents=True, exist_ok=True)
    print(f"load average before: {' '.join(f'{x:.2f}' for x in os.getloadavg())}", flush=True)
    print(HEADER, flush=True)
    rows = []
    for workers in [int(x) for x in args.workers.split(",")]:
        jobs = [int(x) for x in args.jobs.split(",")]
        if args.keep:                                # the scheduler's log and state, for a look afterwards
            root = Path(args.keep) / f"w{workers}"
            root.mkdir(parents=True, exist_ok=False)
            rows += run_workers(workers, jobs, args, root)
            continue
        with tempfile.TemporaryDirectory(prefix="gavel-scale-") as tmp:
            rows += run_workers(workers, jobs, args, Path(tmp))
    if args.out:
        Path(args.out).write_text(json.dumps(rows, indent=1, default=float))
    return 0


if __name__ == "__main__":
    sys.exit(main())
