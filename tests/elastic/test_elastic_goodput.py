"""Pollux's throughput/goodput model on the built-in profiles, and the best-batch search."""

from __future__ import annotations

import numpy as np
import pytest

from gavel_ng.elastic import (
    FAMILIES,
    PhiCurve,
    best_batch,
    best_goodput,
    best_goodput_many,
    configuration_table,
    get_family,
    goodput,
    speedup,
    throughput_params,
)
from gavel_ng.errors import InputError
from gavel_ng.profiles import default_table, get_gpu, load_workload_profiles
from gavel_ng.profiles.model import load_constants

TYPES = ("k80", "p100", "v100", "t4", "a100", "h100")


@pytest.mark.parametrize("family", ["cifar10", "imagenet"])
@pytest.mark.parametrize("worker", TYPES)
def test_throughput_agrees_with_the_builtin_table(family, worker):
    """Same profile and gradient size: s = 0 at a profiled batch is the table's throughput (up to the line fit)."""
    fam = get_family(family)
    params = throughput_params(family, worker)
    table = default_table([worker])
    for name, rec in load_workload_profiles().items():
        if rec.family != fam.profile_family:
            continue
        for sf in (1, 2, 4, 8):
            rate = table.get((name, sf), worker)
            if rate == 0:
                assert rec.batch_size > params.max_local_batch  # the table says it does not fit
                continue
            examples = rate * rec.batch_size  # the table counts every replica's steps
            ours = float(params.throughput(rec.batch_size, 0, sf, 1))
            assert ours == pytest.approx(examples, rel=params.fit_error + 1e-9)
            spread = table.get_unconsolidated((name, sf), worker)
            if sf > 1 and spread:
                assert float(params.throughput(rec.batch_size, 0, sf, 2)) == pytest.approx(
                    spread * rec.batch_size, rel=params.fit_error + 1e-9)


def test_parameters_are_in_pollux_bounds_and_fit_the_profiles():
    for fam in FAMILIES:
        for worker in TYPES:
            p = throughput_params(fam, worker)
            assert p.alpha_grad >= 0 and p.beta_grad > 0 and p.gamma == 1.0
            assert min(p.alpha_local, p.beta_local, p.alpha_node, p.beta_node) >= 0
            assert p.alpha_node >= p.alpha_local  # the network is never faster than the server's link
            assert p.fit_error < 0.06
    assert throughput_params("bert", "v100", gamma=3.0).gamma == 3.0
    for bad in (0.5, 11.0):
        with pytest.raises(InputError, match="gamma"):
            throughput_params("bert", "v100", gamma=bad)
    with pytest.raises(InputError, match="worker_type"):
        throughput_params("bert", "tpu")
    with pytest.raises(InputError, match="family"):
        throughput_params("gpt3", "v100")


def test_more_gpus_more_throughput_with_diminishing_returns():
    p = throughput_params("bert", "t4")
    m = 8
    ks = np.array([1, 2, 3, 4])
    x = p.throughput(m, 0, ks, 1)
    assert np.all(np.diff(x) > 0)
    per_gpu = x / ks
    assert np.all(np.diff(per_gpu) < 0)  # synchronization eats into each GPU's share
    assert p.t_sync(1, 1) == 0.0
    # spreading over servers costs more than staying on one
    assert p.throughput(m, 0, 4, 2) < p.throughput(m, 0, 4, 1)
    # Pollux's form: T_sync(K) - T_sync(2) grows with K; at K = 2 it is alpha
    assert float(p.t_sync(2, 1)) == pytest.approx(p.alpha_local)
    assert float(p.t_sync(2, 2)) == pytest.approx(p.alpha_node)
    assert np.all(np.diff(p.t_sync(np.arange(2, 64), 2)) > 0)
    # overlap: gamma > 1 never slower than no overlap, never faster than the max
    q = throughput_params("bert", "t4", gamma=4.0)
    tg, ts = p.t_grad(m), p.t_sync(8, 2)
    t = q.t_iter(m, 0, 8, 2)
    assert max(tg, ts) <= t <= tg + ts
    # accumulation: s extra passes of T_grad
    assert float(p.t_iter(m, 3, 8, 2)) == pytest.approx(3 * float(tg) + float(p.t_iter(m, 0, 8, 2)))


