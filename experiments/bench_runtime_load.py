"""The scheduler service under load: submit, status and planning with thousands of queued jobs.

    python experiments/bench_runtime_load.py [--jobs 2000] [--queued 20000] [--repeat 5]

A real scheduler service (its gRPC server on loopback and its SQLite state in a temporary
directory; the round loop is not started, so nothing else competes for the two cores) with
16 GPUs registered. It prints, best of --repeat:
- the time of one SubmitJobs of --jobs jobs through the Python client;
- the latency of `status` with --jobs and with --queued jobs queued;
- the policy's solve (las) and one round's planning for --jobs queued jobs, per job.
Figures, not assertions: docs/deploy.md ("Failures and limits") quotes them.
"""

from __future__ import annotations

import argparse
import tempfile
import time
import timeit
from pathlib import Path

from gavel_ng.protocol.client import SchedulerClient
from gavel_ng.protocol.jobspec import JobSpec
from gavel_ng.protocol.protos import gavel_pb2 as pb
from gavel_ng.protocol.rpc import make_server
from gavel_ng.runtime.config import ClusterConfig
from gavel_ng.runtime.service import SchedulerService, SchedulerServicer

TYPES = ["ResNet-18 (batch size 32)", "LM (batch size 20)", "Recommendation (batch size 512)",
         "Transformer (batch size 64)"]


def best(fn, repeat: int) -> float:
    """Seconds of the fastest of `repeat` calls."""
    return min(timeit.repeat(fn, number=1, repeat=repeat))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--jobs", type=int, default=2000)
    ap.add_argument("--queued", type=int, default=20000)
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        svc = SchedulerService(ClusterConfig(round_seconds=360.0), Path(tmp) / "state", port=0, bind="127.0.0.1")
        server, port = make_server("127.0.0.1", 0, {"Scheduler": SchedulerServicer(svc)}, svc.security)
        for i, (gpu_type, gpus) in enumerate([("v100", 8), ("p100", 4), ("k80", 4)]):
            svc.state.register(pb.RegisterWorkerRequest(worker_id=f"w{i}", address=f"w{i}:1", gpu_type=gpu_type,
                                                        gpus=gpus), lambda address: (None, None))
        specs = [JobSpec(TYPES[i % len(TYPES)], steps=10_000, size="tiny") for i in range(args.jobs)]
        with SchedulerClient(f"127.0.0.1:{port}", token=svc.secret, timeout=120.0) as c:
            submit = []
            for _ in range(args.repeat):
                start = time.perf_counter()
                c.submit(specs)
                submit.append(time.perf_counter() - start)
            print(f"submit {args.jobs} jobs in one call: {min(submit):.3f} s (best of {args.repeat}; "
                  f"{args.jobs / min(submit):,.0f} jobs/s)")
            queued = len(svc.state.jobs)
            print(f"status with {queued:,} jobs queued: {1000 * best(c.status, args.repeat):.1f} ms")
            ids = sorted(svc.state.jobs)[:args.jobs]
            alloc = svc.allocator.allocate(ids, time.time())
            solve = best(lambda: svc.allocator.allocate(ids, time.time()), args.repeat)

            def plan():   # the allocation taken in (and saved, for status), then the round planned from it
                svc.planner.mech.reset(alloc)
                svc.planner.save_allocation(alloc)
                svc.planner.plan(time.time())

            planning = best(plan, args.repeat)
            print(f"las solve for {len(ids):,} jobs: {solve:.3f} s ({1e6 * solve / len(ids):.1f} us a job); "
                  f"one round's planning: {1000 * planning:.1f} ms ({1e6 * planning / len(ids):.1f} us a job)")
            more = args.queued - queued
            for k in range(0, more, 10_000):
                c.submit(specs[:1] * min(10_000, more - k))
            try:
                latency = best(c.status, args.repeat)
                print(f"status with {len(svc.state.jobs):,} jobs queued: {1000 * latency:.1f} ms")
            except Exception as exc:       # the old service: a reply over the client's 4 MiB limit
                print(f"status with {len(svc.state.jobs):,} jobs queued: fails ({str(exc)[:120]})")
        server.stop(0)
        svc.store.close()


if __name__ == "__main__":
    main()
