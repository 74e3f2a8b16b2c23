"""A worker refuses GPU ids the machine does not have, naming the flag (a rank on a missing GPU
would train on the CPU while its peers use NCCL, and the job would hang at rendezvous)."""

from __future__ import annotations

import pytest

from gavel_ng.cli import main
from gavel_ng.errors import InputError
from gavel_ng.worker.daemon import check_gpu_ids, machine_gpu_count


def test_machine_gpu_count_reads_the_driver_listing(tmp_path):
    for bus in ("0000:01:00.0", "0000:41:00.0"):
        (tmp_path / bus).mkdir()
    assert machine_gpu_count(str(tmp_path)) == 2
    assert machine_gpu_count(str(tmp_path / "absent")) is None     # no driver: a CPU machine


def test_ids_beyond_the_machine_are_refused_naming_the_flag():
    check_gpu_ids([0, 1], 2)
    check_gpu_ids([5, 6], None)                     # no driver to ask: process slots, any ids
    with pytest.raises(InputError, match=r"--gpus=4: GPU ids \[2, 3\] do not exist; this machine has 2 GPUs"):
        check_gpu_ids([0, 1, 2, 3], 2)
    with pytest.raises(InputError, match=r"--gpu-ids='1,7': GPU ids \[7\] do not exist"):
        check_gpu_ids([1, 7], 2)


def test_cli_refuses_a_negative_gpu_id(capsys):
    rc = main(["worker", "--scheduler", "127.0.0.1:1", "--gpu-type", "v100", "--gpus", "2", "--gpu-ids", "0,-1"])
    assert rc == 2
    assert "--gpu-ids='0,-1': GPU ids [-1] do not exist" in capsys.readouterr().err
