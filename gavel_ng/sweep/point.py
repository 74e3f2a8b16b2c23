"""Running one sweep point: the same path as `gavel-ng simulate`, returning rows, not files.

Every point, Gavel trace or Pollux workload, runs the one simulator (`simulate_point`) and
gives the same row and per-job records.

Runs in worker processes (local pool or Ray), so everything it returns is plain data
that the driver appends to the results table.
"""

from __future__ import annotations

import json
import logging
import math
import os
import socket
import time
import traceback
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

import numpy as np

from ..errors import InputError
from .grid import SweepPoint

log = logging.getLogger(__name__)
HOUR = 3600.0
METRICS = ("avg_jct_hours", "p50_jct_hours", "p90_jct_hours", "p99_jct_hours", "makespan_hours", "utilization",
           "jobs_measured", "total_cost_usd", "run_cost_usd", "slo_violations", "jobs_with_slo",
           "slo_violation_fraction", "slo_dropped",
           "avg_ftf_rho", "max_ftf_rho", "avg_jct_high_priority_hours", "avg_jct_low_priority_hours",
           "lease_renewal_fraction", "unstable", "unstable_reason", "policy_solves", "solve_seconds", "rounds",
           "simulated_hours", "wall_seconds", "mode", "solver_fallbacks", "policy_solved", "paired_fraction",
           "gpu_hours", "reallocations", "adaptive_jobs", "jobs_in_window", "jobs_unfinished")
BOOKKEEPING = ("point_id", "status", "error", "finished_at", "host", "digest")   # digest: fingerprint.py
JOB_COLUMNS = ("job_id", "job_type", "scale_factor", "weight", "arrival_s", "finish_s", "jct_s", "ftf_rho",
               "slo_s", "slo_violated", "slo_dropped", "cost_usd", "entity")


@dataclass
class PointResult:
    """One finished point: its table row and the per-job records of its measured window."""

    row: dict[str, Any]
    jobs: list[dict[str, Any]] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.row.get("status") == "ok"


def _file_stamp(path: str | None) -> tuple[int, int] | None:
    """(mtime, size) of a table file, so that the cache below never serves a file's old content."""
    try:
        st = os.stat(path) if path else None
    except OSError:
        return None
    return None if st is None else (st.st_mtime_ns, st.st_size)


@lru_cache(maxsize=16)
def _table(throughputs: str | None, heterogeneity: float, worker_types: tuple[str, ...], payload: str | None,
           stamp: tuple[int, int] | None = None):
    from ..profiles.table_io import resolve_table
    from ..simulator import default_table
    from ..throughputs import ThroughputTable

    if throughputs is None:
        if heterogeneity == 1.0:
            return default_table(list(worker_types))
        from ..profiles import default_table as modeled

        return modeled(list(worker_types), heterogeneity=heterogeneity)
    if payload is not None:
        # the table the driver resolved, as Gavel JSON (Ray nodes may not see the driver's files)
        return ThroughputTable.from_gavel_dict(json.loads(payload), source=throughputs)
    return resolve_table(throughputs)


def simulate_point(point: SweepPoint, table_payload: str | None = None, plugins: tuple = ()):
    """The SimResult of one point (used by experiments that need more than the row).

    `plugins` (policies.plugins.Plugin, shipped by the driver) are loaded first, so that a
    user's policy resolves by name in this process too; loading is a no-op where they are."""
    from ..cluster import Cluster
    from ..simulator import simulate
    from ..simulator.flags import config_from_settings

    _load(plugins)
    cluster = Cluster.parse(point.cluster, gpus_per_server=point.gpus_per_server).priced()
    pollux = point.workload is not None or _format(point.trace) == "pollux"
    # a Pollux workload's fixed jobs get their table from the simulator unless one is named
    table = None if pollux and point.throughputs is None else \
        _table(point.throughputs, point.heterogeneity, tuple(cluster.worker_types), table_payload,
               _file_stamp(point.throughputs))
    trace = _trace(point, cluster, table, pollux)
    return simulate(cluster, table, trace, config_from_settings(point, point.policy, point.options))


def _format(trace: str | None) -> str | None:
    """A trace file's format, from its content (traces.trace_format), as `simulate` reads it."""
    from ..traces import trace_format

    return None if trace is None else trace_format(trace)


