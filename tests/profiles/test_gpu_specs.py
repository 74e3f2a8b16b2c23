"""GPU datasheet table: present, positive, and ordered the way the hardware generations are."""

from __future__ import annotations

import dataclasses

import pytest

from gavel_ng.profiles import GPUS, GpuSpec, get_gpu


def test_required_types_present() -> None:
    assert {"k80", "p100", "v100", "t4", "a100", "h100"} <= set(GPUS)
    assert all(name == spec.name == name.lower() for name, spec in GPUS.items())


@pytest.mark.parametrize("name", sorted(GPUS))
def test_sane_ranges(name: str) -> None:
    g = GPUS[name]
    assert 1e12 < g.fp32_flops <= g.tensor_flops < 2e15
    assert 100e9 < g.mem_bytes_per_s < 5e12
    assert 8e9 <= g.mem_bytes <= 100e9
    assert 10e9 <= g.link_bytes_per_s <= 1e12
    assert 0.1 < g.dollars_per_hour < 50
    assert len(g.source) > 40


def test_generations_ordered() -> None:
    order = ["k80", "p100", "v100", "a100", "h100"]
    for field in ("fp32_flops", "mem_bytes_per_s"):
        values = [getattr(GPUS[n], field) for n in order]
        assert values == sorted(values), field
    assert GPUS["k80"].dollars_per_hour < GPUS["v100"].dollars_per_hour


def test_frozen_and_validated() -> None:
    with pytest.raises(dataclasses.FrozenInstanceError):
        GPUS["v100"].fp32_flops = 1.0  # type: ignore[misc]
    with pytest.raises(ValueError):
        dataclasses.replace(GPUS["v100"], mem_bytes=0)
    assert isinstance(get_gpu("V100_unconsolidated"), GpuSpec)
    with pytest.raises(KeyError):
        get_gpu("tpu")
