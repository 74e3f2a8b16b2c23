"""GPU datasheet table: present, positive, and ordered the way the hardware generations are."""

from __future__ import annotations

import dataclasses

import pytest

from gavel_ng.profiles import GPUS, GpuSpec, get_gpu


def test_required_types_present() -> None:
    assert {"k80", "p100", "v100", "t4", "a100", "h100", "rtx2080ti", "rtx6000"} <= set(GPUS)
    assert all(name == spec.name == name.lower() for name, spec in GPUS.items())


@pytest.mark.parametrize("name", sorted(GPUS))
def test_sane_ranges(name: str) -> None:
    g = GPUS[name]
    assert 1e12 < g.fp32_flops <= g.tensor_flops < 2e15
    assert 100e9 < g.mem_bytes_per_s < 5e12
    assert 8e9 <= g.mem_bytes <= 100e9
    assert 10e9 <= g.link_bytes_per_s <= 1e12
    assert 0.01 < g.dollars_per_hour < 50   # rtx2080ti: an amortized purchase price, $0.046/h
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


def test_turing_types_sit_between_t4_and_a100() -> None:
    # Sia's two on-premise Turing types: faster FP32 and memory than a T4, slower than an A100
    for name in ("rtx2080ti", "rtx6000"):
        g = GPUS[name]
        for field in ("fp32_flops", "mem_bytes_per_s"):
            assert getattr(GPUS["t4"], field) < getattr(g, field) < getattr(GPUS["a100"], field), (name, field)
    assert GPUS["rtx2080ti"].mem_bytes < GPUS["t4"].mem_bytes < GPUS["rtx6000"].mem_bytes
