"""GavelIterator without a cluster: step counting, atomic checkpoints, leases from the environment."""

from __future__ import annotations

import json
import time

from gavel_ng.iterator import GavelIterator, JobEnv
from gavel_ng.iterator import checkpoint as ckpt


class Model:
    """Stands in for weights: a counter that save/load round-trip through a file."""

    def __init__(self):
        self.value = 0

    def save(self, path):
        (path / "w.json").write_text(json.dumps(self.value))

    def load(self, path):
        self.value = json.loads((path / "w.json").read_text())


def run(tmp_path, max_steps, loader=range(7)):
    m = Model()
    it = GavelIterator(list(loader), m.load, m.save, max_steps=max_steps, checkpoint_dir=tmp_path)
    seen = []
    for batch in it:
        m.value += 1
        seen.append(batch)
    return it, m, seen


def test_standalone_runs_across_epochs_and_resumes(tmp_path):
    it, m, seen = run(tmp_path, 10)
    assert it.step == 10 and it.done and m.value == 10 and seen == [0, 1, 2, 3, 4, 5, 6, 0, 1, 2]
    it, m, seen = run(tmp_path, 25)
    assert it.start_step == 10 and it.step == 25 and m.value == 25 and len(seen) == 15
    assert ckpt.latest(tmp_path)[0] == 25
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ckpt-000000000010", "ckpt-000000000025"]


def test_without_steps_it_is_one_pass(tmp_path):
    it, m, seen = run(tmp_path, None, range(4))
    assert seen == [0, 1, 2, 3] and it.step == 4


def test_a_half_written_checkpoint_is_ignored(tmp_path):
    run(tmp_path, 5)
    tmp = ckpt.begin(tmp_path, 9)                      # a save that was killed before its commit
    (tmp / "w.json").write_text("999")
    assert ckpt.latest(tmp_path)[0] == 5
    it, m, _ = run(tmp_path, 6)
    assert it.start_step == 5 and m.value == 6


def test_under_a_worker_it_stops_at_the_lease_and_reports(tmp_path, monkeypatch):
    result = tmp_path / "result.json"
    env = {"GAVEL_NG_SCHEDULER": "127.0.0.1:1", "GAVEL_NG_JOB_ID": "3", "GAVEL_NG_ATTEMPT": "1",
           "GAVEL_NG_JOB_TOKEN": "job:3:1:x", "GAVEL_NG_CHECKPOINT_DIR": str(tmp_path / "ck"),
           "GAVEL_NG_STEPS": "1000000", "GAVEL_NG_LEASE_DEADLINE": repr(time.time() + 0.5),
           "GAVEL_NG_RESULT_FILE": str(result)}
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    assert JobEnv.from_env().job_id == 3
    m = Model()
    start = time.monotonic()
    it = GavelIterator(range(100), m.load, m.save)
    for _ in it:                                       # the scheduler is unreachable: no renewal
        m.value += 1
        time.sleep(0.01)
    assert 0.3 < time.monotonic() - start < 5 and not it.done
    out = json.loads(result.read_text())
    assert out["step"] == it.step == m.value and out["steps_run"] == it.step and not out["done"]
    assert ckpt.latest(tmp_path / "ck")[0] == it.step
