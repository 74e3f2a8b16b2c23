"""The built-in trainer on its own: the device it picks and what it records."""

from __future__ import annotations

import json

import pytest

torch = pytest.importorskip("torch")   # the worker extra

from gavel_ng.worker import run_job


def _log(path):
    return [json.loads(line) for line in (path / "train.jsonl").read_text().splitlines()]


def test_run_job_trains_on_the_device_it_picks_and_says_which(tmp_path, monkeypatch):
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    assert run_job.main(["--job-type", "ResNet-18 (batch size 32)", "--size", "tiny", "--steps", "3",
                         "--checkpoint-dir", str(tmp_path)]) == 0
    log = _log(tmp_path)
    [dev] = [e for e in log if e.get("event") == "device"]
    assert dev["device"] == ("cuda:0" if torch.cuda.is_available() else "cpu")
    assert [e["step"] for e in log if "loss" in e] == [1, 2, 3]
    assert max(e["step"] for e in log if e.get("event") == "save") == 3


def test_run_job_cpu_flag_and_a_missing_gpu(tmp_path):
    assert run_job.pick_device("cpu") == torch.device("cpu")
    if torch.cuda.is_available():
        assert run_job.pick_device("cuda").type == "cuda"
    else:
        with pytest.raises(SystemExit, match="--device cuda: torch sees no GPU"):
            run_job.pick_device("cuda")
