"""`gavel-ng cancel` with several ids against a real scheduler, `--version`, and commands whose
optional dependencies are missing (one line naming the extra, exit 2, no traceback)."""

from __future__ import annotations

import subprocess
import sys
from importlib.metadata import version

import pytest

import gavel_ng
from gavel_ng.cli import main

# A child interpreter where the named top-level modules cannot be imported, as if never installed:
# a meta-path finder in front of every other one refuses them.
BLOCKED = """
import sys
blocked = set(sys.argv[1].split(","))

class NotInstalled:
    def find_spec(self, name, path=None, target=None):
        if name.partition(".")[0] in blocked:
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None

sys.meta_path.insert(0, NotInstalled())
from gavel_ng.cli import main
sys.exit(main(sys.argv[2:]))
"""


def without(modules: str, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", BLOCKED, modules, *args], capture_output=True, text=True,
                          timeout=120)


@pytest.mark.parametrize("args", [
    ["submit", "jobs.json", "--token-file", "t"],
    ["cancel", "3", "4", "--token-file", "t"],
    ["status", "--token-file", "t"],
    ["scheduler", "--cluster-config", "c.json", "--state", "s"],
    ["worker", "--scheduler", "h:1", "--gpu-type", "v100", "--gpus", "1"],
])
def test_a_command_needing_an_extra_says_so_in_one_line(tmp_path, args):
    (tmp_path / "t").write_text("token\n")
    (tmp_path / "jobs.json").write_text('{"job_type": "ResNet-18 (batch size 32)", "steps": 10}')
    (tmp_path / "c.json").write_text('{"worker_types": ["v100"]}')
    proc = subprocess.run([sys.executable, "-c", BLOCKED, "grpc", *args], capture_output=True, text=True,
                          timeout=120, cwd=tmp_path)
    assert proc.returncode == 2, proc.stderr
    extra = "worker" if args[0] == "worker" else "scheduler"     # a worker runs torch jobs; the rest need no torch
    assert proc.stderr == (f"gavel-ng {args[0]}: needs the '{extra}' extra (missing module grpc): "
                           f"pip install 'gavel-ng[{extra}]'\n")
    assert proc.stdout == ""


def test_commands_without_the_extra_still_run_and_other_errors_still_raise():
    proc = without("grpc,torch,ray", "solve", "--example", "paper_example", "--json")
    assert proc.returncode == 0 and '"allocation"' in proc.stdout, proc.stderr
    proc = without("numpy", "policies")      # not an optional dependency: a real bug, not hidden
    assert proc.returncode != 0 and "Traceback" in proc.stderr and "gavel-ng[" not in proc.stderr


def test_version(capsys):
    with pytest.raises(SystemExit) as exc:
        main(["--version"])
    assert exc.value.code == 0
    out = capsys.readouterr().out.strip()
    assert out == f"gavel-ng {version('gavel-ng')}" and version("gavel-ng") == gavel_ng.__version__


def test_cancel_several_jobs_reports_each_and_fails_if_any_failed(tmp_path, capsys):
    from gavel_ng.protocol.client import SchedulerClient
    from gavel_ng.protocol.jobspec import JobSpec
    from gavel_ng.runtime.config import ClusterConfig
    from gavel_ng.runtime.service import SchedulerService

    svc = SchedulerService(ClusterConfig(round_seconds=2.0), tmp_path / "state", port=0, bind="127.0.0.1")
    svc.start()
    try:
        with SchedulerClient(f"127.0.0.1:{svc.port}", token=svc.secret) as c:
            a, b, keep = c.submit([JobSpec("ResNet-18 (batch size 32)", steps=1000, size="tiny")] * 3)
        conn = ["--scheduler", f"127.0.0.1:{svc.port}", "--token-file", str(tmp_path / "state" / "token")]

        assert main(["cancel", str(a), str(b), *conn]) == 0
        assert capsys.readouterr().out.splitlines() == [f"{a} cancelled", f"{b} cancelled"]

        assert main(["cancel", str(a), "999", str(b), *conn]) == 2       # 999: no such job
        out = capsys.readouterr()
        assert out.out.splitlines() == [f"{a} cancelled", f"{b} cancelled"]   # finished jobs keep their status
        assert out.err.strip() == "gavel-ng cancel: job 999: error: NOT_FOUND: unknown job 999"

        with SchedulerClient(f"127.0.0.1:{svc.port}", token=svc.secret) as c:
            status = {j.job_id: j.status for j in c.jobs()}
        assert status[a] == status[b] == "cancelled" and status[keep] != "cancelled"
    finally:
        svc.stop(grace=0.1)


def test_cancel_stops_at_an_unreachable_scheduler(tmp_path, capsys):
    token = tmp_path / "token"
    token.write_text("x\n")
    # a port nothing listens on: the first id fails UNAVAILABLE, the others are not tried one by one
    rc = main(["cancel", "1", "2", "3", "--scheduler", "127.0.0.1:1", "--token-file", str(token)])
    err = capsys.readouterr().err.splitlines()
    assert rc == 2 and err[0].startswith("gavel-ng cancel: job 1: error: UNAVAILABLE")
    assert err[1:] == ["gavel-ng cancel: 2 more job(s) not tried"]
