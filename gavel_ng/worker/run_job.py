"""The built-in job: trains one of the 26 Gavel job types on synthetic data with GavelIterator.

    python -m gavel_ng.worker.run_job --job-type 'ResNet-18 (batch size 32)' --size tiny

Under a worker, steps, lease and checkpoint directory come from the environment; on its
own, pass --steps and --checkpoint-dir. Rank 0 appends one JSON line per step to
CHECKPOINT_DIR/train.jsonl ({"step", "loss", "attempt"}) plus one per checkpoint load and
save with a checksum of the weights, which is how the tests see that restores are real.
It is also the reference for adapting a script (docs/deploy.md).

It trains on the GPU the worker gave it (``CUDA_VISIBLE_DEVICES``) whenever torch sees one
(``--device auto``), and on the CPU otherwise.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
import time
from pathlib import Path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--job-type", required=True)
    parser.add_argument("--size", default="full", choices=("tiny", "full"))
    parser.add_argument("--steps", type=int, help="total steps when run outside a worker")
    parser.add_argument("--checkpoint-dir", help="when run outside a worker")
    parser.add_argument("--batches", type=int, default=4, help="distinct synthetic batches per rank")
    parser.add_argument("--device", default="auto", choices=("auto", "cpu", "cuda"),
                        help="auto: the GPU the worker assigned when torch sees one, else the CPU")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")

    import torch

    from gavel_ng.iterator import GavelIterator, init_distributed
    from gavel_ng.iterator import checkpoint as ckpt
    from gavel_ng.worker.trainlog import TrainLog
    from gavel_ng.workloads import get_workload, parse_job_type

    family, batch_size = parse_job_type(args.job_type)
    workload = get_workload(family)
    device = pick_device(args.device)
    rank, world = init_distributed("nccl" if device.type == "cuda" else "gloo")
    torch.manual_seed(0)                       # same initial weights on every rank
    model = workload.build_model(args.size).to(device)
    if world > 1:
        ids = [device.index] if device.type == "cuda" else None
        model = torch.nn.parallel.DistributedDataParallel(model, device_ids=ids)
    core = model.module if world > 1 else model
    optimizer = workload.make_optimizer(model)
    loader = [workload.make_batch(batch_size, args.size, seed=1000 * rank + i, device=device)
              for i in range(args.batches)]
    train_log = TrainLog(args.checkpoint_dir, rank)
    record = train_log.record
    record(event="device", device=str(device), name=device_name(device))

    def checksum() -> float:
        return float(sum(p.detach().double().sum() for p in core.parameters()))

    save_delay = float(os.environ.get("RUN_JOB_SAVE_DELAY") or 0)   # tests: a slow save

    def save_checkpoint(path: Path) -> None:
        if save_delay:
            time.sleep(save_delay)
        torch.save({"model": core.state_dict(), "optimizer": optimizer.state_dict()}, path / "model.pt")
        record(event="save", step=it.step, checksum=checksum())

    def load_checkpoint(path: Path) -> None:
        state = torch.load(path / "model.pt", weights_only=True, map_location=device)
        core.load_state_dict(state["model"])
        optimizer.load_state_dict(state["optimizer"])
        record(event="load", step=ckpt.step_of(path), checksum=checksum())

    it = GavelIterator(loader, load_checkpoint, save_checkpoint, max_steps=args.steps,
                       checkpoint_dir=args.checkpoint_dir)
    for batch in it:
        loss = workload.train_step(model, optimizer, batch)
        record(step=it.step, loss=loss)
    train_log.flush()
    if world > 1:
        import torch.distributed as dist

        dist.destroy_process_group()
    return 0


def pick_device(choice: str):
    """The rank's device: its own GPU (the worker shows each rank one) or the CPU."""
    import torch

    if choice == "cpu" or (choice == "auto" and not torch.cuda.is_available()):
        return torch.device("cpu")
    if not torch.cuda.is_available():
        raise SystemExit("--device cuda: torch sees no GPU (CUDA_VISIBLE_DEVICES="
                         f"{os.environ.get('CUDA_VISIBLE_DEVICES')!r})")
    return torch.device("cuda", int(os.environ.get("LOCAL_RANK", "0")) % torch.cuda.device_count())


def device_name(device) -> str:
    import torch

    return torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu"


if __name__ == "__main__":
    sys.exit(main())
