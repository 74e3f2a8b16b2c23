"""The scheduler service solves a user's policy by name: `--plugin FILE` or the config's "plugins"."""

from __future__ import annotations

import json

import pytest

from gavel_ng.errors import InputError
from gavel_ng.runtime.config import ClusterConfig

PROPORTIONAL = '''\
import cvxpy as cp
import gavel_ng as g


@g.policy("proportional", "maximize sum_m log(sf_m thr_m / thr_equal_m)")
def proportional(p):
    return cp.Maximize(cp.sum(cp.log(p.normalized_thr.cvx)))
'''
JOBS = [
    {"job_type": "ResNet-18 (batch size 32)", "steps": 60, "size": "tiny", "name": "a"},
    {"job_type": "Recommendation (batch size 512)", "steps": 200, "size": "tiny", "name": "b"},
]


def test_scheduler_with_plugin_runs_jobs_under_the_users_policy(cluster_factory, tmp_path):
    plugin = tmp_path / "fair_policies.py"
    plugin.write_text(PROPORTIONAL)
    cl = cluster_factory(round_seconds=3.0)
    cl.start_scheduler("--plugin", str(plugin), "--policy", "proportional")
    cl.start_worker("w-v100", "v100", 1)
    cl.start_worker("w-k80", "k80", 1)
    cl.wait_workers(2)
    with cl.client() as c:
        assert c.status().policy == "proportional"
        ids = c.submit(JOBS)
        jobs = c.wait(ids, timeout=120)
    for job, spec in zip(jobs, JOBS):
        assert job.status == "done" and job.steps_done == spec["steps"], job
    assert cl.events("launch")
    log = (tmp_path / "scheduler0.log").read_text()
    assert "plugin " in log and "proportional" in log and "Traceback" not in log


def test_config_plugins_are_relative_to_the_config(tmp_path):
    (tmp_path / "conf").mkdir()
    path = tmp_path / "conf" / "cluster.json"
    path.write_text(json.dumps({"worker_types": ["v100"], "policy": "proportional",
                                "plugins": ["policies/fair.py", "my_pkg.policies"]}))
    config = ClusterConfig.load(path)
    assert config.plugins == (str(tmp_path / "conf" / "policies" / "fair.py"), "my_pkg.policies")
    path.write_text(json.dumps({"plugins": "fair.py"}))
    with pytest.raises(InputError, match="cluster-config.plugins"):
        ClusterConfig.load(path)


def test_scheduler_config_plugin_errors_name_the_key(tmp_path, capsys):
    from gavel_ng.cli import main

    (tmp_path / "empty.py").write_text("X = 1\n")
    config = tmp_path / "cluster.json"
    config.write_text(json.dumps({"worker_types": ["v100"], "policy": "proportional", "plugins": ["empty.py"]}))
    assert main(["scheduler", "--cluster-config", str(config), "--state", str(tmp_path / "state"), "--port", "0",
                 "--bind", "127.0.0.1"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith(f"gavel-ng scheduler: error: cluster-config.plugins='{tmp_path / 'empty.py'}': registers "
                          "no policy (decorate a function with @gavel_ng.policy(\"NAME\", ...), or a round policy")
    assert "@gavel_ng.round_policy" in err and len(err.splitlines()) == 1
