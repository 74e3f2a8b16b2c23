"""An adaptive training job: least squares on synthetic data, batch size chosen by AdaptiveTraining.

    python -m gavel_ng.examples.adaptive_job --steps 300 --checkpoint-dir /tmp/ada     (on its own)

Submitted with an ``adaptive`` block in its job spec, it runs under the `goodput` policy,
which may resize it between rounds (docs/elastic.md). The lines that make a script
adaptive are marked ``# adaptive``; the rest is an ordinary GavelIterator script.

The data are ``y = x w* + noise`` (``--noise``: the label noise's standard deviation), so
the gradient noise is known and grows relative to the gradient as the fit improves, as
in real training; features of decreasing scale make some directions slow to learn, so the
loss keeps falling over thousands of steps. ``--compute A,B`` sleeps ``A + B x examples`` seconds per micro-batch:
a stand-in for a GPU's forward and backward time in demos and tests, where the CPU
model itself takes microseconds. Rank 0 appends JSON lines to CHECKPOINT_DIR/train.jsonl:
``{"step", "loss", "batch", "gpus"}`` every optimizer step (``loss`` on the whole data
set), and a line per checkpoint load and save.
"""

from __future__ import annotations

import argparse
import logging
import sys
import time
from pathlib import Path


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, help="total steps at the initial batch, when run outside a worker")
    ap.add_argument("--checkpoint-dir", help="when run outside a worker")
    ap.add_argument("--init-batch", type=int, default=32)
    ap.add_argument("--max-batch", type=int, default=1024)
    ap.add_argument("--lr", type=float, default=0.02)
    ap.add_argument("--examples", type=int, default=8192)
    ap.add_argument("--dim", type=int, default=32)
    ap.add_argument("--noise", type=float, default=1.0)
    ap.add_argument("--compute", default="0,0", help="A,B: sleep A + B x examples seconds per micro-batch")
    ap.add_argument("--refit-every", type=int, default=20)
    ap.add_argument("--refit-seconds", type=float, default=1.0)
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    fixed_s, per_example_s = (float(v) for v in args.compute.split(","))

    import torch

    from gavel_ng.iterator import GavelIterator, init_distributed
    from gavel_ng.iterator.adaptive import AdaptiveTraining
    from gavel_ng.iterator.checkpoint import step_of
    from gavel_ng.worker.trainlog import TrainLog

    rank, _ = init_distributed("gloo")       # this toy model trains on the CPU, also on a GPU server
    gen = torch.Generator().manual_seed(0)          # the same data and initial weights on every rank
    X = torch.randn(args.examples, args.dim, generator=gen) * torch.logspace(0, -1, args.dim)   # slow directions
    y = X @ torch.randn(args.dim, 1, generator=gen) + args.noise * torch.randn(args.examples, 1, generator=gen)
    model = torch.nn.Linear(args.dim, 1)
    with torch.no_grad():
        model.weight.copy_(torch.randn(1, args.dim, generator=gen))
        model.bias.zero_()
    optimizer = torch.optim.SGD(model.parameters(), lr=args.lr)
    ada = AdaptiveTraining(model, optimizer, init_batch=args.init_batch, max_batch=args.max_batch,  # adaptive
                           refit_every=args.refit_every, refit_seconds=args.refit_seconds)
    loader = ada.data_loader(torch.utils.data.TensorDataset(X, y))                                   # adaptive

    train_log = TrainLog(args.checkpoint_dir, rank)
    record = train_log.record

    def save_checkpoint(path: Path) -> None:
        torch.save({"model": model.state_dict(), "optimizer": optimizer.state_dict(),
                    "adaptive": ada.state_dict()}, path / "model.pt")                                 # adaptive
        record(event="save", step=it.step)

    def load_checkpoint(path: Path) -> None:
        state = torch.load(path / "model.pt", weights_only=False)
        model.load_state_dict(state["model"])
        optimizer.load_state_dict(state["optimizer"])
        ada.load_state_dict(state["adaptive"])                                                       # adaptive
        record(event="load", step=step_of(path), batch=ada.batch, gpus=ada.gpus)

    it = GavelIterator(loader, load_checkpoint, save_checkpoint, max_steps=args.steps,
                       checkpoint_dir=args.checkpoint_dir, adaptive=ada)                            # adaptive
    for xb, yb in it:
        if fixed_s or per_example_s:
            time.sleep(fixed_s + per_example_s * len(xb))
        torch.nn.functional.mse_loss(model(xb), yb).backward()
        if ada.step() and train_log.on:                         # adaptive: instead of optimizer.step()
            with torch.no_grad():
                loss = float(torch.nn.functional.mse_loss(model(X), y))
            record(step=it.step, loss=loss, batch=ada.batch, gpus=ada.gpus)
    train_log.flush()
    if ada.dist is not None:
        ada.dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
