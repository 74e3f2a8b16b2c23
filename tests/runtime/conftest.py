"""Scheduler services in this process: `service` (serving gRPC on loopback, round loop running)
and `make_service` (not started: tests drive the planner themselves)."""

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


@pytest.fixture
def make_service(tmp_path):
    """make(state="state", **config): a service on tmp_path/state (the same name again: a restart)."""
    made = []

    def make(state: str = "state", **config) -> SchedulerService:
        svc = SchedulerService(ClusterConfig(**{"round_seconds": 1.0, **config}), tmp_path / state, port=0,
                               bind="127.0.0.1")
        made.append(svc)
        return svc

    yield make
    for svc in made:
        svc.stop(grace=0.1)
