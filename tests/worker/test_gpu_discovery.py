"""GPU discovery (gavel_ng.worker.gpus): the product table, the user's map, the allocation sources
and the refusals. NVML cannot run here: its answers are given as the plain NvmlReport it returns,
and the no-GPU path runs for real (pynvml raises on nvmlInit without a driver)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from gavel_ng.errors import InputError
from gavel_ng.worker.daemon import machine_gpu_count
from gavel_ng.worker.gpus import Device, NvmlReport, choose, load_type_map, product_type, query_nvml, read_grant


@pytest.mark.parametrize("name, kind", [
    ("Tesla V100-SXM2-16GB", "v100"), ("Tesla V100S-PCIE-32GB", "v100"), ("NVIDIA A100-SXM4-80GB", "a100"),
    ("NVIDIA A100 80GB PCIe", "a100"), ("NVIDIA H100 80GB HBM3", "h100"), ("NVIDIA H100 NVL", "h100"),
    ("NVIDIA H200", "h200"), ("NVIDIA GH200 480GB", "gh200"), ("Tesla T4", "t4"), ("Tesla K80", "k80"),
    ("Tesla P100-PCIE-16GB", "p100"), ("NVIDIA GeForce RTX 2080 Ti", "rtx2080ti"), ("Quadro RTX 6000", "rtx6000"),
    ("NVIDIA RTX 6000 Ada Generation", "rtx6000ada"), ("NVIDIA L4", "l4"), ("NVIDIA L40S", "l40s"),
    ("NVIDIA A10", "a10"), ("NVIDIA A10G", "a10g"),
    ("NVIDIA-H100-80GB-HBM3", "h100"), ("Tesla-V100-SXM2-16GB", "v100"),     # Kubernetes label values
])
def test_known_products_map_to_their_type(name, kind):
    assert product_type(name) == kind


def test_unknown_products_and_mig_slices_have_no_type_unless_the_user_maps_them():
    assert product_type("NVIDIA Hypothetical X9") is None
    assert product_type("NVIDIA A100-SXM4-40GB MIG 1g.5gb") is None
    user = {"hypothetical x9": "x9", "A100 MIG 1g.5gb": "a100-1g"}
    assert product_type("NVIDIA Hypothetical X9", user) == "x9"
    assert product_type("NVIDIA A100-SXM4-40GB MIG 1g.5gb", user) is None     # words must be adjacent
    assert product_type("NVIDIA A100 MIG 1g.5gb", user) == "a100-1g"
    assert product_type("Tesla V100-SXM2-16GB", {"v100": "volta"}) == "volta"    # the user's map first


def test_the_user_map_comes_from_the_flag_else_the_environment(tmp_path):
    path = tmp_path / "map.json"
    path.write_text(json.dumps({"Hypothetical X9": "X9"}))
    assert load_type_map(str(path), env={}) == {"Hypothetical X9": "x9"}
    assert load_type_map(None, env={"GAVEL_NG_GPU_TYPE_MAP": str(path)}) == {"Hypothetical X9": "x9"}
    assert load_type_map(None, env={}) == {}
    path.write_text('["x9"]')
    with pytest.raises(InputError, match=r"^--gpu-type-map='.*map.json': must be a JSON object"):
        load_type_map(str(path), env={})
    with pytest.raises(InputError, match=r"^\$GAVEL_NG_GPU_TYPE_MAP='.*absent.json': cannot read"):
        load_type_map(None, env={"GAVEL_NG_GPU_TYPE_MAP": str(tmp_path / "absent.json")})


@pytest.mark.parametrize("env, ids, count", [
    ({"CUDA_VISIBLE_DEVICES": "2,3"}, ("2", "3"), None),
    ({"CUDA_VISIBLE_DEVICES": "1,-1,2"}, ("1",), None),                  # CUDA stops at the first bad entry
    ({"CUDA_VISIBLE_DEVICES": ""}, (), None),
    ({"CUDA_VISIBLE_DEVICES": "NoDevFiles", "SLURM_JOB_GPUS": "0"}, (), None),
    ({"SLURM_STEP_GPUS": "4,5", "SLURM_JOB_GPUS": "4,5,6"}, ("4", "5"), None),
    ({"SLURM_JOB_GPUS": "6", "SLURM_GPUS_ON_NODE": "1"}, ("6",), None),
    ({"SLURM_GPUS_ON_NODE": "3"}, None, 3),
])
def test_allocation_sources(env, ids, count):
    alloc = read_grant(env)
    assert (alloc.ids, alloc.count) == (ids, count)
    assert read_grant({}) is None


FOUR_A100 = NvmlReport(tuple(Device(i, "NVIDIA A100-SXM4-80GB", f"GPU-aaaa{i}") for i in range(4)))


def test_auto_offers_what_nvml_lists_within_the_allocation():
    c = choose("auto", "auto", None, {}, env={}, query=lambda: FOUR_A100)
    assert (c.gpu_type, c.gpu_ids) == ("a100", (0, 1, 2, 3))
    c = choose("auto", "auto", None, {}, env={"CUDA_VISIBLE_DEVICES": "GPU-aaaa3,1"}, query=lambda: FOUR_A100)
    assert (c.gpu_type, c.gpu_ids) == ("a100", (3, 1))
    c = choose("2", "auto", None, {}, env={"SLURM_JOB_GPUS": "2,3"}, query=lambda: FOUR_A100)
    assert c.gpu_ids == (2, 3)
    c = choose("auto", "v100", [0, 2], {}, env={}, query=lambda: FOUR_A100)     # explicit flags win
    assert (c.gpu_type, c.gpu_ids) == ("v100", (0, 2))
    with pytest.raises(InputError, match=r"^--gpus=3: the allocation grants only 2 GPUs \(SLURM_JOB_GPUS='2,3'\)"):
        choose("3", "auto", None, {}, env={"SLURM_JOB_GPUS": "2,3"}, query=lambda: FOUR_A100)


def test_a_slurm_count_and_a_kubernetes_label_suffice_without_nvml():
    none = NvmlReport(error="NVML Shared Library Not Found")
    env = {"SLURM_GPUS_ON_NODE": "2", "GAVEL_NG_GPU_PRODUCT": "NVIDIA-H100-80GB-HBM3"}
    c = choose("auto", "auto", None, {}, env=env, query=lambda: none)
    assert (c.gpu_type, c.gpu_ids) == ("h100", (0, 1))
    with pytest.raises(InputError, match=r"^--gpu-type='auto': no NVIDIA GPU product found \(NVML: NVML Shared"):
        choose("auto", "auto", None, {}, env={"SLURM_GPUS_ON_NODE": "2"}, query=lambda: none)


def test_mixed_and_unknown_products_are_refused_naming_them():
    mixed = NvmlReport((Device(0, "Tesla V100-SXM2-16GB"), Device(1, "Tesla T4")))
    with pytest.raises(InputError, match=r"mixes GPU products: Tesla T4 \(t4\) ids \[1\], Tesla V100-SXM2-16GB "
                                         r"\(v100\) ids \[0\]; run one worker per type"):
        choose("auto", "auto", None, {}, env={}, query=lambda: mixed)
    assert choose("auto", "auto", [1], {}, env={}, query=lambda: mixed).gpu_type == "t4"
    odd = NvmlReport((Device(0, "NVIDIA Hypothetical X9"),))
    with pytest.raises(InputError, match=r"^GPU product='NVIDIA Hypothetical X9': no worker type for it: pass "
                                         r"--gpu-type TYPE, or map it in --gpu-type-map"):
        choose("auto", "auto", None, {}, env={}, query=lambda: odd)
    assert choose("auto", "auto", None, {"x9": "x9"}, env={}, query=lambda: odd).gpu_type == "x9"


no_driver = pytest.mark.skipif(machine_gpu_count() is not None, reason="this machine has an NVIDIA driver")


@no_driver
def test_nvml_without_a_driver_reports_why():
    report = query_nvml()          # no NVIDIA driver on a test machine: nvmlInit raises
    assert report.devices == () and report.error


@no_driver
def test_a_worker_without_gpus_or_flags_exits_2_with_one_line(tmp_path):
    pytest.importorskip("pynvml")      # the real binding, failing in nvmlInit
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CUDA_", "SLURM_", "GAVEL_NG_GPU"))}
    proc = subprocess.run([sys.executable, "-m", "gavel_ng", "worker", "--scheduler", "127.0.0.1:1"],
                          capture_output=True, text=True, timeout=120, env=env, cwd=tmp_path)
    assert proc.returncode == 2
    assert proc.stderr.startswith("gavel-ng worker: error: --gpus='auto': no NVIDIA GPU found (NVML: ")
    assert proc.stderr.endswith("); pass --gpu-type and --gpus\n") and proc.stderr.count("\n") == 1, proc.stderr


def test_the_deploy_guide_lists_every_type_of_the_table():
    from pathlib import Path

    from gavel_ng.worker.gpus import PRODUCT_TYPES

    guide = (Path(__file__).resolve().parents[2] / "docs" / "deploy.md").read_text()
    assert [kind for _, kind in PRODUCT_TYPES if kind not in guide] == []
