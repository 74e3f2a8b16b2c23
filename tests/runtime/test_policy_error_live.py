"""A policy that fails on a live cluster (issue 37): the jobs keep running on equal shares, and the
failure is loud: `gavel-ng status` shows the error, `gavel_policy_errors` counts it, the log has it
as an ERROR. When the policy solves again, status says nothing more. Real scheduler, real worker."""

from __future__ import annotations

import logging
import textwrap

import pytest
from test_hostile_numbers import SLEEPER, _daemon, _wait

from gavel_ng.policies.plugins import load_plugins
from gavel_ng.protocol.client import SchedulerClient
from gavel_ng.runtime.config import ClusterConfig
from gavel_ng.runtime.service import SchedulerService

PLUGIN = textwrap.dedent('''
    import gavel_ng as g


    @g.policy("three_is_a_crowd", "max-min fairness that breaks at three jobs")
    def three_is_a_crowd(p):
        if p.num_jobs >= 3:
            raise RuntimeError("three jobs: not handled")
        return p.maximize_min(p.normalized_thr)
''')


@pytest.mark.slow
def test_a_policy_error_at_a_solve_is_shown_counted_and_the_jobs_run_on(tmp_path, clean_registry, caplog):
    plugin = tmp_path / "crowd.py"
    plugin.write_text(PLUGIN)
    load_plugins([str(plugin)])
    config = ClusterConfig(policy="three_is_a_crowd", plugins=[str(plugin)], round_seconds=5.0,
                           heartbeat_seconds=0.5).resolved()
    svc = SchedulerService(config, tmp_path / "state", port=0, bind="127.0.0.1")   # the probe's 2 jobs pass
    svc.start()
    daemon = _daemon(svc, tmp_path)
    try:
        with caplog.at_level(logging.ERROR, logger="gavel_ng"), SchedulerClient(f"127.0.0.1:{svc.port}",
                                                                                token=svc.secret) as c:
            jobs = [c.submit(SLEEPER)[0] for _ in range(3)]
            _wait(lambda: svc.policy_error is not None, "the policy never failed")
            note = c.status().round_note
            assert note.startswith("POLICY ERROR (equal shares until it solves again): policy='three_is_a_crowd': "
                                   f"failed at {plugin}:") and "RuntimeError: three jobs: not handled" in note
            _wait(lambda: any(svc.state.jobs[m].live is not None for m in jobs), "no job ran on equal shares")
            assert svc.metrics.registry.get_sample_value("gavel_policy_errors_total") >= 1
            assert any(r.levelname == "ERROR" and "three_is_a_crowd" in r.getMessage() for r in caplog.records)
            c.cancel(jobs[-1])
            _wait(lambda: svc.policy_error is None, "the policy never solved again with two jobs")
            assert "POLICY ERROR" not in c.status().round_note
    finally:
        daemon.stop()
        svc.stop(grace=0.1)
