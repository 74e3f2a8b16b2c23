"""An adaptive job on a loopback cluster under `goodput`: resized from 1 to 2 GPUs when the other
job finishes, its batch raised, its loss still falling; kill -9 of its worker loses nothing; a
restarted scheduler keeps its reports.

Real processes throughout: scheduler, worker daemons, and torch jobs on the CPU (the adaptive
one is gavel_ng.examples.adaptive_job, whose `--compute` sleeps stand in for GPU time, so that
two ranks on this 2-core machine scale as two GPUs would).
"""

from __future__ import annotations

import signal
import sys

from loopback_cluster import wait_for, worker_name

from gavel_ng.policies.rounds.configurations import STARVED
from gavel_ng.runtime.status import read_state_dir

ADAPTIVE = {"job_type": "ResNet-18 (batch size 32)", "steps": 6000, "name": "ada",
            "command": [sys.executable, "-m", "gavel_ng.examples.adaptive_job", "--compute", "0.02,0.0002"],
            "adaptive": {"init_batch": 32, "max_batch": 512, "max_gpus": 2}}
FIXED = {"job_type": "ResNet-18 (batch size 32)", "steps": 600, "size": "tiny", "name": "fixed"}


def _on_two_gpus(c, job_id, after_step):
    j = next(j for j in c.jobs() if j.job_id == job_id)
    return j if j.status == "running" and j.placement.count(",") == 1 and j.steps_live > after_step else None


def test_adaptive_job_grows_keeps_learning_and_survives_kill9(cluster_factory):
    # Pollux's rule for a waiting job (every job that fits starts), so that both start on one GPU each
    cl = cluster_factory(round_seconds=8.0, worker_types=["v100"], policy="goodput", realloc_delay_seconds=1.0,
                         policy_options={"waiting": STARVED})
    cl.start(("w1", "v100", 2))
    with cl.client() as c:
        ada, fixed = c.submit([ADAPTIVE, FIXED])

        # 1. both start on one GPU each; when the fixed job is done the adaptive one grows to both
        def grew():
            return [e for e in cl.events("resize") if e["job_id"] == ada and e["after"] == ["v100", 2]]

        resize = wait_for(grew, 240, "the adaptive job was never resized to 2 GPUs")[0]
        assert resize["before"] == ["v100", 1]
        assert next(j for j in c.jobs() if j.job_id == fixed).status == "done"
        first = [e for e in cl.events("launch") if e["job_id"] == ada][0]
        assert len(first["placement"]) == 1, "the adaptive job should have shared the GPUs at first"

        # 2. kill -9 its worker while it trains on 2 GPUs; a replacement joins
        wait_for(lambda: _on_two_gpus(c, ada, resize["steps"] + 200), 120, "never trained on 2 GPUs")
        w = next(w for w in c.status().workers if w.alive)
        name = worker_name(cl, w.worker_id)
        cl.workers[name].send_signal(signal.SIGKILL)
        cl.workers[name].wait(10)
        cl.start_worker("w2", "v100", 2)
        done = c.wait([ada, fixed], timeout=400)
        assert all(j.status == "done" for j in done), done
        assert done[0].steps_done >= ADAPTIVE["steps"]
        assert any(e["kind"] == "lost" and e["job_id"] == ada for e in cl.events())
        report = next(j for j in c.jobs() if j.job_id == ada).adaptive
    assert report is not None and report.resizes >= 1 and report.batch > 32 and report.phi is not None
    assert report.params is not None and len(report.params) == 7

    # 3. what the job learnt: larger batches on 2 GPUs, and the loss kept falling
    log = [e for e in cl.train_log(ada) if "loss" in e]
    two = [e for e in log if e["gpus"] == 2]
    assert two, "no optimizer step ran on 2 GPUs"
    assert max(e["batch"] for e in two) > ADAPTIVE["adaptive"]["init_batch"]
    assert log[-1]["loss"] < two[0]["loss"] < log[0]["loss"]
    k = min(5, len(two) // 2)
    assert sum(e["loss"] for e in two[-k:]) < sum(e["loss"] for e in two[:k])
    loads = [e for e in cl.train_log(ada) if e.get("event") == "load"]
    assert any(e["gpus"] == 2 for e in loads), "the resize did not restore the checkpoint on 2 GPUs"

    # 4. the reports are in the state store: a restarted scheduler (and status --state) shows them
    cl.stop_process(cl.scheduler)
    stored = next(j for j in read_state_dir(cl.state).jobs if j.job_id == ada).adaptive
    assert stored == report
    cl.start_scheduler()
    with cl.client() as c:
        assert next(j for j in c.jobs() if j.job_id == ada).adaptive == report
