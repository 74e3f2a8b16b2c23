"""The best-batch search against the plain one it replaced: identical (g, m, s), bit for bit.

`_reference` is the search as it was before the feasible cells were cached and compacted:
every (configuration, s) cell evaluated, bisection over the full bracket."""

from __future__ import annotations

import numpy as np
import pytest

from gavel_ng.elastic import get_family
from gavel_ng.elastic.goodput import _gpus_ok, _local_cap, _search, make_params


def _reference(params, spec, phi, k, n):
    c = k.size
    m_hi = _local_cap(spec, params)
    m0, mmax = spec.init_batch, spec.batch_limit
    valid = _gpus_ok(spec, k, n) & (m_hi >= spec.min_local_batch)
    kk = np.maximum(k, 1)
    if spec.accumulation and m_hi >= 1:
        s_max = np.maximum(0, -(-mmax // (kk * m_hi)) - 1)
    else:
        s_max = np.zeros(c, np.int64)
    s_top = int(s_max[valid].max()) if valid.any() else 0
    s = np.arange(s_top + 1)[None, :]
    kk2 = kk[:, None]
    per = kk2 * (s + 1)
    lo = np.maximum(spec.min_local_batch, -(-m0 // per))
    lo = np.where(s > 0, np.maximum(lo, (s * m_hi) // (s + 1) + 1), lo)
    hi = np.minimum(m_hi, mmax // per)
    ok = valid[:, None] & (s <= s_max[:, None]) & (lo <= hi)
    lo = np.where(ok, lo, 1)
    hi = np.where(ok, hi, 1)
    ts = params.t_sync(kk2, n[:, None])
    phi2 = phi[:, None]
    gamma = params.gamma

    def value(m):
        batch = per * m
        tg = params.alpha_grad + params.beta_grad * m
        overlap = tg + ts if gamma == 1.0 else (tg ** gamma + ts ** gamma) ** (1.0 / gamma)
        return batch / (s * tg + overlap) * (phi2 + m0) / (phi2 + batch)

    if gamma == 1.0:
        if params.beta_grad > 0:
            a = (s + 1) * params.alpha_grad + ts
            m_star = np.sqrt(a * phi2 / ((s + 1) * params.beta_grad * per))
            m_star = np.minimum(np.maximum(m_star, lo), hi)
        else:
            m_star = hi.astype(float)
        both = np.stack([np.floor(m_star), np.ceil(m_star)]).astype(np.int64)
        g12 = value(both)
        up = g12[1] > g12[0]
        best_m = np.where(up, both[1], both[0])
        best_g = np.where(up, g12[1], g12[0])
    else:
        left, right = lo.astype(np.int64), hi.astype(np.int64)
        while (left < right).any():
            open_ = left < right
            mid = (left + right) // 2
            g = value(np.stack([mid, mid + 1]))
            rising = g[1] > g[0]
            left = np.where(open_ & rising, mid + 1, left)
            right = np.where(open_ & ~rising, mid, right)
        best_m = left
        best_g = value(best_m)
    best_g = np.where(ok, best_g, -np.inf)
    j = np.argmax(best_g, axis=1)
    rows = np.arange(c)
    g = best_g[rows, j]
    found = np.isfinite(g)
    return (np.where(found, g, 0.0), np.where(found, best_m[rows, j], 0).astype(np.int64),
            np.where(found, j, 0).astype(np.int64))


def _random_case(rng):
    gamma = float(rng.choice([1.0, 1.0, 1.0 + 1e-3, rng.uniform(1.0, 3.0), rng.uniform(3.0, 10.0), 10.0]))
    theta = [rng.uniform(0, 0.05), rng.choice([0.0, rng.uniform(1e-5, 1e-2)]),
             rng.uniform(0, 0.2), rng.uniform(0, 0.01), rng.uniform(0, 0.5), rng.uniform(0, 0.05), gamma]
    params = make_params(theta, int(rng.choice([0, 1, 7, rng.integers(8, 2000)])))
    m0 = int(rng.integers(1, 400))
    fam = get_family(["cifar10", "bert", "yolov3", "imagenet"][rng.integers(4)])
    spec = fam.spec(init_batch=m0, max_batch=int(m0 * rng.choice([1, 2, 7, 32, 100, 300])),
                    min_gpus=int(rng.choice([1, 1, 2])),
                    max_gpus=None if rng.random() < 0.7 else int(rng.integers(2, 64)),
                    lr_scaling="none" if rng.random() < 0.1 else "adascale",
                    min_local_batch=(least := int(rng.integers(1, 8))),
                    max_local_batch=None if rng.random() < 0.5 else int(rng.integers(least, 600)),
                    accumulation=bool(rng.random() < 0.7))
    c = int(rng.integers(1, 40))
    k = rng.choice([0, 1, 2, 3, 4, 6, 8, 13, 16, 32, 64, 128], size=c).astype(np.int64)
    n = np.maximum(0, (k + 3) // 4 + rng.integers(-1, 2, size=c)).astype(np.int64)
    phi = rng.choice([0.0, 1.0, 1e6, 1e12], size=c) * rng.random(c) + rng.uniform(0, 5000, size=c)
    return params, spec, phi, k, n


@pytest.mark.parametrize("seed", range(8))
def test_search_is_identical_to_the_reference(seed):
    rng = np.random.default_rng(seed)
    for _ in range(60):
        params, spec, phi, k, n = _random_case(rng)
        # twice on the same configurations (the second reads the cached cells), with new noise scales
        for phi_now in (phi, phi * rng.uniform(0.5, 2.0, size=phi.size)):
            got, want = _search(params, spec, phi_now, k, n), _reference(params, spec, phi_now, k, n)
            for a, b in zip(got, want):
                assert a.dtype == b.dtype
                np.testing.assert_array_equal(a, b, err_msg=str((params, spec, k, n, phi_now)))


def test_cached_cells_follow_the_bounds_not_just_the_configurations():
    """Same configurations and sync model, another job bound or accumulation rule: not the cached cells."""
    rng = np.random.default_rng(99)
    params = make_params([0.01, 1e-3, 0.05, 1e-3, 0.2, 1e-2, 2.5], 256)
    k = np.array([1, 2, 4, 8, 16], np.int64)
    n = np.array([1, 1, 1, 2, 4], np.int64)
    phi = rng.uniform(100, 3000, size=k.size)
    fam = get_family("cifar10")
    for spec in (fam.spec(init_batch=64, max_batch=8192), fam.spec(init_batch=64, max_batch=8192, accumulation=False),
                 fam.spec(init_batch=64, max_batch=8192, max_local_batch=32), fam.spec(init_batch=128, max_batch=512),
                 fam.spec(init_batch=64, max_batch=8192, max_gpus=4)):
        for a, b in zip(_search(params, spec, phi, k, n), _reference(params, spec, phi, k, n)):
            np.testing.assert_array_equal(a, b)
