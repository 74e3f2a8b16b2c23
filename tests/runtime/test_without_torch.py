"""The scheduler installs and runs without torch (its `scheduler` extra has none): it starts, serves
gRPC and accepts a built-in job, whose type it knows from `gavel_ng.jobtypes`, plain data."""

from __future__ import annotations

import subprocess
import sys

import pytest
from test_imports import import_graph

# A child interpreter in which `import torch` fails, as if it were not installed; it starts a scheduler
# on loopback, submits one built-in job and one the built-in runner cannot run, and prints the replies.
SCHEDULER_WITHOUT_TORCH = """
import sys
sys.modules["torch"] = None
from pathlib import Path
from gavel_ng.protocol.client import SchedulerClient, SchedulerError
from gavel_ng.protocol.jobspec import JobSpec
from gavel_ng.runtime.config import ClusterConfig
from gavel_ng.runtime.service import SchedulerService

svc = SchedulerService(ClusterConfig(round_seconds=1.0), Path(sys.argv[1]), port=0, bind="127.0.0.1")
svc.start()
try:
    with SchedulerClient(f"127.0.0.1:{svc.port}", token=svc.secret) as c:
        [job] = c.submit(JobSpec("ResNet-18 (batch size 32)", steps=100))
        print("accepted", job, c.status().jobs[0].job_type)
        try:
            c.submit(JobSpec("my model", steps=100))
        except SchedulerError as exc:
            print("refused", exc.code)
finally:
    svc.stop(grace=0.1)
print("torch loaded:", sorted(m for m, v in sys.modules.items() if v is not None and m.partition(".")[0] == "torch"))
"""


def reach(graph: dict[str, dict[str, int]], start: str) -> set[str]:
    """Every package module that importing `start` can run (its imports' parent packages included)."""
    seen, todo = set(), [start]
    while todo:
        m = todo.pop()
        if m in seen or m not in graph:
            continue
        seen.add(m)
        parts = m.split(".")
        todo += [".".join(parts[:i]) for i in range(1, len(parts))] + list(graph[m])
    return seen


def test_the_scheduler_imports_nothing_that_needs_torch():
    graph, _ = import_graph()
    for entry in ("gavel_ng.runtime.service", "gavel_ng.cli.scheduler_cmd"):
        torch_parts = sorted(m for m in reach(graph, entry) if m.startswith("gavel_ng.workloads"))
        assert torch_parts == [], f"{entry} reaches the PyTorch models: {torch_parts}"


@pytest.mark.slow
def test_a_scheduler_without_torch_accepts_a_built_in_job(tmp_path):
    proc = subprocess.run([sys.executable, "-c", SCHEDULER_WITHOUT_TORCH, str(tmp_path / "state")],
                          capture_output=True, text=True, timeout=180)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0].startswith("accepted ") and lines[0].endswith(" ResNet-18 (batch size 32)"), proc.stdout
    assert lines[1:] == ["refused INVALID_ARGUMENT", "torch loaded: []"], proc.stdout
