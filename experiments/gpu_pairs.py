"""Pair contention and GavelIterator overhead, measured on a real GPU.

    python experiments/gpu_pairs.py [--job-types ...] [--seconds 5] [--size full] [--out DIR]

One process per job type (the way a worker runs jobs: separate processes, separate CUDA
contexts, no MPS) builds its model on the GPU, warms up and then waits for orders. The
controller then times windows of `--seconds` in which chosen processes train at once,
all starting at the same instant:

* every job type alone, as a plain loop and through ``GavelIterator`` (alternating
  plain/iterator windows twice, so drift hits both alike): the iterator's overhead;
* every pair of distinct job types at once: each member's steps/s
  as a fraction of its own alone, the quantity Gavel's space sharing plans with.

Beside each figure it prints what gavel_ng's built-in model predicts for an H100 (steps/s
alone, pair fractions) and Gavel's measured V100 pair fractions. Writes
DIR/gpu_isolated.csv and DIR/gpu_pairs.csv. Without a GPU it runs on the CPU (a dry run).
"""

from __future__ import annotations

import argparse
import itertools
import json
import logging
import subprocess
import sys
import time
from pathlib import Path

from common import write_rows

log = logging.getLogger("gpu_pairs")
JOB_TYPES = ["ResNet-18 (batch size 32)", "ResNet-50 (batch size 32)", "Transformer (batch size 32)",
             "LM (batch size 20)", "Recommendation (batch size 2048)", "CycleGAN", "A3C"]


# ----- the measuring process ---------------------------------------------------------------------
def serve(job_type: str, size: str) -> None:
    """Build the job on the GPU, then for each order "START SECONDS MODE" train from START for SECONDS."""
    import torch

    from gavel_ng.iterator import GavelIterator
    from gavel_ng.workloads import get_workload, parse_job_type

    family, batch_size = parse_job_type(job_type)
    w = get_workload(family)
    dev = torch.device("cuda", 0) if torch.cuda.is_available() else torch.device("cpu")   # cpu: a dry run
    torch.manual_seed(0)
    model = w.build_model(size).to(dev)
    opt = w.make_optimizer(model)
    batches = [w.make_batch(batch_size, size, seed=i, device=dev) for i in range(4)]
    for b in batches * 3:
        w.train_step(model, opt, b)
    name = torch.cuda.get_device_name(dev) if dev.type == "cuda" else "cpu"
    print(json.dumps({"ready": job_type, "gpu": name}), flush=True)
    for line in sys.stdin:
        start, seconds, mode = line.split()
        end = float(start) + float(seconds)
        loader = itertools.cycle(batches) if mode == "plain" else iter(
            GavelIterator(batches, lambda p: None, lambda p: None, max_steps=10**9))
        while time.time() < float(start):
            pass
        steps, t0 = 0, time.time()
        for batch in loader:
            w.train_step(model, opt, batch)        # reads the loss: the step has finished on the GPU
            steps += 1
            if time.time() >= end:
                break
        print(json.dumps({"steps": steps, "seconds": time.time() - t0}), flush=True)


