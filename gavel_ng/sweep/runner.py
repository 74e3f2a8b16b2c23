"""Running a grid: skip points already in the table, run the rest in parallel, append
each row the moment its point finishes (so Ctrl-C loses only the points in flight).

Backends: a local process pool (one simulate per process, all cores by default) or a
Ray cluster (`ray.init(address=...)`; a local Ray instance when no address is given).
"""

from __future__ import annotations

import json
import logging
import multiprocessing as mp
import os
import signal
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import partial

from ..errors import InputError
from ..policies.plugins import load_plugins
from ..profiles.table_io import resolve_table
from ..throughputs import ThroughputTable
from .fingerprint import code_digest, point_digests
from .grid import SweepPoint
from .point import PointResult, run_point
from .store import ResultsStore

log = logging.getLogger(__name__)
OnResult = Callable[[PointResult, int, int], None]


@dataclass
class SweepReport:
    """What one invocation did; `interrupted` points are simply not in the table yet."""

    total: int
    skipped: int
    stale: int = 0        # finished points computed by other code or inputs (fingerprint.py): run again or kept
    ran: int = 0
    failed: int = 0
    unfinished: int = 0   # points run that left measured jobs unfinished (they hit a cap)
    interrupted: bool = False
    seconds: float = 0.0
    errors: list[str] = field(default_factory=list)


def run_sweep(points: list[SweepPoint], store: ResultsStore, backend: str = "local", workers: int | None = None,
              address: str | None = None, on_result: OnResult | None = None, plugins: Sequence = (),
              keep_stale: bool = False) -> SweepReport:
    """Run every point not yet done; KeyboardInterrupt propagates after the pool is stopped.

    `plugins` (policies.plugins.Plugin or specs, loaded here) travel with every point, so that
    the workers know the user's policies; they are not part of a point's identity but of its
    digest (fingerprint.py). A point whose row was computed by other code or input files is run
    again, unless `keep_stale`."""
    start = time.perf_counter()
    plugins = tuple(load_plugins(plugins))
    digests = point_digests(points, plugins)
    done, stale = store.done_and_stale(digests)
    if stale:
        log.warning("%d of %d finished points were computed by other code or input files than now (gavel_ng "
                    "digest %s): %s", len(stale), len(done) + len(stale), code_digest(plugins),
                    "kept as they are (keep_stale)" if keep_stale else "running them again (keep_stale reuses them)")
    if keep_stale:
        done |= stale
    todo = [p for p in points if p.point_id not in done]
    report = SweepReport(total=len(points), skipped=len(points) - len(todo), stale=len(stale))
    tables = _check_tables(todo)
    log.info("%d points, %d already done, %d to run", len(points), report.skipped, len(todo))

    def record(res: PointResult) -> None:
        res.row["digest"] = digests.get(res.row.get("point_id"))
        store.append(res)
        report.ran += 1
        if res.row.get("jobs_unfinished"):
            report.unfinished += 1
        if not res.ok:
            report.failed += 1
            report.errors.append(f"{res.row['point_id']}: {res.row['error']}")
            log.warning("point failed (%s): %s", res.row["point_id"], res.row["error"])
        if on_result is not None:
            on_result(res, report.skipped + report.ran, report.total)

    try:
        if not todo:
            pass
        elif backend == "local":
            _run_local(todo, record, workers or os.cpu_count() or 1, plugins)
        elif backend == "ray":
            _run_ray(todo, record, address, workers, tables, plugins)
        else:
            raise InputError("--backend", backend, "must be local or ray")
    except KeyboardInterrupt:
        report.interrupted = True
        report.seconds = time.perf_counter() - start
        log.warning("interrupted: %d points finished and saved; run the same command again to continue",
                    report.skipped + report.ran)
        raise
    report.seconds = time.perf_counter() - start
    return report


def _check_tables(todo: list[SweepPoint]) -> dict[str, ThroughputTable]:
    """Resolve every table the points name, once, on the driver, so that a bad name or file
    is one InputError (naming --throughputs) before anything runs."""
    names = dict.fromkeys(p.throughputs for p in todo if p.throughputs is not None)
    return {name: resolve_table(name) for name in names}


def _ignore_sigint() -> None:
    """Workers leave Ctrl-C to the driver, which stops the pool and keeps what finished."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def _run_local(todo: list[SweepPoint], record: Callable[[PointResult], None], workers: int,
               plugins: tuple = ()) -> None:
    run = partial(run_point, plugins=plugins)
    if workers <= 1 or len(todo) == 1:
        for p in todo:
            record(run(p))
        return
    pool = mp.get_context("fork").Pool(min(workers, len(todo)), initializer=_ignore_sigint)
    try:
        for res in pool.imap_unordered(run, todo, chunksize=1):
            record(res)
        pool.close()
    except BaseException:
        pool.terminate()
        raise
    finally:
        pool.join()


def _run_ray(todo: list[SweepPoint], record: Callable[[PointResult], None], address: str | None,
             workers: int | None, tables: dict[str, ThroughputTable], plugins: tuple = ()) -> None:
    try:
        import ray
    except ImportError:
        raise InputError("--backend", "ray", "Ray is not installed (pip install 'gavel-ng[sweep]')") from None
    started = not ray.is_initialized()
    if started:
        kwargs = {"num_cpus": workers} if address is None and workers else {}
        if address is None:  # a local instance listens on loopback only
            kwargs["_node_ip_address"] = "127.0.0.1"
        ray.init(address=address, include_dashboard=False, log_to_driver=False, **kwargs)
    remote = ray.remote(num_cpus=1, max_retries=0)(run_point)
    # the driver's resolved tables as Gavel JSON: the nodes need none of its files
    payloads = {name: ray.put(json.dumps(table.to_gavel_dict())) for name, table in tables.items()}
    shipped = ray.put(plugins)   # files travel as their text: the nodes need none of the driver's files
    pending = {remote.remote(p, payloads.get(p.throughputs), shipped): p for p in todo}
    try:
        while pending:
            ready, _ = ray.wait(list(pending), num_returns=1)
            for ref in ready:
                p = pending.pop(ref)
                try:
                    res = ray.get(ref)
                except ray.exceptions.RayError as exc:   # a lost node or worker: retried on resume
                    res = PointResult({**p.as_row(), "point_id": p.point_id, "status": "error",
                                       "error": f"ray: {exc}", "finished_at": time.time()})
                record(res)
    except BaseException:
        for ref in pending:
            ray.cancel(ref, force=True)
        raise
    finally:
        if started:
            ray.shutdown()