def test_memory_limit_is_enforced_and_follows_the_gpu():
    fam = get_family("imagenet")
    small, big = throughput_params(fam, "t4"), throughput_params(fam, "a100")
    assert 0 < small.max_local_batch < big.max_local_batch
    # the limit is where the built-in model's memory test flips
    c_bytes = small.mem_fixed_bytes + small.mem_per_example_bytes * small.max_local_batch
    assert c_bytes <= small.mem_usable_bytes < c_bytes + small.mem_per_example_bytes
    c = load_constants()  # the built-in model's test: memory_scale * peak + context <= GPU memory
    assert c.memory_scale * c_bytes + c.context_bytes <= get_gpu("t4").mem_bytes
    assert c.memory_scale * (c_bytes + small.mem_per_example_bytes) + c.context_bytes > get_gpu("t4").mem_bytes
    m_hi = small.max_local_batch
    assert goodput(fam, "t4", 1, 1, m_hi, 1) > 0
    assert goodput(fam, "t4", 1, 1, m_hi + 1, 1) == 0.0  # does not fit
    for k in (1, 2, 4, 8, 16, 64):
        for p in (0.0, 0.5, 1.0):
            g, m, s = best_goodput(fam, "t4", k, -(-k // 4), p)
            assert 1 <= m <= m_hi


def test_accumulation_only_beyond_the_memory_limit():
    # imagenet: M0 = 200 does not fit one T4 (182), fits one A100 (468)
    g, m, s = best_goodput("imagenet", "t4", 1, 1, 0.0)
    assert s == 1 and m * (s + 1) >= 200
    g, m, s = best_goodput("imagenet", "a100", 1, 1, 0.0)
    assert s == 0
    # whatever the configuration, s > 0 only when the per-GPU batch exceeds the memory cap
    for fam in FAMILIES:
        for worker in ("t4", "v100", "a100"):
            cap = throughput_params(fam, worker).max_local_batch
            k = np.array([1, 1, 2, 4, 8, 16, 32])
            n = -(-k // 4)
            for prog in (0.0, 0.5, 1.0):
                g, m, s = best_goodput_many(fam, worker, k, n, prog)
                assert np.all(m <= cap)
                assert np.all((s == 0) | (m * (s + 1) > s * cap))
                if not FAMILIES[fam].accumulation:
                    assert np.all(s == 0)


def _brute(spec, fam, worker, k, n, prog, gamma):
    """Best goodput over every allowed (m, s) by enumeration."""
    params = throughput_params(fam, worker, gamma=gamma)
    cap = min(params.max_local_batch, spec.batch_limit, spec.max_local_batch or 10**12)
    if cap < spec.min_local_batch or k < spec.min_gpus or (spec.max_gpus and k > spec.max_gpus):
        return 0.0
    s_top = max(0, -(-spec.batch_limit // (k * cap)) - 1) if spec.accumulation else 0
    m = np.arange(spec.min_local_batch, cap + 1)[:, None]
    s = np.arange(s_top + 1)[None, :]
    batch = k * m * (s + 1)
    ok = ((batch >= spec.init_batch) & (batch <= spec.batch_limit) & ((s == 0) | (m * (s + 1) > s * cap)))
    phi = (spec.phi or fam.phi)(prog)
    g = params.throughput(m, s, k, n) * (phi + spec.init_batch) / (phi + batch)
    g = np.where(ok, g, -np.inf)
    return float(g.max()) if np.isfinite(g.max()) else 0.0


@pytest.mark.parametrize("seed", range(12))
def test_best_batch_search_equals_brute_force(seed):
    rng = np.random.default_rng(seed)
    names = list(FAMILIES)
    for _ in range(25):
        fam = FAMILIES[names[rng.integers(len(names))]]
        worker = TYPES[rng.integers(len(TYPES))]
        gamma = 1.0 if rng.random() < 0.5 else float(rng.uniform(1.0, 10.0))
        m0 = int(rng.integers(1, 300))
        mmax = int(m0 * rng.choice([1, 2, 7, 32, 100]))
        spec = fam.spec(init_batch=m0, max_batch=mmax,
                        min_local_batch=int(rng.integers(1, 8)),
                        max_local_batch=None if rng.random() < 0.5 else int(rng.integers(8, 600)),
                        accumulation=bool(rng.random() < 0.7),
                        phi=None if rng.random() < 0.5 else PhiCurve(float(rng.uniform(0, 5000)), 10.0))
        k = int(rng.choice([1, 2, 3, 4, 6, 8, 13, 32]))
        n = int(rng.integers(1, min(k, 4) + 1))
        prog = float(rng.random())
        g, m, s = best_goodput(spec, worker, k, n, prog, gamma=gamma)
        want = _brute(spec, fam, worker, k, n, prog, gamma)
        assert g == pytest.approx(want, rel=1e-9, abs=1e-12), (spec, worker, k, n, prog, gamma)
        if want > 0:
            assert float(goodput(spec, worker, k, n, m, s, prog, gamma=gamma)) == pytest.approx(g, rel=1e-12)
        else:
            assert m == 0 and s == 0


def test_vectorized_search_matches_scalar_calls():
    k = np.array([1, 2, 4, 8, 12, 16, 32, 64])
    n = -(-k // 4)
    prog = np.linspace(0, 1, k.size)
    g, m, s = best_goodput_many("yolov3", "v100", k, n, prog)
    for i in range(k.size):
        assert (float(g[i]), int(m[i]), int(s[i])) == best_goodput("yolov3", "v100", int(k[i]), int(n[i]),
                                                                    float(prog[i]))
    table = configuration_table("yolov3", ["t4", "a100"], 16, 4, 0.3)
    assert table.goodput.shape == (2, 16)
    np.testing.assert_array_equal(table.servers, -(-np.arange(1, 17) // 4))
    g2, _, _ = best_goodput_many("yolov3", "a100", table.gpus, table.servers, 0.3)
    np.testing.assert_array_equal(table.goodput[1], g2)


def test_gpu_range_and_batch_limits():
    spec = get_family("deepspeech2").spec(min_gpus=2, max_gpus=8)
    assert best_goodput(spec, "v100", 1, 1)[0] == 0.0
    assert best_goodput(spec, "v100", 16, 4)[0] == 0.0
    assert best_goodput(spec, "v100", 4, 1)[0] > 0
    # more GPUs than the maximum batch allows (one example each at least min_local_batch)
    assert best_goodput("bert", "v100", 200, 25) == (0.0, 0, 0)
    # a job that cannot scale its learning rate stays at M0: E = 1
    fixed = get_family("cifar10").spec(lr_scaling="none")
    g, m, s = best_goodput(fixed, "v100", 4, 1, 0.0)
    assert 4 * m * (s + 1) == 128
    g_thr = float(throughput_params("cifar10", "v100").throughput(m, s, 4, 1))
    assert g == pytest.approx(g_thr)


def test_goodput_prefers_larger_batches_later_in_training():
    for fam in ("cifar10", "deepspeech2", "yolov3"):
        batches = []
        for prog in (0.0, 0.5, 1.0):
            g, m, s = best_goodput(fam, "a100", 8, 2, prog)
            batches.append(8 * m * (s + 1))
        assert batches == sorted(batches) and batches[-1] > batches[0]


def test_speedup():
    assert float(speedup("yolov3", "t4", 1, 1, 0.3, base_worker_type="t4")) == pytest.approx(1.0)
    sp = speedup("yolov3", "t4", np.array([1, 2, 4, 8, 16]), np.array([1, 1, 1, 2, 4]), 0.3)
    assert np.all(np.diff(sp) > 0) and np.all(sp <= np.array([1, 2, 4, 8, 16]) + 1e-9)
    # heterogeneity: one H100 beats one T4 beats one K80
    h100, t4, k80 = (float(speedup("imagenet", w, 1, 1, 0.5)) for w in ("h100", "t4", "k80"))
    assert t4 == pytest.approx(1.0)
    assert h100 > t4 > k80
    # speedup is goodput over the baseline's goodput
    g, _, _ = best_goodput("imagenet", "h100", 1, 1, 0.5)
    g0, _, _ = best_goodput("imagenet", "t4", 1, 1, 0.5)
    assert h100 == pytest.approx(g / g0)


def test_best_batch_on_explicit_params_matches_the_family_search():
    fam = get_family("cifar10")
    spec = fam.spec()
    for gpus, servers in ((1, 1), (4, 1), (8, 2)):
        want = best_goodput("cifar10", "t4", gpus, servers, progress=0.5)
        got = best_batch(throughput_params(fam, "t4"), spec, fam.phi(0.5), gpus, servers)
        assert got[1:] == want[1:] and got[0] == pytest.approx(want[0])
