"""A user's own job on loopback, next to the paper's: its own class (measured in its own row, the
ResNet-18 row untouched), started at once on the idle GPU it arrives to (backfill on arrival),
live progress between renewals, and `gavel-ng report`'s JCT and queueing delay of every finished
job, checked against the store's events, with the simulator's JCT CDF plot."""

from __future__ import annotations

import csv
import io
import subprocess
import sys
import time

import matplotlib.image
from loopback_cluster import ENV, wait_for

from gavel_ng.cli.status_cmd import format_status
from gavel_ng.runtime.measured import _fold

R18 = "ResNet-18 (batch size 32)"
# a user's script: a small MLP on synthetic data, paced to about 80 steps/s, with GavelIterator (4 lines)
SCRIPT = """
import time
from pathlib import Path
import torch
from gavel_ng.iterator import GavelIterator

torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 1))
opt = torch.optim.SGD(model.parameters(), lr=0.02)
x = torch.randn(256, 16)
y = x.sum(1, keepdim=True)

def save(path):
    torch.save({"model": model.state_dict(), "opt": opt.state_dict()}, Path(path) / "mlp.pt")

def load(path):
    state = torch.load(Path(path) / "mlp.pt")
    model.load_state_dict(state["model"])
    opt.load_state_dict(state["opt"])

it = GavelIterator(range(10**9), load, save)
for _ in it:
    loss = ((model(x) - y) ** 2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
    time.sleep(0.01)
    if it.step % 100 == 0:
        print("step", it.step, "loss", round(loss.item(), 4), flush=True)
"""


def test_own_class_beside_resnet18_and_the_report(cluster_factory, tmp_path):
    (tmp_path / "code").mkdir()
    (tmp_path / "code" / "train.py").write_text(SCRIPT)
    cl = cluster_factory(round_seconds=20.0, prices={"v100": 2.5})
    cl.start(("w-v100", "v100", 2))
    mine = {"job_type": "my-mlp", "steps": 400, "name": "mlp", "user": "ann",
            "command": [sys.executable, "train.py"], "working_dir": str(tmp_path / "code")}
    with cl.client() as c:
        [r18] = c.submit({"job_type": R18, "steps": 200, "size": "tiny", "name": "r18", "user": "bob"})
        wait_for(lambda: c.jobs(ids=[r18])[0].status == "running", 30, "the first job never started")
        [job] = c.submit(mine)            # one GPU idles: it starts now, not at the round's end (20 s)
        wait_for(lambda: c.jobs(ids=[job])[0].status == "running", 6, "the arrival waited for the next round")
        # live progress before any renewal of the job (the iterator reports its step between them)
        [seen] = wait_for(lambda: [j for j in c.jobs(ids=[job]) if j.steps_live > 0 and j.status == "running"], 30,
                          "no live progress")
        t_seen = time.time()
        renewed = [e["steps"] for e in cl.events("renew") if e["job_id"] == job and e["ts"] <= t_seen]
        assert seen.steps_live > max(renewed, default=0)      # so a progress report said it, not a renewal
        [r18b] = c.submit({"job_type": R18, "steps": 100, "size": "tiny", "name": "r18b", "user": "bob"})
        done = c.wait([r18, job, r18b], timeout=120)
        status = c.status()
    assert all(j.status == "done" and j.steps_done == j.steps_total for j in done), done
    [arrival] = [e for e in cl.events("backfill") if e["job_id"] == job]
    assert arrival["why"] == "arrival"
    assert "step 400" in "".join(cl.rank_logs(job).values())

    # its own row, measured; ResNet-18's row is exactly what ResNet-18 jobs measured
    measures = [e for e in cl.events("measure") if e.get("partner") is None]
    rows = _throughput_rows(cl)
    assert ("my-mlp", 1, "v100") in rows and any(e["job_id"] == job for e in measures)
    expect = None
    for e in measures:
        if e["job_id"] in (r18, r18b):
            expect = _fold(expect, e["steps"] / e["seconds"])
    assert expect is not None and rows[(R18, 1, "v100")] == (expect[0], expect[1])
    classes = {c.job_type: c for c in status.classes}
    assert "my-mlp" not in classes or classes["my-mlp"].sources["v100"] == "measured"
    assert "v100" in format_status(status)

    # gavel-ng report: every finished job's JCT and queueing delay, as the events say
    out = _report(cl, "--format", "csv", "--plot", str(tmp_path / "jct.png"))
    got = {int(r["job_id"]): r for r in csv.DictReader(io.StringIO(out))}
    assert set(got) == {r18, job, r18b}
    for m in got:
        submit = next(e["ts"] for e in cl.events("submit") if e["job_id"] == m)
        start = next(e["ts"] for e in cl.events("launch") if e["job_id"] == m)
        end = next(e["ts"] for e in cl.events("finish") if e["job_id"] == m)
        assert abs(float(got[m]["jct_s"]) - (end - submit)) < 0.05, got[m]
        assert abs(float(got[m]["queueing_delay_s"]) - (start - submit)) < 0.05, got[m]
        assert float(got[m]["gpu_hours_v100"]) > 0 and float(got[m]["cost_usd"]) > 0
    assert float(got[job]["queueing_delay_s"]) < 6 and got[job]["class"] == "my-mlp" and got[job]["user"] == "ann"
    png = matplotlib.image.imread(tmp_path / "jct.png")
    assert png.shape[0] > 100 and png.shape[1] > 100 and png[..., :3].std() > 0.01
    by_user = {r["user"]: r for r in csv.DictReader(io.StringIO(_report(cl, "--format", "csv", "--by", "user")))}
    assert by_user["bob"]["jobs"] == "2" and by_user["ann"]["done"] == "1"
    table = _report(cl)
    assert f"{job}  mlp" in table or "my-mlp" in table
    print(table)


def _report(cl, *args: str) -> str:
    out = subprocess.run([sys.executable, "-m", "gavel_ng", "report", "--state", str(cl.state), *args], env=ENV,
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    return out.stdout


def _throughput_rows(cl) -> dict:
    import sqlite3

    db = sqlite3.connect(f"file:{cl.state / 'gavel.sqlite'}?mode=ro", uri=True)
    try:
        return {(t, sf, w): (v, n) for t, sf, w, cons, v, n in db.execute(
            "SELECT job_type, scale_factor, worker_type, consolidated, steps_per_s, samples FROM throughputs")
            if cons}
    finally:
        db.close()
