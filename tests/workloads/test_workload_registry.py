"""The 26 Gavel job types by their exact names (gavel_ng.jobtypes: plain data, no torch), and the PyTorch
models that carry them out (gavel_ng.workloads), one per family."""

from __future__ import annotations

import pytest

from gavel_ng.jobtypes import FAMILIES, JOB_TYPES, get_family, job_type_name, list_families, parse_job_type


def test_seven_families_and_26_job_types() -> None:
    assert list_families() == ["ResNet-18", "ResNet-50", "Transformer", "LM", "Recommendation",
                               "A3C", "CycleGAN"]
    assert len(JOB_TYPES) == len(set(JOB_TYPES)) == 26
    assert "ResNet-50 (batch size 64)" in JOB_TYPES
    assert "Recommendation (batch size 8192)" in JOB_TYPES


def test_names_match_the_reference_table(reference_table) -> None:
    assert set(reference_table.job_types) == set(JOB_TYPES)
    assert {k[0] for k in reference_table.isolated["v100"]} == set(JOB_TYPES)


@pytest.mark.parametrize("name", JOB_TYPES)
def test_parse_round_trips(name: str) -> None:
    family, batch_size = parse_job_type(name)
    assert job_type_name(family, batch_size) == name


def test_parse_unsized_families() -> None:
    assert parse_job_type("A3C") == ("A3C", 4)
    assert parse_job_type("CycleGAN") == ("CycleGAN", 1)
    assert parse_job_type("LM (batch size 80)") == ("LM", 80)


@pytest.mark.parametrize("bad", ["ResNet-18 (batch size 17)", "GPT (batch size 8)", "", "LM"])
def test_parse_rejects_unknown(bad: str) -> None:
    with pytest.raises(ValueError):
        parse_job_type(bad)


def test_aliases() -> None:
    assert get_family("resnet18").name == "ResNet-18"
    assert get_family("lstm").name == "LM"
    with pytest.raises(KeyError):
        get_family("bert")


def test_every_family_has_its_pytorch_model() -> None:
    workloads = pytest.importorskip("gavel_ng.workloads", exc_type=ImportError)    # needs torch (the worker extra)
    for name, family in FAMILIES.items():
        w = workloads.get_workload(name)
        assert (w.family, w.batch_sizes, w.task, w.dataset) == (name, family.batch_sizes, family.task, family.dataset)
    assert workloads.get_workload("lstm") is workloads.get_workload("LM")
