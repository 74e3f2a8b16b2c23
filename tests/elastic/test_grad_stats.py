"""Gradient statistics by batch size (issue 40): the per-epoch noise scale, its exact integral and
inversion, the interpolation between measured batch sizes, and what the shipped `sia` set makes of
them (a job's goodput at its own batch, fixed jobs' run time at theirs)."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.integrate import quad

from gavel_ng.elastic import get_family
from gavel_ng.elastic.efficiency import efficiency, progress_after, seconds_to_progress
from gavel_ng.elastic.goodput import best_goodput, best_goodput_many, throughput_params
from gavel_ng.elastic.grad_stats import PHI_CAP, BatchStats, EpochPhi
from gavel_ng.elastic.profile_sets import batch_stats, measured_set, phi_curve
from gavel_ng.elastic.workload import _fixed_seconds
from gavel_ng.errors import InputError


def test_an_epoch_curve_is_constant_within_each_epoch_and_integrates_exactly():
    curve = EpochPhi((0.2, 0.5, 0.9), (40.0, 3000.0, 0.0))   # ends before 1: the last value holds after it
    assert curve(0.0) == curve(0.2) == 40.0 and curve(0.2000001) == 3000.0 and curve(0.95) == curve(1.0) == 0.0
    for a, b in ((0.0, 1.0), (0.1, 0.45), (0.5, 0.5), (0.21, 0.93)):
        want, _ = quad(lambda p: 1 / (curve(p) + 64), a, b, points=[0.2, 0.5, 0.9], epsabs=1e-13)
        assert curve.integral(a, b, 64) == pytest.approx(want, rel=1e-9, abs=1e-14)


@pytest.mark.parametrize("seed", range(4))
def test_progress_inverts_seconds_exactly_on_an_epoch_curve(seed):
    rng = np.random.default_rng(seed)
    ends = np.sort(rng.choice(np.linspace(0.01, 1.0, 100), int(rng.integers(1, 30)), replace=False))
    curve = EpochPhi(tuple(ends), tuple(rng.choice([0.0, 1.0, 1e3, 1e6], len(ends))))
    n, m0 = 50, 128.0
    batch = m0 * rng.uniform(1.0, 32.0, n)
    x, work = rng.uniform(10.0, 1e4, n), rng.uniform(1e4, 1e7, n)
    p0 = rng.uniform(0.0, 1.0, n)
    p0[:5] = ends[0]                                         # on an epoch's end
    t_end = seconds_to_progress(curve, m0, batch, x, work, p0, 1.0)
    seconds = t_end * rng.uniform(0.0, 1.2, n)
    p = progress_after(curve, m0, batch, x, work, p0, seconds)
    assert np.all(p[seconds >= t_end] == 1.0)
    inside = seconds < t_end
    back = seconds_to_progress(curve, m0, batch[inside], x[inside], work[inside], p0[inside], p[inside])
    assert back == pytest.approx(seconds[inside], rel=1e-9, abs=1e-6)


@pytest.mark.parametrize("ends, phi, field", [
    ((0.5, 0.4), (1.0, 2.0), "phi.ends"), ((0.0, 0.5), (1.0, 2.0), "phi.ends"), ((0.5,), (-1.0,), "phi.phi"),
    ((), (), "phi.ends"), ((0.5,), (float("nan"),), "phi.phi")])
def test_a_bad_epoch_curve_is_an_input_error(ends, phi, field):
    with pytest.raises(InputError) as exc:
        EpochPhi(ends, phi)
    assert exc.value.field == field


def test_statistics_interpolate_linearly_in_the_batch_between_the_runs_around_it():
    """The artifact interpolates the squared norm and the variance (not phi) between the two runs."""
    stats = BatchStats(100, (100, 400), (0.5, 1.0), sqr=[[2.0, 1.0], [4.0, 0.0]], var=[[1.0, 3.0], [6.0, 2.0]])
    assert stats.phi(100, 0.3) == pytest.approx(100 * 1.0 / 2.0)      # the M0 run's first epoch
    assert stats.phi(400, 0.7) == PHI_CAP                              # a zero squared norm: E = 1
    # a third of the way from 100 to 400 (batch 200), second epoch: sqr 2/3, var 8/3
    assert stats.phi(200, 0.7) == pytest.approx(100 * (8 / 3) / (2 / 3))
    assert stats.phi(50, 0.3) == stats.phi(100, 0.3) and stats.phi(900, 0.3) == stats.phi(400, 0.3)   # clamped
    assert stats.curve(200)(0.7) == stats.phi(200, 0.7) and stats.curve(200) is stats.curve(200.2)
    with pytest.raises(InputError, match="stats.batches"):
        BatchStats(100, (400, 100), (1.0,), [[1.0], [1.0]], [[1.0], [1.0]])
    with pytest.raises(InputError, match="stats.grad_sqr"):
        BatchStats(100, (100,), (0.5, 1.0), [[1.0]], [[1.0]])


def test_the_shipped_set_scores_a_pick_at_the_batch_it_trains_at():
    spec = get_family("cifar10").spec(profiles="sia")
    stats = batch_stats(spec)
    assert stats is measured_set("sia").stats["cifar10"] and phi_curve(spec, 2048) is stats.curve(2048)
    for ran_at in (None, 1024, 4096):
        g, m, s = best_goodput(spec, "a100", 4, 1, 0.6, batch=ran_at)
        batch = 4 * m * (s + 1)
        x = float(throughput_params("cifar10", "a100", profiles="sia").throughput(m, s, 4, 1))
        assert g == pytest.approx(x * efficiency(batch, 128, stats.phi(batch, 0.6)), rel=1e-12)
    # a job that ran at a large batch measured a larger noise scale there (cifar10 late in training), so it
    # picks a batch at least as large as one that ran at M0 would
    assert best_goodput(spec, "a100", 4, 1, 0.6, batch=4096)[1] >= best_goodput(spec, "a100", 4, 1, 0.6)[1]
    # a modeled job's noise scale does not depend on its batch: `batch` changes nothing
    modeled = get_family("cifar10").spec()
    a = best_goodput_many(modeled, "a100", np.arange(1, 5), 1, 0.6)
    b = best_goodput_many(modeled, "a100", np.arange(1, 5), 1, 0.6, batch=4096)
    assert all(np.array_equal(u, v) for u, v in zip(a, b))


def test_a_fixed_jobs_run_time_uses_the_statistics_of_its_own_batch():
    fam = get_family("cifar10")
    params = throughput_params(fam, "t4", profiles="sia")
    seconds = _fixed_seconds(fam, 8, 256, 0, "t4", 4, 50.0, "sia")
    x = float(params.throughput(256, 0, 8, 2))
    want = seconds_to_progress(batch_stats(fam.spec(profiles="sia")).curve(2048), 128, 2048, x, fam.work, 0.0, 1.0)
    at_m0 = seconds_to_progress(phi_curve(fam.spec(profiles="sia")), 128, 2048, x, fam.work, 0.0, 1.0)
    assert seconds == pytest.approx(want, rel=1e-12) and seconds < at_m0   # a large batch is more efficient there
