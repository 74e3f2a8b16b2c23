"""One scheduler for both kinds of policy: a user's round policy and a user's allocation policy, each
given to the scheduler as a plugin in the cluster config, run jobs to the end on loopback; a round
policy with space sharing is refused naming the field."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def _paced(job_type: str, steps: int, name: str, scale_factor: int = 1) -> dict:
    """A real job process whose steps take the table's time (gavel_ng.worker.paced_job): the policy's
    kind is what these tests check, so they spare the CPU a torch import per launch."""
    return {"job_type": job_type, "steps": steps, "name": name, "scale_factor": scale_factor,
            "command": [sys.executable, "-m", "gavel_ng.worker.paced_job", "--table", "gavel-osdi20",
                        "--job-type", job_type, "--scale-factor", str(scale_factor)]}


# at the table's rates each takes under two 6 s rounds on either type
JOBS = [_paced("ResNet-18 (batch size 32)", 60, "a"), _paced("Recommendation (batch size 512)", 150, "b"),
        _paced("ResNet-18 (batch size 16)", 200, "c", scale_factor=2)]


def _run(cluster_factory, tmp_path, policy: str, plugin: str, **config) -> None:
    cl = cluster_factory(round_seconds=6.0, worker_types=["v100", "k80"], policy=policy,
                         plugins=[str(EXAMPLES / plugin)], **config)
    cl.start(("w-v100", "v100", 2), ("w-k80", "k80", 1))
    with cl.client() as c:
        assert c.status().policy == policy
        ids = c.submit(JOBS)
        jobs = c.wait(ids, timeout=300)
    for job, spec in zip(jobs, JOBS):
        assert job.status == "done" and job.steps_done == spec["steps"], job
    launches = cl.events("launch")
    assert {e["job_id"] for e in launches} == set(ids)
    wide = [e for e in launches if e["job_id"] == ids[2]]
    assert all(len(e["placement"]) == 2 for e in wide), wide     # a fixed job runs at its scale factor
    log = (tmp_path / "scheduler0.log").read_text()
    assert "Traceback" not in log and "round failed" not in log


def test_a_plugin_round_policy_runs_jobs_to_the_end(cluster_factory, tmp_path):
    _run(cluster_factory, tmp_path, "speedup_sum", "round_policy.py", policy_options={"minimum": 2.0})


def test_a_plugin_allocation_policy_runs_jobs_to_the_end(cluster_factory, tmp_path):
    _run(cluster_factory, tmp_path, "proportional_fairness", "allocation_policy.py")


@pytest.mark.parametrize("field, value, reason", [
    ("space_sharing", True, "speedup_sum is a round policy: it gives jobs whole GPUs"),
    ("policy_options", {"maximum": 1}, "'maximum': unknown; speedup_sum takes minimum"),
])
def test_the_scheduler_refuses_what_a_plugin_round_policy_cannot_do(tmp_path, capsys, field, value, reason):
    """Checked once the plugin is loaded (the config alone cannot know the policy's kind)."""
    from gavel_ng.cli import main

    config = tmp_path / "cluster.json"
    config.write_text(json.dumps({"worker_types": ["v100"], "policy": "speedup_sum", field: value,
                                  "plugins": [str(EXAMPLES / "round_policy.py")]}))
    assert main(["scheduler", "--cluster-config", str(config), "--state", str(tmp_path / "state"), "--port", "0",
                 "--bind", "127.0.0.1"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith(f"gavel-ng scheduler: error: cluster-config.{field}=") and err.endswith(reason), err
