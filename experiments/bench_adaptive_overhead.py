"""Per-iteration overhead of adaptive mode (gavel_ng.iterator.adaptive) on CPU.

    python experiments/bench_adaptive_overhead.py [--steps 400] [--hidden 256] [--batch 32] [--repeat 3]

Trains the same small MLP on synthetic data twice at the same batch: a plain loop
(``backward(); optimizer.step(); optimizer.zero_grad()``) and the adaptive one
(``backward(); ada.step()``, with ``max_batch = init_batch`` so the batch cannot move and
both loops do the same arithmetic). The difference is the agent's cost: flattening the
gradients, the noise-scale estimate (one-GPU differenced estimator: a gradient copy and
two dot products) and the LR rule per step; the L-BFGS-B refit with the best-batch
search, which runs every ``refit_seconds`` (30 s by default), is timed on its own.
Timings, not a test: shared machines vary.
"""

from __future__ import annotations

import argparse
import logging
import time

import torch

from gavel_ng.iterator.adaptive import AdaptiveTraining

log = logging.getLogger("bench_adaptive_overhead")


def _setup(hidden: int, seed: int = 0):
    torch.manual_seed(seed)
    model = torch.nn.Sequential(torch.nn.Linear(32, hidden), torch.nn.ReLU(), torch.nn.Linear(hidden, 10))
    return model, torch.optim.SGD(model.parameters(), lr=0.01)


def _loop(hidden: int, batch: int, steps: int, adaptive: bool,
          refit_every: int) -> tuple[float, AdaptiveTraining | None]:
    model, opt = _setup(hidden)
    ada = (AdaptiveTraining(model, opt, batch, batch, "adascale", refit_every=refit_every, refit_seconds=0)
           if adaptive else None)
    x, y = torch.randn(batch, 32), torch.randint(0, 10, (batch,))
    loss_fn = torch.nn.CrossEntropyLoss()
    t0 = None
    for i in range(steps + 20):                  # 20 warm-up steps
        if i == 20:
            t0 = time.perf_counter()
        loss_fn(model(x), y).backward()
        if ada is not None:
            ada.step()
        else:
            opt.step()
            opt.zero_grad(set_to_none=False)
    return (time.perf_counter() - t0) / steps, ada


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=400)
    ap.add_argument("--hidden", type=int, default=256)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--repeat", type=int, default=3)
    a = ap.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    torch.set_num_threads(1)
    plain, adaptive, ada = [], [], None
    for _ in range(a.repeat):                     # interleaved, best of each: less sensitive to a busy machine
        plain.append(_loop(a.hidden, a.batch, a.steps, False, 10**9)[0])
        t, ada = _loop(a.hidden, a.batch, a.steps, True, 10**9)
        adaptive.append(t)
    plain_s, adaptive_s = min(plain), min(adaptive)
    t0 = time.perf_counter()
    for _ in range(10):
        ada.adapt()
    refit = (time.perf_counter() - t0) / 10
    params = sum(p.numel() for p in ada.params)
    log.info("MLP 32-%d-10 (%d parameters), batch %d, %d steps, best of %d, 1 thread", a.hidden, params, a.batch,
             a.steps, a.repeat)
    log.info("plain step     %8.1f us", plain_s * 1e6)
    log.info("adaptive step  %8.1f us  (+%.1f us, +%.1f %%) without refits", adaptive_s * 1e6,
             (adaptive_s - plain_s) * 1e6, 100 * (adaptive_s / plain_s - 1))
    log.info("one refit + best-batch search: %.2f ms (%d configuration(s) timed); at the default "
             "refit_seconds=30 that is %.3f %% of the time", refit * 1e3, len(ada.times.stats), 100 * refit / 30)


if __name__ == "__main__":
    main()
