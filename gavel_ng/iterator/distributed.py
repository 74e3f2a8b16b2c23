"""Joining the job's process group from what the worker daemon put in the environment."""

from __future__ import annotations

import datetime
import os


def init_distributed(backend: str | None = None, timeout_s: float = 300.0) -> tuple[int, int]:
    """init_process_group for a multi-GPU gavel_ng job; returns (rank, world size).

    One process (WORLD_SIZE 1 or unset) needs no group and gets (0, 1). The backend
    defaults to nccl on GPUs and gloo on CPU. A job on one worker rendezvouses through
    MASTER_ADDR/MASTER_PORT (so scripts already calling init_process_group with env://
    work unchanged); a job spread over workers through a file in its checkpoint directory.
    """
    world = int(os.environ.get("WORLD_SIZE", "1"))
    rank = int(os.environ.get("RANK", "0"))
    if world <= 1:
        return 0, 1
    import torch
    import torch.distributed as dist

    if not dist.is_initialized():
        if backend is None:
            backend = "nccl" if torch.cuda.is_available() else "gloo"
        dist.init_process_group(backend, init_method=os.environ.get("GAVEL_NG_DIST_INIT", "env://"), rank=rank,
                                world_size=world, timeout=datetime.timedelta(seconds=timeout_s))
    return rank, world
