"""A paced job: a training job whose steps take exactly what the throughput table says.

    python -m gavel_ng.worker.paced_job --table TABLE --job-type 'ResNet-18 (batch size 32)' \
        [--scale-factor 2] [--occupancy DIR]

It stands for a real job on a real GPU when there is none (this is how the simulator is checked
against a cluster of real workers: experiments/sim_vs_cluster.py). It runs as a real process under
a real worker, through GavelIterator, so leases, renewals, checkpoints (a small JSON of its step)
and restarts are the runtime's own; only the GPU work is replaced by waiting: a step on worker type
W takes 1 / T[class, W] seconds, with T the same table (a built-in name or a file) the simulator reads.

Space sharing: `--occupancy DIR` is a directory every paced job of the cluster shares (one machine);
rank 0 of each attempt registers there which GPU it runs on (worker type and first GPU), and while
another live job is registered on the same GPU it runs at the table's in-pair rate for the two
classes. A job learns that its partner left when it leaves, as a job on a real GPU would speed up.

A job on K GPUs runs K processes (the worker starts one per GPU); rank 0 paces and talks to the
scheduler, the other ranks do no work and end with rank 0's result (a real job's ranks would step
together, which the table's multi-GPU rate already accounts for). No torch is imported.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import signal
import sys
import time
from pathlib import Path

log = logging.getLogger("gavel_ng.paced_job")
RESCAN_S = 0.1          # how often a job looks whether its GPU gained or lost a partner
MAX_BACKLOG_S = 2.0     # steps late by more than this (a stalled process) are not caught up


class Pace:
    """The rate of this job's steps on its GPU now: the table's isolated or in-pair steps/s."""

    def __init__(self, table, key: tuple[str, int], worker_type: str, slot: Path | None, me: str):
        self.table, self.key, self.worker_type, self.slot, self.me = table, key, worker_type, slot, me
        self.alone = table.get(key, worker_type)
        if not self.alone > 0:
            raise SystemExit(f"paced job: the table has no rate for {key[0]!r} x{key[1]} on {worker_type!r}")
        self.rate, self.partner, self._scanned = self.alone, None, 0.0

    def current(self, now: float) -> float:
        if self.slot is not None and now - self._scanned >= RESCAN_S:
            self._scanned = now
            partner = _partner(self.slot, self.me)
            if partner != self.partner:
                self.partner = partner
                self.rate = self._pair_rate(partner) if partner is not None else self.alone
                log.info("%s: %.3f steps/s", f"sharing with {partner[0]} x{partner[1]}" if partner else "alone",
                         self.rate)
        return self.rate

    def _pair_rate(self, partner: tuple[str, int]) -> float:
        mine = self.table.pairs.get(self.worker_type, {}).get(self.key, {}).get(partner)
        if mine is None or not mine[0] > 0:
            log.warning("no in-pair rate for %s with %s on %s: running at the isolated rate", self.key, partner,
                        self.worker_type)
            return self.alone
        return float(mine[0])


def _partner(slot: Path, me: str) -> tuple[str, int] | None:
    """The class of another live job registered on this GPU, if any."""
    try:
        names = os.listdir(slot)
    except OSError:
        return None
    for name in names:
        if name == me or not name.endswith(".json"):
            continue
        try:
            info = json.loads((slot / name).read_text())
            os.kill(int(info["pid"]), 0)          # a registration left by a killed job is no partner
        except (OSError, ValueError, KeyError, TypeError):
            continue
        return str(info["job_type"]), int(info["scale_factor"])
    return None


def follower(result_file: Path | None) -> int:
    """Ranks other than 0: no work; end with rank 0's result once it wrote it (SIGTERM: the same)."""
    signal.signal(signal.SIGTERM, lambda *_: None)     # rank 0 checkpoints and writes its result first
    if result_file is None:
        return 0
    lead = result_file.with_name("result-r0.json")
    while not lead.exists():
        time.sleep(0.05)
    time.sleep(0.05)                                   # (written in one call; let it land)
    result_file.write_text(lead.read_text())
    return 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--table", required=True, help="a built-in table name or a .json/.csv file")
    ap.add_argument("--job-type", required=True)
    ap.add_argument("--scale-factor", type=int, default=1)
    ap.add_argument("--occupancy", help="directory shared by the cluster's paced jobs (space sharing)")
    ap.add_argument("--worker-type", help="outside a worker (the worker sets GAVEL_NG_WORKER_TYPE)")
    ap.add_argument("--steps", type=int, help="total steps when run outside a worker")
    ap.add_argument("--checkpoint-dir", help="when run outside a worker")
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    if int(os.environ.get("RANK", "0")) > 0:
        result = os.environ.get("GAVEL_NG_RESULT_FILE")
        return follower(Path(result) if result else None)

    from gavel_ng.iterator import GavelIterator
    from gavel_ng.profiles.table_io import resolve_table

    worker_type = os.environ.get("GAVEL_NG_WORKER_TYPE") or args.worker_type
    if not worker_type:
        raise SystemExit("paced job: no worker type (run it under a worker, or pass --worker-type)")
    key = (args.job_type, args.scale_factor)
    me = f"job{os.environ.get('GAVEL_NG_JOB_ID', os.getpid())}.json"
    slot = None
    if args.occupancy:
        gpu = os.environ.get("CUDA_VISIBLE_DEVICES", "0").split(",")[0]
        slot = Path(args.occupancy) / f"{worker_type}-gpu{gpu}"
        slot.mkdir(parents=True, exist_ok=True)
        (slot / me).write_text(json.dumps({"job_type": key[0], "scale_factor": key[1], "pid": os.getpid()}))
    pace = Pace(resolve_table(args.table), key, worker_type, slot, me)

    def save(path: Path) -> None:
        (path / "paced.json").write_text(json.dumps({"step": it.step}))

    def load(path: Path) -> None:
        json.loads((path / "paced.json").read_text())

    it = GavelIterator(_Forever(), load, save, max_steps=args.steps, checkpoint_dir=args.checkpoint_dir)
    try:
        due = None
        for _ in it:
            now = time.monotonic()
            if due is None:
                _note_start(it)
            due = now if due is None else max(due, now - MAX_BACKLOG_S)
            due += 1.0 / pace.current(now)
            wait = due - time.monotonic()
            if wait > 0:
                time.sleep(wait)
    finally:
        if slot is not None:
            (slot / me).unlink(missing_ok=True)
    return 0


def _note_start(it) -> None:
    """One line per attempt in CHECKPOINT_DIR/paced.jsonl: when its first step began (wall clock), so that
    what a launch costs (round start to first step) can be measured from outside."""
    if it.checkpoint_dir is None:
        return
    line = {"attempt": int(os.environ.get("GAVEL_NG_ATTEMPT", "0")), "first_step": time.time(),
            "start_step": it.step - 1}
    with open(Path(it.checkpoint_dir) / "paced.jsonl", "a") as f:
        f.write(json.dumps(line) + "\n")


class _Forever:
    """An endless loader of dummy batches (0: the iterator reads None as the loader's end); the iterator
    stops at the lease end or the job's total."""

    def __iter__(self):
        while True:
            yield 0


if __name__ == "__main__":
    sys.exit(main())
