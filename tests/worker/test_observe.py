"""What an operator sees of a real loopback cluster: Prometheus metrics scraped over HTTP, one
scheduler log line per event (checked against the store's events), and `gavel-ng logs`."""

from __future__ import annotations

import re
import signal
import socket
import subprocess
import sys
import urllib.request

from loopback_cluster import ENV, wait_for
from prometheus_client.parser import text_string_to_metric_families

TINY = {"job_type": "ResNet-18 (batch size 32)", "size": "tiny"}
CRASH = [sys.executable, "-c", "import sys; print('boom', flush=True); sys.exit(3)"]
# 50 steps a second whatever the machine: 400 steps need more than one 4 s round, so the job is
# preempted at least once (150 fitted in one round once the iterator stopped importing torch)
PACED = [sys.executable, "-c",
         "import time\nfrom pathlib import Path\nfrom gavel_ng.iterator import GavelIterator\n"
         "print('paced job', flush=True)\n"
         "for _ in GavelIterator(range(10**9), lambda p: None, lambda p: Path(p, 'w').write_text('1')):\n"
         "    time.sleep(0.02)\n"]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def scrape(port: int) -> dict[tuple[str, tuple], float]:
    """{(sample name, sorted labels): value} from a real scrape of /metrics."""
    text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10).read().decode()
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for fam in text_string_to_metric_families(text) for s in fam.samples}


def logs_cmd(cl, *args: str, timeout: float = 60) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "gavel_ng", "logs", *args, "--state", str(cl.state)], env=ENV,
                          capture_output=True, text=True, timeout=timeout)


def test_metrics_event_lines_and_job_logs(cluster_factory):
    port = _free_port()
    cl = cluster_factory(round_seconds=4.0, max_failures=1)
    cl.start_scheduler("--metrics-port", str(port), "--no-lease-renewals")   # every round end preempts
    cl.start_worker("w-v100", "v100", 1)
    cl.wait_workers(1)
    with cl.client() as c:
        [job] = c.submit({**TINY, "steps": 400, "command": PACED})   # 8 s: more than one 4 s round
        logs = cl.job_dir(job) / "logs"
        wait_for(lambda: c.jobs()[0].status == "running" and any(logs.glob("*.log")), 60, "the job never ran")
        follow = logs_cmd(cl, str(job), "--follow")       # ends with the attempt, at the latest its round end
        assert follow.returncode == 0, follow.stderr
        assert re.search(r"^\[rank 0\] ", follow.stdout, re.M), follow.stdout
        [done] = c.wait([job], timeout=240)
        [crash] = c.submit({**TINY, "steps": 10, "command": CRASH})
        c.wait([crash], timeout=120)
        m = scrape(port)
        assert done.status == "done" and c.jobs()[1].status == "failed"
        assert m[("gavel_jobs", (("state", "done"),))] == 1 and m[("gavel_jobs", (("state", "failed"),))] == 1
        assert m[("gavel_queue_length", ())] == 0 and m[("gavel_workers_alive", ())] == 1
        assert m[("gavel_gpus_total", (("gpu_type", "v100"),))] == 1
        assert m[("gavel_gpus_total", (("gpu_type", "k80"),))] == 0
        assert m[("gavel_gpus_busy", (("gpu_type", "v100"),))] == 0
        assert m[("gavel_launches_total", ())] == done.attempts + 1 >= 2
        ended = [e for e in cl.events("end") if e["status"] == "ended"]
        assert m[("gavel_preemptions_total", ())] == len(ended) >= 1
        assert m[("gavel_failures_total", (("kind", "crashed"),))] == 1
        assert m[("gavel_failures_total", (("kind", "failed"),))] == 1
        assert m[("gavel_round_duration_seconds_count", ())] >= 1 and m[("gavel_solve_duration_seconds_count", ())] >= 1
        assert m[("gavel_store_write_failures_total", ())] == 0
        # the paper's metrics: one job done (its JCT), two started (queueing delays), its GPU time on v100
        assert m[("gavel_job_completion_seconds_count", ())] == 1
        assert m[("gavel_queueing_delay_seconds_count", ())] == 2
        assert m[("gavel_gpu_hours_total", (("gpu_type", "v100"),))] > 0
        assert m[("gavel_gpu_hours_total", (("gpu_type", "k80"),))] == 0

        out = logs_cmd(cl, str(job), "--attempt", "1")
        assert out.returncode == 0 and out.stdout.startswith("[rank 0] "), out
        out = logs_cmd(cl, str(crash), "--rank", "0")
        assert out.returncode == 0 and "boom" in out.stdout.splitlines(), out
        out = logs_cmd(cl, str(job), "--attempt", "99")
        listed = range(1, min(done.attempts, 20) + 1)         # a long list is cut at 20 (a loaded machine relaunches)
        attempts = ", ".join(map(str, listed)) + (f" ... ({done.attempts} in all)" if done.attempts > 20 else "")
        assert out.returncode == 2 and f"job {job} has logs of attempts {attempts}" in out.stderr, out.stderr
        assert out.stderr.count("\n") == 1 and "--attempt" in out.stderr
        out = logs_cmd(cl, "77")
        assert out.returncode == 2 and f"jobs with logs: {job}, {crash}" in out.stderr, out.stderr

        # a worker killed under a running job: its attempt lost, the worker declared dead; then a cancel
        [long] = c.submit({**TINY, "steps": 100_000})
        # running, and started on the worker (its log exists): killed before RunJob arrives, the worker would be
        # declared dead for the refused RunJob instead of its missed heartbeats
        long_logs = cl.job_dir(long) / "logs"
        wait_for(lambda: c.jobs()[2].status == "running" and any(long_logs.glob("*.log")), 60,
                 "the long job never ran")
        cl.stop_process(cl.workers["w-v100"], signal.SIGKILL)
        wait_for(lambda: cl.events("worker_down"), 30, "worker not declared dead")
        c.cancel(long)
        m = scrape(port)
        assert m[("gavel_workers_alive", ())] == 0 and m[("gavel_gpus_total", (("gpu_type", "v100"),))] == 0
        assert m[("gavel_failures_total", (("kind", "lost"),))] == len(cl.events("lost")) == 1
        assert m[("gavel_jobs", (("state", "cancelled"),))] == 1

    text = (cl.root / "scheduler0.log").read_text()

    def count(pattern: str) -> int:
        return len(re.findall(pattern, text, re.M))

    [up] = cl.events("worker_up")
    assert count(rf"worker {up['worker_id']} registered: 1 x v100 at 127\.0\.0\.1:\d+$") == 1
    assert count(rf"worker {up['worker_id']} \(\S+\) declared dead: no heartbeat") == 1
    for e in cl.events("launch"):
        assert count(rf"job {e['job_id']} attempt {e['attempt']} launched on v100 {up['worker_id']}:0$") == 1
    for e in ended:
        assert count(rf"job {e['job_id']} attempt {e['attempt']} preempted at step \d+") == 1
    assert count(r"attempt \d+ preempted") == len(ended)
    assert count(rf"job {job} finished at step 400 of 400$") == 1
    assert count(rf"job {crash} attempt 1 failed \(1 of 1 allowed failures\): attempt 1 on \S+: exit status 3; "
                 r"its log ends: boom$") == 1
    assert count(rf"job {crash} failed at step") == 1
    assert count(rf"job {long} attempt \d+ lost: worker \S+ lost$") == 1
    assert count(rf"job {long} cancelled at step") == 1