def _trace(point: SweepPoint, cluster, table, pollux: bool):
    """The point's jobs: an ElasticTrace for a Pollux workload, else a Gavel Trace or generator."""
    from ..traces import TraceGenerator, TraceSpec, generate, read_trace

    if pollux:
        from ..elastic.workload import load_workload

        if point.heterogeneity != 1.0:
            raise InputError("heterogeneity", point.heterogeneity, "applies to Gavel traces' built-in profiles")
        return load_workload(cluster, point.trace, point.jobs, point.hours, point.seed,
                             workload=point.workload or "pollux", profiles=point.elastic_profiles)
    if point.elastic_profiles != "modeled":
        raise InputError("elastic_profiles", point.elastic_profiles, "applies to a drawn workload or a Pollux CSV")
    if point.trace is not None:
        return read_trace(point.trace)
    spec = TraceSpec(point.jobs_per_hour, point.multi_gpu, point.priorities, point.slos, point.seed)
    if point.static is not None:
        return generate(spec, table, point.static)
    return TraceGenerator(spec, table)


def _load(plugins: tuple) -> None:
    if plugins:
        from ..policies.plugins import load_plugins

        load_plugins(plugins)


def run_point(point: SweepPoint, table_payload: str | None = None, plugins: tuple = ()) -> PointResult:
    """Simulate one point; any failure becomes a row with status 'error' (retried on resume)."""
    row: dict[str, Any] = {**point.as_row(), "point_id": point.point_id, "host": socket.gethostname()}
    try:
        result = simulate_point(point, table_payload, plugins)
    except Exception as exc:  # noqa: BLE001 - one bad point must not end a sweep
        log.debug("point %s failed:\n%s", point.point_id, traceback.format_exc())
        row.update({k: None for k in METRICS})
        # an InputError (a PolicyError among them) is one line that names what is wrong, as simulate prints it
        error = str(exc) if isinstance(exc, InputError) else f"{type(exc).__name__}: {exc}"
        row.update(status="error", error=error, finished_at=time.time())
        return PointResult(row)
    s = result.summary
    row.update({k: s.get(k) for k in METRICS})
    row.update(_derived(result))
    row.update(status="ok", error=None, finished_at=time.time())
    return PointResult(row, job_records(result))


def _derived(result) -> dict[str, Any]:
    ja, (lo, hi) = result.jobs, result.window
    ids = np.arange(lo, min(hi, len(ja)))
    done = ids[~np.isnan(ja.finish[ids])]
    jct = (ja.finish[done] - ja.arrival[done]) / HOUR
    w = ja.weight[done]
    out: dict[str, Any] = {"avg_jct_high_priority_hours": None, "avg_jct_low_priority_hours": None}
    if len(w) and w.max() > w.min():
        high = w >= w.max()
        out["avg_jct_high_priority_hours"] = round(float(jct[high].mean()), 6)
        out["avg_jct_low_priority_hours"] = round(float(jct[~high].mean()), 6)
    s = result.summary
    out["slo_violation_fraction"] = round(s["slo_violations"] / s["jobs_with_slo"], 6) if s["jobs_with_slo"] else None
    return out


def job_records(result) -> list[dict[str, Any]]:
    """Per-job records of the measured window (for CDF plots)."""
    from ..simulator.metrics import entity_of, ftf_rho

    ja, (lo, hi) = result.jobs, result.window
    ids = np.arange(lo, min(hi, len(ja)))
    done = ids[~np.isnan(ja.finish[ids])]
    rho = dict(zip(done.tolist(), ftf_rho(result.config, result.cluster, ja, done).tolist()))
    dropped = getattr(result, "slo_dropped", None)
    if dropped is None:
        dropped = np.zeros(len(ja), bool)
    out = []
    for i in ids.tolist():
        fin = float(ja.finish[i])
        jct = fin - ja.arrival[i] if not math.isnan(fin) else None
        slo = float(ja.slo[i])
        out.append({"job_id": i, "job_type": result.job_types[i], "scale_factor": int(ja.sf[i]),
                    "weight": float(ja.weight[i]), "arrival_s": float(ja.arrival[i]),
                    "finish_s": None if math.isnan(fin) else fin, "jct_s": jct, "ftf_rho": rho.get(i),
                    "slo_s": slo if math.isfinite(slo) else None,
                    "slo_violated": None if not math.isfinite(slo) else int(jct is None or jct > slo),
                    "slo_dropped": None if not math.isfinite(slo) else int(dropped[i]),
                    "cost_usd": None if math.isnan(ja.cost[i]) else float(ja.cost[i]), "entity": entity_of(ja, i)})
    return out
