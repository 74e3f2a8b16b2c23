"""The stored per-iteration profiles cover the 26 job types with sane, positive values."""

from __future__ import annotations

import dataclasses

import pytest

from gavel_ng.jobtypes import JOB_TYPES
from gavel_ng.profiles import load_workload_profiles

PROFILES = load_workload_profiles()


def test_covers_exactly_the_26_job_types() -> None:
    assert set(PROFILES) == set(JOB_TYPES)


@pytest.mark.parametrize("job_type", JOB_TYPES)
def test_values_positive(job_type: str) -> None:
    p = PROFILES[job_type]
    for f in dataclasses.fields(p):
        value = getattr(p, f.name)
        if isinstance(value, int) and f.name not in ("optimizer_bytes", "env_steps"):
            assert value > 0, f.name  # plain SGD keeps no state; only A3C has env steps
    assert p.optimizer_bytes >= 0 and p.env_steps >= 0
    bins = [*p.conv_bins.values(), *p.gemm_bins.values()]
    assert bins and all(fl > 0 and by > 0 for fl, by in bins)
    assert sum(fl for fl, _ in bins) == p.matmul_flops
    assert p.peak_bytes > p.activation_bytes + p.param_bytes


def test_work_grows_with_batch_size() -> None:
    for family in ("ResNet-18", "ResNet-50", "Transformer", "LM", "Recommendation"):
        rows = sorted((p for p in PROFILES.values() if p.family == family),
                      key=lambda p: p.batch_size)
        flops = [p.flops for p in rows]
        assert flops == sorted(flops) and flops[-1] > 4 * flops[0]


def test_resnet50_matches_known_cost() -> None:
    """About 4.1 GMACs (8.2 GFLOP) per 224x224 image forward; training is ~3x forward."""
    p = PROFILES["ResNet-50 (batch size 64)"]
    per_image = p.matmul_flops / 64
    assert 22e9 < per_image < 27e9
    assert 95e6 < p.param_bytes < 110e6  # 25.6 M FP32 parameters


def test_measuring_again_reproduces_the_stored_row() -> None:
    measure = pytest.importorskip("gavel_ng.profiles.measure", exc_type=ImportError)   # needs torch (worker extra)

    assert measure.measure_job_type("ResNet-18 (batch size 32)") == PROFILES["ResNet-18 (batch size 32)"]
