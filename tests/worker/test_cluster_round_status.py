"""A round policy on loopback: `gavel-ng status` shows what it decided for the round (job -> worker type x
GPUs), live and from the state directory, and a scheduler restart keeps its history (the service each
job attained), which it logs as restored."""

from __future__ import annotations

import json
import re

from loopback_cluster import wait_for

from gavel_ng.cli import main

JOBS = [
    {"job_type": "ResNet-18 (batch size 32)", "steps": 4000, "size": "tiny", "name": "a"},
    {"job_type": "Recommendation (batch size 512)", "steps": 12000, "size": "tiny", "name": "b"},
    {"job_type": "ResNet-18 (batch size 16)", "steps": 4000, "size": "tiny", "name": "c"},
]


def _status(capsys, *args: str) -> str:
    assert main(["status", *args]) == 0
    return capsys.readouterr().out


def _decision_rows(text: str) -> dict[int, tuple[str, int]]:
    lines = text.split("this round's decision", 1)[1].splitlines()[2:]
    return {int(m[1]): (m[2], int(m[3])) for m in (re.match(r"^\s+(\d+)\s+(\S+)\s+(\d+)$", x) for x in lines) if m}


def test_status_shows_a_round_policys_decision_and_a_restart_keeps_its_history(cluster_factory, tmp_path, capsys):
    cl = cluster_factory(round_seconds=3.0, worker_types=["v100", "k80"], policy="tiresias")
    cl.start(("w-v100", "v100", 1), ("w-k80", "k80", 1))
    live = ["--scheduler", f"127.0.0.1:{cl.port}", "--token-file", str(cl.state / "token")]
    with cl.client() as c:
        ids = c.submit(JOBS)
        wait_for(lambda: sum(j.status == "running" for j in c.jobs()) == 2 and len(c.status().decision) == 2,
                 120, "two jobs running under tiresias")
    out = _status(capsys, *live)
    assert "this round's decision (tiresias decides every round" in out and "no time-share allocation" in out
    rows = _decision_rows(out)
    assert len(rows) == 2 and set(rows) <= set(ids), out          # two GPUs: two of the three jobs
    assert sorted(t for t, _ in rows.values()) == ["k80", "v100"] and {k for _, k in rows.values()} == {1}
    data = json.loads(_status(capsys, *live, "--json"))
    assert data["allocation"] == [] and len(data["decision"]) == 2

    cl.stop_process(cl.scheduler)
    offline = _status(capsys, "--state", str(cl.state))      # what the stopped scheduler last decided
    assert "this round's decision" in offline and len(_decision_rows(offline)) == 2
    cl.start_scheduler()
    log = tmp_path / "scheduler1.log"
    wait_for(lambda: "restored the round history of" in log.read_text(), 30, "no round history restored")
    restored = int(re.search(r"restored the round history of (\d+) jobs", log.read_text())[1])
    assert restored >= 2                                     # the jobs that ran before the restart
    with cl.client() as c:
        wait_for(lambda: len(c.status().decision) == 2, 60, "no decision after the restart")
        for m in ids:
            c.cancel(m)
    text = log.read_text() + (tmp_path / "scheduler0.log").read_text()
    assert "Traceback" not in text and "round failed" not in text
