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

Adaptive jobs (a job spec with an `adaptive` block, which the worker passes as GAVEL_NG_ADAPTIVE;
standalone: `--adaptive JSON --gpus K`): the job runs as the simulator's model of it says
(gavel_ng.elastic.running, the code the simulator runs): on the K GPUs of its type it was launched
on, it picks the batch of best goodput at its progress when it starts and again at each round start
(when its lease was renewed and the old lease's end passed), and one optimizer step takes
batch / throughput seconds. Its steps are steps at M0, as GavelIterator counts an adaptive job's
(`AdaptivePace.take_progress`): progress made exactly as the simulator integrates it, so the job's
total and the scheduler's view of its progress mean what they mean in the simulator. A resize is the
runtime's relaunch on the new GPUs; the checkpoint carries the progress (and the last batch) across
it. The job sends no report, so the scheduler schedules it by the modeled profile at its progress,
the model the simulator's policy reads. A step shorter than `--min-step-seconds` is run several at a
time (one iterator step), so that a fast model does not busy the CPU.

A job on K GPUs runs K processes (the worker starts one per GPU); rank 0 paces and talks to the
scheduler, the other ranks do no work and end with rank 0's result (a real job's ranks would step
together, which the table's multi-GPU rate already accounts for). No torch is imported.
"""

from __future__ import annotations

import argparse
import json
import logging
import math
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


class AdaptivePace:
    """An adaptive job on K GPUs of one type, run by the simulator's model (module docstring). It is the
    iterator's `adaptive`: GavelIterator counts the job's steps at M0 by `take_progress`, and sends no
    report (`report` None)."""

    report = None

    def __init__(self, spec, worker_type: str, gpus: int, servers: int, network_gbps: float):
        self.spec, self.worker_type, self.gpus, self.servers = spec, worker_type, int(gpus), int(servers)
        self.network = float(network_gbps)
        self.total = 0           # the job's steps at M0 (set by `start`)
        self.done = 0.0          # steps at M0 made, with the fraction
        self.counted = 0         # whole steps handed to the iterator
        self.batch = 0           # the total batch it ran at last (0: none yet)
        self.step_seconds = math.inf
        self._throughput = 0.0

    @property
    def progress(self) -> float:
        return min(self.done / self.total, 1.0) if self.total > 0 else 0.0

    def start(self, total: int, step: int) -> None:
        """The iterator's total and restored step, once it started."""
        self.total = int(total)
        if math.floor(self.done + 1e-9) != int(step):   # no checkpoint of ours (or another's): its step
            self.done = float(step)
        self.counted = int(step)

    def pick(self) -> None:
        """The batch of best goodput here at the job's progress now (elastic.running.pick, as the simulator)."""
        from gavel_ng.elastic.running import pick

        p = pick(self.spec, self.worker_type, self.gpus, self.servers, self.progress, self.network, self.batch)
        if not p.batch[0] > 0:
            raise SystemExit(f"paced job: {self.spec.family} has no allowed batch on {self.gpus} x {self.worker_type}")
        self.batch, self._throughput = int(p.batch[0]), float(p.throughput[0])
        self.step_seconds = float(p.step_seconds[0])
        log.info("%d x %s at progress %.4f: batch %d (%d per GPU, %d accumulation), %.4f s per step, goodput %.1f",
                 self.gpus, self.worker_type, self.progress, self.batch, int(p.local_batch[0]),
                 int(p.accumulation[0]), self.step_seconds, float(p.goodput[0]))

    def run(self, steps: int) -> float:
        """Make `steps` optimizer steps' progress: the seconds they take (less where the job finishes)."""
        from gavel_ng.elastic.running import advance

        after, used, done = advance(self.spec, self.batch, self._throughput, self.total * self.spec.init_batch,
                                    self.progress, steps * self.step_seconds)
        self.done = float(self.total) if done[0] else float(after[0]) * self.total
        return float(used[0])

    def take_progress(self) -> int:
        whole = math.floor(self.done + 1e-9) - self.counted
        self.counted += whole
        return int(whole)

    def state(self) -> dict:
        return {"done": self.done, "batch": self.batch}

    def load(self, state: dict) -> None:
        """A checkpoint's progress (the iterator restores its step, the whole part, itself)."""
        self.done, self.batch = float(state.get("done", 0.0)), int(state.get("batch", 0))
        self.counted = math.floor(self.done + 1e-9)


def adaptive_pace(args, env, worker_type: str) -> AdaptivePace | None:
    """The job's AdaptivePace when it is adaptive (the worker's GAVEL_NG_ADAPTIVE, or `--adaptive`)."""
    text = env.adaptive if env is not None and env.adaptive else args.adaptive
    if not text:
        return None
    from gavel_ng.elastic.families import parse_adaptive
    from gavel_ng.elastic.workload import POLLUX_NETWORK_GBPS
    from gavel_ng.errors import InputError

    try:
        spec = parse_adaptive(json.loads(text), args.job_type, "adaptive")
    except (InputError, ValueError) as exc:
        raise SystemExit(f"paced job: {exc}") from None
    gpus = env.world_size if env is not None else args.gpus
    servers = env.servers if env is not None else args.servers
    return AdaptivePace(spec, worker_type, gpus, min(servers, gpus), args.network_gbps or POLLUX_NETWORK_GBPS)


def run_adaptive(it, pace: AdaptivePace, min_step_s: float, clock=time.monotonic, sleep=time.sleep) -> None:
    """The adaptive job's loop: a batch per round (module docstring), each iterator step as many optimizer
    steps as make `min_step_s`, each taking the model's step time."""
    due = until = None
    for _ in it:
        now = clock()
        if due is None:
            if it.total is None:
                raise SystemExit("paced job: an adaptive job needs --steps outside a worker")
            pace.start(it.total, it.step)
            pace.pick()
            _note_start(it, it.step)
            until = it.lease.deadline if it.lease is not None else None
        elif until is not None and now >= until and it.lease.deadline > until:   # renewed: a new round
            pace.pick()
            until = it.lease.deadline
        due = now if due is None else max(due, now - MAX_BACKLOG_S)
        due += pace.run(max(1, math.ceil(min_step_s / pace.step_seconds)))
        wait = due - clock()
        if wait > 0:
            sleep(wait)


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
    ap.add_argument("--adaptive", help="outside a worker: the adaptive block (JSON) of an adaptive job")
    ap.add_argument("--gpus", type=int, default=1, help="outside a worker: an adaptive job's GPU count")
    ap.add_argument("--servers", type=int, default=1, help="outside a worker: servers an adaptive job spans")
    ap.add_argument("--network-gbps", type=float,
                    help="an adaptive job's network between servers (default: the simulator's, Pollux's 50 Gb/s)")
    ap.add_argument("--min-step-seconds", type=float, default=0.02,
                    help="an adaptive job runs shorter optimizer steps several at a time")
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    if int(os.environ.get("RANK", "0")) > 0:
        result = os.environ.get("GAVEL_NG_RESULT_FILE")
        return follower(Path(result) if result else None)

    from gavel_ng.iterator import GavelIterator
    from gavel_ng.iterator.lease import JobEnv

    worker_type = os.environ.get("GAVEL_NG_WORKER_TYPE") or args.worker_type
    if not worker_type:
        raise SystemExit("paced job: no worker type (run it under a worker, or pass --worker-type)")
    ada = adaptive_pace(args, JobEnv.from_env(), worker_type)
    if ada is not None:
        def save(path: Path) -> None:
            (path / "paced.json").write_text(json.dumps({"step": it.step, **ada.state()}))

        def load(path: Path) -> None:
            ada.load(json.loads((path / "paced.json").read_text()))

        it = GavelIterator(_Forever(), load, save, max_steps=args.steps, checkpoint_dir=args.checkpoint_dir,
                           adaptive=ada)
        run_adaptive(it, ada, args.min_step_seconds)
        return 0

    from gavel_ng.profiles.table_io import resolve_table

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
                _note_start(it, it.step - 1)
            due = now if due is None else max(due, now - MAX_BACKLOG_S)
            due += 1.0 / pace.current(now)
            wait = due - time.monotonic()
            if wait > 0:
                time.sleep(wait)
    finally:
        if slot is not None:
            (slot / me).unlink(missing_ok=True)
    return 0


def _note_start(it, start_step: int) -> None:
    """One line per attempt in CHECKPOINT_DIR/paced.jsonl: when its first step began (wall clock), so that
    what a launch costs (round start to first step) can be measured from outside."""
    if it.checkpoint_dir is None:
        return
    line = {"attempt": int(os.environ.get("GAVEL_NG_ATTEMPT", "0")), "first_step": time.time(),
            "start_step": start_step}
    Path(it.checkpoint_dir).mkdir(parents=True, exist_ok=True)
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
