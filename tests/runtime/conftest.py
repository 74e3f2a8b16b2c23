"""A scheduler service in this process, serving gRPC on loopback (round loop running)."""

from __future__ import annotations

import pytest

from gavel_ng.runtime.config import ClusterConfig
from gavel_ng.runtime.service import SchedulerService


@pytest.fixture
def service(tmp_path):
    """Rounds of 1 s, its state under tmp_path/state; modules may define their own."""
    svc = SchedulerService(ClusterConfig(round_seconds=1.0), tmp_path / "state", port=0, bind="127.0.0.1")
    svc.start()
    yield svc
    svc.stop(grace=0.1)
