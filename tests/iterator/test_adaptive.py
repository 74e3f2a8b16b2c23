"""Adaptive mode with real PyTorch on CPU: noise-scale accuracy, online fit, batch choice, LR rules."""

from __future__ import annotations

import math
import os

import numpy as np
import pytest

torch = pytest.importorskip("torch")   # the worker extra

from gavel_ng.elastic.efficiency import AdaptiveSpec, efficiency
from gavel_ng.elastic.goodput import best_batch
from gavel_ng.errors import InputError
from gavel_ng.iterator import GavelIterator
from gavel_ng.iterator.adaptive import (
    AdaptiveTraining,
    Config,
    NoiseScale,
    fit_throughput,
    lr_factor,
    make_params,
    two_batch_estimate,
)

D, SIGMA2 = 10, 1.0
TRUE_THETA = [0.02, 0.001, 0.01, 0.002, 0.05, 0.005, 1.5]


class Regression:
    """y = x . w* + N(0, sigma^2), x ~ N(0, I_d); at w = w* + delta (squared loss / 2):
    G = delta, Sigma = (|delta|^2 + sigma^2) I + delta delta^T, so
    tr(Sigma) = d (|delta|^2 + sigma^2) + |delta|^2 and phi = tr(Sigma) / |delta|^2."""

    def __init__(self, seed: int = 0):
        self.gen = torch.Generator().manual_seed(seed)
        self.w_star = torch.randn(D, generator=self.gen)
        delta = torch.randn(D, generator=self.gen)
        self.delta = delta / delta.norm()                    # |delta|^2 = 1
        self.model = torch.nn.Linear(D, 1, bias=False)
        with torch.no_grad():
            self.model.weight.copy_((self.w_star + self.delta)[None])

    def truth(self) -> tuple[float, float]:
        d2 = float(self.delta.dot(self.delta))
        return d2, D * (d2 + SIGMA2) + d2

    def batch(self, n: int) -> tuple[torch.Tensor, torch.Tensor]:
        x = torch.randn(n, D, generator=self.gen)
        return x, x @ self.w_star + math.sqrt(SIGMA2) * torch.randn(n, generator=self.gen)

    def loss(self, x, y):
        return 0.5 * ((self.model(x).squeeze(1) - y) ** 2).mean()


def _frozen(problem: Regression, init_batch: int, max_local: int) -> AdaptiveTraining:
    opt = torch.optim.SGD(problem.model.parameters(), lr=0.0)     # weights stay put: the truth is constant
    return AdaptiveTraining(problem.model, opt, init_batch, init_batch, "sqrt", max_local_batch=max_local,
                            refit_every=10**6, noise_decay=0.99)


def _run_steps(problem: Regression, ada: AdaptiveTraining, steps: int) -> None:
    while ada.steps < steps:
        problem.loss(*problem.batch(ada.local_batch)).backward()
        ada.step()


@pytest.mark.parametrize("init_batch,max_local", [(16, 16), (32, 8)], ids=["differenced", "accumulation"])
def test_noise_scale_within_20_percent_on_one_gpu(init_batch, max_local):
    problem = Regression()
    ada = _frozen(problem, init_batch, max_local)
    assert ada.accumulation == (0 if max_local == init_batch else 3)
    _run_steps(problem, ada, 600)
    grad_sqr, trace = problem.truth()
    assert ada.noise.phi == pytest.approx(trace / grad_sqr, rel=0.2)


def test_noise_scale_across_replicas_within_20_percent():
    """The data-parallel estimator: local gradients of 4 replicas (batch 8) against their mean (batch 32)."""
    problem = Regression(seed=1)
    noise = NoiseScale(decay=0.99)
    for _ in range(600):
        grads = []
        for _ in range(4):
            problem.model.zero_grad()
            problem.loss(*problem.batch(8)).backward()
            grads.append(problem.model.weight.grad.reshape(-1).clone())
        local_sqr = float(np.mean([float(g.dot(g)) for g in grads]))
        mean = torch.stack(grads).mean(0)
        noise.update(*two_batch_estimate(local_sqr, 8, float(mean.dot(mean)), 32))
    grad_sqr, trace = problem.truth()
    assert noise.grad_sqr / noise.weight == pytest.approx(grad_sqr, rel=0.2)
    assert noise.trace / noise.weight == pytest.approx(trace, rel=0.2)
    assert noise.phi == pytest.approx(trace / grad_sqr, rel=0.2)


def _synthetic_times(configs, rng, noise=0.03):
    truth = make_params(TRUE_THETA, 256)
    k, n, m, s = (np.array(c, float) for c in zip(*configs))
    return truth.t_iter(m, s, k, n) * np.exp(rng.normal(0, noise, len(configs)))


