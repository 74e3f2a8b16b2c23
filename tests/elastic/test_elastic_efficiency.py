"""Statistical efficiency, the gradient-noise curve and progress in M0-equivalent examples."""

from __future__ import annotations

import numpy as np
import pytest

from gavel_ng.elastic import (
    FAMILIES,
    AdaptiveSpec,
    PhiCurve,
    efficiency,
    get_family,
    progress_after,
    progress_per_step,
    seconds_to_progress,
)
from gavel_ng.errors import InputError


@pytest.mark.parametrize("phi", [0.0, 10.0, 532.0, 1e6])
def test_efficiency_is_one_at_m0_and_decreases(phi):
    m0 = 128
    assert efficiency(m0, m0, phi) == pytest.approx(1.0)
    batches = np.array([128, 256, 512, 1024, 4096, 32768])
    e = efficiency(batches, m0, phi)
    assert np.all((e > 0) & (e <= 1.0 + 1e-12))
    if phi < 1e6:
        assert np.all(np.diff(e) < 0)
    # the limit of large batches: (phi + M0) / M
    assert efficiency(1e12, m0, phi) == pytest.approx((phi + m0) / 1e12, rel=1e-6)


def test_larger_noise_scale_makes_large_batches_more_efficient():
    curve = get_family("cifar10").phi
    m0, big = 128, 4096
    e = [efficiency(big, m0, curve(p)) for p in (0.0, 0.25, 0.5, 1.0)]
    assert all(b > a for a, b in zip(e, e[1:]))
    assert efficiency(m0, m0, curve(0.7)) == pytest.approx(1.0)


def test_phi_curve_is_geometric_and_clipped():
    c = PhiCurve(100.0, 16.0)
    assert c(0.0) == pytest.approx(100.0)
    assert c(1.0) == pytest.approx(1600.0)
    assert c(0.5) == pytest.approx(400.0)
    assert c(-1.0) == pytest.approx(100.0) and c(3.0) == pytest.approx(1600.0)
    np.testing.assert_allclose(c(np.array([0.0, 0.25])), [100.0, 200.0])
    with pytest.raises(InputError, match="phi0"):
        PhiCurve(-1.0)
    with pytest.raises(InputError, match="phi_growth"):
        PhiCurve(1.0, 0.0)


def test_every_family_grows_its_noise_scale():
    for fam in FAMILIES.values():
        assert fam.phi.phi0 > 0 and fam.phi.growth > 1
        assert fam.init_batch <= fam.max_batch
        assert fam.min_local_batch <= fam.max_batch


def test_progress_per_step_counts_m0_equivalent_examples():
    m0 = 100
    # phi chosen so that E(2 M0) = 0.5: (phi + M0) / (phi + 2 M0) = 1/2 -> phi = 0
    assert efficiency(2 * m0, m0, 0.0) == pytest.approx(0.5)
    assert progress_per_step(2 * m0, m0, 0.0) == pytest.approx(progress_per_step(m0, m0, 0.0)) == pytest.approx(m0)
    # with perfect efficiency (phi -> inf) a step at 4 M0 is worth four steps at M0
    assert progress_per_step(4 * m0, m0, 1e15) == pytest.approx(4 * m0)
    # in general M E(M) lies between M0 and M
    for phi in (10.0, 1e3):
        for m in (150, 400, 3200):
            assert m0 < progress_per_step(m, m0, phi) < m


def test_same_m0_rate_at_double_batch_with_half_efficiency():
    """A job at 2x batch and efficiency 0.5 progresses at the same rate as at M0 with the same step rate."""
    m0, phi, work = 64, 0.0, 64 * 1000
    curve = PhiCurve(phi)
    steps_per_s = 10.0
    t_m0 = seconds_to_progress(curve, m0, m0, steps_per_s * m0, work, 0.0, 1.0)
    t_2x = seconds_to_progress(curve, m0, 2 * m0, steps_per_s * 2 * m0, work, 0.0, 1.0)
    assert t_m0 == pytest.approx(t_2x) == pytest.approx(1000 / steps_per_s)


