"""Rules and admission on loopback: a labelled worker, a job that needs its label, a user's job quota.

The scheduler's config carries the rules (admission, quota); a worker says its labels with
`--label`. The job that needs `nvlink` must only ever launch on that worker; a second job of the
same user is refused at submission, and `gavel-ng submit` exits 2 naming the quota.
"""

from __future__ import annotations

import json
import subprocess
import sys

from loopback_cluster import ENV, check_training, wait_for, worker_name

LABELLED = {"job_type": "ResNet-18 (batch size 32)", "steps": 120, "size": "tiny", "name": "nv",
            "labels": ["nvlink"], "user": "alice", "entity": "vision", "allowed_types": ["v100"]}
SECOND = {"job_type": "ResNet-18 (batch size 32)", "steps": 50, "size": "tiny", "name": "more", "user": "alice"}


def _submit(cl, tmp_path, job: dict) -> subprocess.CompletedProcess:
    path = tmp_path / f"{job['name']}.json"
    path.write_text(json.dumps(job))
    return subprocess.run([sys.executable, "-m", "gavel_ng", "submit", str(path), "--scheduler",
                           f"127.0.0.1:{cl.port}", "--token-file", str(cl.state / "token")],
                          capture_output=True, text=True, env=ENV, timeout=60)


def test_labels_and_admission_on_a_loopback_cluster(cluster_factory, tmp_path):
    cl = cluster_factory(round_seconds=4.0, worker_types=["v100"],
                         rules={"admission": {"max_jobs_per_user": 1}, "quotas": {"vision": {"v100": 1}}},
                         entities={"vision": {"weight": 2}})
    cl.start_scheduler()
    cl.start_worker("w-plain", "v100", 1)
    cl.start_worker("w-nvlink", "v100", 1, "--label", "nvlink")
    cl.wait_workers(2)
    first = _submit(cl, tmp_path, LABELLED)
    assert first.returncode == 0, first.stderr
    refused = _submit(cl, tmp_path, SECOND)
    assert refused.returncode == 2
    assert "max_jobs_per_user" in refused.stderr and "alice" in refused.stderr
    stranger = _submit(cl, tmp_path, {**SECOND, "name": "x", "user": "bob", "entity": "nobody"})
    assert stranger.returncode == 2 and "jobs[0].entity='nobody'" in stranger.stderr   # not in the config
    job_id = cl.client().jobs()[0].job_id
    wait_for(lambda: cl.client().jobs()[0].status == "done", 120, "the labelled job to finish")
    check_training(cl, job_id, 120)
    launches = [e for e in cl.events("launch") if e["job_id"] == job_id]
    assert launches and all(worker_name(cl, w) == "w-nvlink" for e in launches for w, _ in e["placement"])
    again = _submit(cl, tmp_path, SECOND)            # alice's first job is done: her quota is free again
    assert again.returncode == 0, again.stderr