# ----- the controller ------------------------------------------------------------------------------
class Fleet:
    def __init__(self, job_types: list[str], size: str):
        self.procs = {t: subprocess.Popen([sys.executable, __file__, "--serve", t, "--size", size],
                                          stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
                      for t in job_types}
        self.gpu = ""
        for t, p in self.procs.items():
            line = p.stdout.readline()
            if not line:
                raise RuntimeError(f"{t}: the measuring process exited before it was ready")
            self.gpu = json.loads(line)["gpu"]

    def window(self, orders: dict[str, str], seconds: float) -> dict[str, float]:
        """steps/s of each named type over one window that starts for all at once."""
        start = time.time() + 0.3
        for t, mode in orders.items():
            self.procs[t].stdin.write(f"{start} {seconds} {mode}\n")
            self.procs[t].stdin.flush()
        out = {}
        for t in orders:
            r = json.loads(self.procs[t].stdout.readline())
            out[t] = r["steps"] / r["seconds"]
        return out

    def close(self) -> None:
        for p in self.procs.values():
            p.stdin.close()
            p.wait(30)


def reference(job_types: list[str]):
    """(modeled H100 steps/s, modeled H100 pair fractions, Gavel's measured V100 pair fractions)."""
    from gavel_ng.profiles import default_table
    from gavel_ng.throughputs import ThroughputTable

    model, gavel = default_table(["h100"]), ThroughputTable.builtin("gavel-osdi20")

    def frac(table, a, b, gpu):
        pair, alone = table.get_pair((a, 1), (b, 1), gpu), table.get((a, 1), gpu)
        return pair[0] / alone if pair and alone else float("nan")

    alone = {t: model.get((t, 1), "h100") for t in job_types}
    return alone, {(a, b): frac(model, a, b, "h100") for a in job_types for b in job_types}, \
        {(a, b): frac(gavel, a, b, "v100") for a in job_types for b in job_types}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--job-types", nargs="+", default=JOB_TYPES)
    p.add_argument("--seconds", type=float, default=5.0, help="length of one timed window")
    p.add_argument("--size", default="full", choices=("full", "tiny"))
    p.add_argument("--repeats", type=int, default=2, help="plain/iterator window pairs per job type")
    p.add_argument("--skip-pairs", action="store_true", help="only the job types alone (iterator overhead)")
    p.add_argument("--out", type=Path, default=Path(__file__).resolve().parents[1] / "out" / "experiments" / "gpu",
                   help="default out/experiments/gpu (the committed results: experiments/results/gpu)")
    p.add_argument("--serve", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.serve:
        serve(args.serve, args.size)
        return 0
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    types, s = args.job_types, args.seconds
    alone_model, frac_model, frac_v100 = reference(types)
    fleet = Fleet(types, args.size)
    try:
        iso_rows, alone = [], {}
        for t in types:
            runs = [fleet.window({t: m}, s)[t] for _ in range(args.repeats) for m in ("plain", "gavel")]
            plain, gavel = sum(runs[0::2]) / args.repeats, sum(runs[1::2]) / args.repeats
            alone[t] = plain
            iso_rows.append({"gpu": fleet.gpu, "job_type": t, "plain_steps_per_s": round(plain, 2),
                             "gavel_iterator_steps_per_s": round(gavel, 2),
                             "iterator_overhead_pct": round(100 * (1 - gavel / plain), 2),
                             "window_spread_pct": round(100 * (max(runs) - min(runs)) / plain, 1),
                             "modeled_h100_steps_per_s": round(alone_model[t], 2)})
            log.info("%-34s alone %8.1f steps/s, through GavelIterator %8.1f (%+.2f%%; windows spread %.1f%%); "
                     "model %.1f", t, plain, gavel, -iso_rows[-1]["iterator_overhead_pct"],
                     iso_rows[-1]["window_spread_pct"], alone_model[t])
        pair_rows = []
        for a, b in [] if args.skip_pairs else itertools.combinations(types, 2):
            r = fleet.window({a: "plain", b: "plain"}, s)
            fa, fb = r[a] / alone[a], r[b] / alone[b]
            pair_rows.append({"gpu": fleet.gpu, "job_a": a, "job_b": b, "frac_a": round(fa, 3),
                              "frac_b": round(fb, 3), "sum": round(fa + fb, 3),
                              "model_h100_a": round(frac_model[a, b], 3), "model_h100_b": round(frac_model[b, a], 3),
                              "gavel_v100_a": round(frac_v100[a, b], 3), "gavel_v100_b": round(frac_v100[b, a], 3)})
            log.info("%-34s + %-34s %.2f + %.2f = %.2f  (model %.2f + %.2f, Gavel V100 %.2f + %.2f)", a, b, fa, fb,
                     fa + fb, frac_model[a, b], frac_model[b, a], frac_v100[a, b], frac_v100[b, a])
    finally:
        fleet.close()
    write_rows(args.out / "gpu_isolated.csv", iso_rows)
    if pair_rows:
        write_rows(args.out / "gpu_pairs.csv", pair_rows)
    log.info("wrote results under %s", args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