def test_online_fit_predicts_held_out_times_within_10_percent():
    rng = np.random.default_rng(0)
    configs = [(k, n, m, s) for k, n in [(1, 1), (2, 1), (4, 1), (4, 2), (8, 2), (16, 4)]
               for m in (8, 16, 32, 64, 128) for s in (0, 1)]
    held = set(rng.choice(len(configs), len(configs) // 3, replace=False).tolist())
    held |= {i for i, c in enumerate(configs) if c[:2] == (8, 2) and c[2] in (16, 64)}
    train = [c for i, c in enumerate(configs) if i not in held]
    test = [c for i, c in enumerate(configs) if i in held]
    fitted = fit_throughput(*zip(*train), _synthetic_times(train, rng), max_local_batch=256)
    k, n, m, s = (np.array(c, float) for c in zip(*test))
    truth = make_params(TRUE_THETA, 256).t_iter(m, s, k, n)
    err = np.abs(fitted.t_iter(m, s, k, n) / truth - 1)
    assert err.max() < 0.10 and 1.0 <= fitted.gamma <= 10.0 and fitted.fit_error < 0.1


def test_fit_priors_on_one_gpu_assume_perfect_scaling():
    rng = np.random.default_rng(1)
    configs = [(1, 1, m, 0) for m in (8, 16, 32)]
    fitted = fit_throughput(*zip(*configs), _synthetic_times(configs, rng), max_local_batch=64)
    assert fitted.alpha_local == fitted.beta_local == fitted.alpha_node == 0.0 and fitted.gamma == 1.0
    assert fitted.alpha_grad == pytest.approx(TRUE_THETA[0], rel=0.2)
    with pytest.raises(InputError, match="seconds"):
        fit_throughput([], [], [], [], [], max_local_batch=64)


def test_chosen_batch_grows_with_the_noise_scale():
    params = make_params(TRUE_THETA, 256)
    spec = AdaptiveSpec("job", 32, 4096)
    batches = []
    for phi in (10.0, 100.0, 1000.0, 10000.0):
        _, m, s = best_batch(params, spec, phi, gpus=4, servers=1)
        batches.append(4 * m * (s + 1))
    assert batches == sorted(batches) and batches[-1] > batches[0] >= 32
    # the same through the job's agent: measured times, then a noise scale that grows
    problem = Regression()
    ada = AdaptiveTraining(problem.model, torch.optim.SGD(problem.model.parameters(), lr=0.1), 32, 4096,
                           max_local_batch=256)
    truth = make_params(TRUE_THETA, 256)
    for m in (32, 64, 128):
        for _ in range(3):
            ada.times.add(Config(1, 1, m, 0), float(truth.t_iter(m, 0, 1, 1)))
    chosen = []
    for phi in (10.0, 1000.0, 100000.0):
        ada.noise = NoiseScale()
        ada.noise.update(1.0, phi)
        ada.adapt()
        chosen.append(ada.batch)
    assert chosen == sorted(chosen) and chosen[-1] > chosen[0]


def test_lr_rules_on_known_inputs():
    assert lr_factor("sqrt", 256, 64) == pytest.approx(2.0)
    assert lr_factor("linear", 256, 64) == pytest.approx(4.0)
    assert lr_factor("none", 256, 64) == 1.0
    # AdaScale: (sigma^2 + mu^2) / (sigma^2 / S + mu^2) with sigma^2 = tr/M0, mu^2 = |G|^2
    trace, g2, m0, m = 300.0, 2.0, 64, 256
    gain = (trace / m0 + g2) / (trace / m + g2)
    assert lr_factor("adascale", m, m0, trace / g2) == pytest.approx(gain)
    assert gain == pytest.approx(m / m0 * efficiency(m, m0, trace / g2))
    assert lr_factor("adascale", m0, m0, 5.0) == pytest.approx(1.0)
    assert lr_factor("adascale", m, m0, 1e12) == pytest.approx(4.0)
    with pytest.raises(InputError, match="lr_scaling"):
        lr_factor("cubic", 256, 64)


def test_optimizer_runs_at_the_scaled_lr_and_keeps_its_own():
    problem = Regression()
    opt = torch.optim.SGD(problem.model.parameters(), lr=0.01)
    ada = AdaptiveTraining(problem.model, opt, 8, 64, "linear", refit_every=10**6)
    ada.local_batch = 32                                    # 4 x M0: the linear rule gives 4 x lr
    before = problem.model.weight.detach().clone()
    problem.loss(*problem.batch(32)).backward()
    grad = problem.model.weight.grad.clone()
    assert ada.step()
    assert torch.allclose(problem.model.weight, before - 0.04 * grad, atol=1e-6)
    assert opt.param_groups[0]["lr"] == 0.01 and float(problem.model.weight.grad.abs().sum()) == 0.0


def test_bad_input_names_field_and_value():
    model = torch.nn.Linear(2, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    with pytest.raises(InputError, match="adaptive.max_batch"):
        AdaptiveTraining(model, opt, 64, 32)
    with pytest.raises(InputError, match="adaptive.lr_scaling"):
        AdaptiveTraining(model, opt, 32, 64, "cubic")
    with pytest.raises(InputError, match="refit_every"):
        AdaptiveTraining(model, opt, 32, 64, refit_every=0)


def test_training_under_gavel_iterator_grows_its_batch_and_learns(tmp_path):
    """The few-line script: loss falls, the noise scale grows toward convergence, the batch follows."""
    torch.manual_seed(0)
    n = 4096
    x = torch.randn(n, D)
    y = x @ torch.randn(D) + 0.1 * torch.randn(n)
    data = torch.utils.data.TensorDataset(x, y)
    model = torch.nn.Linear(D, 1, bias=False)
    opt = torch.optim.SGD(model.parameters(), lr=0.02)
    # step times from a clock the test drives (a fixed cost plus a cost per example), so the fitted
    # throughput model and with it the batch choice do not depend on this machine's load
    now = [0.0]
    ada = AdaptiveTraining(model, opt, 8, 128, "adascale", refit_every=10, refit_seconds=0, clock=lambda: now[0])
    state = {}
    it = GavelIterator(ada.data_loader(data), lambda p: None, lambda p: state.update(ada.state_dict()),
                       max_steps=300, checkpoint_dir=tmp_path)
    losses, phis = [], []
    for xb, yb in it:
        now[0] += 0.01 + 1e-4 * len(xb)
        loss = 0.5 * ((model(xb).squeeze(1) - yb) ** 2).mean()
        loss.backward()
        if ada.step():
            losses.append(loss.item())
            phis.append(ada.noise.phi)
    assert np.mean(losses[-20:]) < 0.1 * np.mean(losses[:5])
    assert phis[-1] > 10 * np.median(phis[1:20]) and ada.batch > 8      # early single estimates can be wild
    assert state["steps"] == ada.steps and ada.report()["phi"] == ada.noise.phi


def _replica(rank: int, init_file: str, out: str) -> None:
    torch.distributed.init_process_group("gloo", init_method=f"file://{init_file}", rank=rank, world_size=2)
    problem = Regression(seed=0)
    problem.gen.manual_seed(100 + rank)                  # same weights, independent data per rank
    ada = _frozen(problem, 16, 16)
    assert (ada.gpus, ada.local_batch, ada.accumulation) == (2, 8, 0)
    _run_steps(problem, ada, 400)
    if rank == 0:
        with open(out, "w") as f:
            f.write(repr(ada.noise.phi))
    torch.distributed.barrier()   # both ranks done with the pair before either leaves
    # gloo's teardown can still race with the peer's and abort the process ("terminate called
    # without an active exception", seen once in a clean-clone run): leave without destructors
    os._exit(0)


@pytest.mark.slow
def test_noise_scale_across_two_real_processes(tmp_path):
    """Two gloo ranks: each local gradient (batch 8) against the all-reduced one (batch 16)."""
    out = tmp_path / "phi"
    torch.multiprocessing.spawn(_replica, args=(str(tmp_path / "init"), str(out)), nprocs=2)
    grad_sqr, trace = Regression().truth()
    assert float(out.read_text()) == pytest.approx(trace / grad_sqr, rel=0.2)


def test_steps_count_progress_at_the_initial_batch():
    """A GavelIterator step of an adaptive job is a step at M0: an optimizer step at batch M counts
    M E(M) / M0 of them, the fraction carried over (and checkpointed)."""
    model = torch.nn.Linear(4, 1)
    ada = AdaptiveTraining(model, torch.optim.SGD(model.parameters(), lr=0.01), init_batch=8, max_batch=64,
                           refit_every=10**6)
    data = torch.utils.data.TensorDataset(torch.randn(512, 4), torch.randn(512, 1))
    it = GavelIterator(ada.data_loader(data), lambda p: None, lambda p: None, max_steps=40, adaptive=ada)
    for x, y in it:                              # at M0 a step is a step
        torch.nn.functional.mse_loss(model(x), y).backward()
        ada.step()
    assert it.step == 40 and ada.steps == 40
    ada.local_batch = 24                         # three times M0: E(24) of 3 steps each
    ada._progress = 0.0
    expected = 0.0
    for _ in range(5):
        torch.nn.functional.mse_loss(model(torch.randn(24, 4)), torch.randn(24, 1)).backward()
        ada.step()
        expected += 3 * efficiency(24, 8, ada.noise.phi)      # at the noise scale of that step
    took = ada.take_progress()
    assert took == int(expected + 1e-9) and ada.state_dict()["progress"] == pytest.approx(expected - took)