@pytest.mark.parametrize("growth", [1.0, 3.0, 161.0])
@pytest.mark.parametrize("batch", [20, 160, 640])
def test_seconds_to_progress_matches_numeric_integration(growth, batch):
    curve = PhiCurve(238.0, growth)
    m0, x, work = 20, 500.0, 1e6
    p = np.linspace(0.1, 0.9, 200_001)
    rate = x * efficiency(batch, m0, curve(p)) / work  # dp/dt
    numeric = np.trapezoid(1.0 / rate, p)
    assert seconds_to_progress(curve, m0, batch, x, work, 0.1, 0.9) == pytest.approx(numeric, rel=1e-8)
    # additive over intervals; zero for an empty interval
    whole = seconds_to_progress(curve, m0, batch, x, work, 0.0, 1.0)
    parts = (seconds_to_progress(curve, m0, batch, x, work, 0.0, 0.3)
             + seconds_to_progress(curve, m0, batch, x, work, 0.3, 1.0))
    assert whole == pytest.approx(parts)
    assert seconds_to_progress(curve, m0, batch, x, work, 0.5, 0.5) == 0.0


def test_job_finishes_when_its_m0_work_is_done_whatever_the_batch():
    fam = get_family("deepspeech2")
    # finishing time is work / goodput when efficiency is constant, at any batch
    for batch in (20, 80, 640):
        t = seconds_to_progress(fam.phi, fam.init_batch, batch, 1000.0, fam.work, 0.0, 1.0)
        assert progress_after(fam.phi, fam.init_batch, batch, 1000.0, fam.work, 0.0, t) == pytest.approx(1.0)
        assert progress_after(fam.phi, fam.init_batch, batch, 1000.0, fam.work, 0.0, 0.5 * t) < 1.0
    # at M0 there is no efficiency loss: seconds = work / throughput
    assert seconds_to_progress(fam.phi, 20, 20, 1000.0, fam.work, 0.0, 1.0) == pytest.approx(fam.work / 1000.0)
    # larger batches need more examples (efficiency < 1), but never fewer than at M0
    ex_640 = seconds_to_progress(fam.phi, 20, 640, 1.0, fam.work, 0.0, 1.0)
    assert fam.work < ex_640 < 640 / 20 * fam.work


@pytest.mark.parametrize("batch", [8, 64, 512])
def test_progress_after_inverts_seconds_to_progress(batch):
    fam = get_family("yolov3")
    p0 = np.array([0.0, 0.2, 0.6, 0.95])
    seconds = np.array([10.0, 1000.0, 5000.0, 1e9])
    p = progress_after(fam.phi, fam.init_batch, batch, 40.0, fam.work, p0, seconds)
    assert np.all(p >= p0) and np.all(p <= 1.0)
    back = seconds_to_progress(fam.phi, fam.init_batch, batch, 40.0, fam.work, p0, p)
    unfinished = p < 1.0
    np.testing.assert_allclose(back[unfinished], seconds[unfinished], rtol=1e-9)
    assert p[-1] == 1.0
    # no throughput: no progress
    assert progress_after(fam.phi, fam.init_batch, batch, 0.0, fam.work, 0.3, 100.0) == pytest.approx(0.3)


def test_adaptive_spec_validation_names_the_field():
    AdaptiveSpec("cifar10", 128, 4096, 1, 64, "sqrt")
    for kwargs, field in [(dict(init_batch=0), "init_batch"), (dict(max_batch=64), "max_batch"),
                          (dict(min_gpus=0), "min_gpus"), (dict(max_gpus=0), "max_gpus"),
                          (dict(min_gpus=4, max_gpus=2), "max_gpus"), (dict(lr_scaling="cubic"), "lr_scaling"),
                          (dict(min_local_batch=0), "min_local_batch"),
                          (dict(min_local_batch=32, max_local_batch=16), "max_local_batch")]:
        base = dict(family="cifar10", init_batch=128, max_batch=4096)
        with pytest.raises(InputError, match=field):
            AdaptiveSpec(**{**base, **kwargs})


def test_lr_rule_none_pins_the_batch():
    spec = get_family("bert").spec(lr_scaling="none")
    assert spec.batch_limit == spec.init_batch == 12
    assert get_family("bert").spec().batch_limit == 384
