"""Run metrics: JCT statistics over a window of job ids, fairness, utilization, cost."""

from __future__ import annotations

import csv
import json
import math
from pathlib import Path

import numpy as np

from ..cluster import resolve_prices
from .executor import isolated_throughput

HOUR = 3600.0


def summarize(config, cluster, jobs, window, ex, stats, unstable: bool, reason: str, wall: float) -> dict:
    lo, hi = window
    ids = np.arange(lo, min(hi, len(jobs)))
    done = ids[~np.isnan(jobs.finish[ids])]
    jct = jobs.finish[done] - jobs.arrival[done]
    rho = ftf_rho(config, cluster, jobs, done)
    slo = jobs.slo[ids]
    has_slo = np.isfinite(slo)
    late = has_slo & (np.isnan(jobs.finish[ids]) | (jobs.finish[ids] - jobs.arrival[ids] > slo))
    cap = cluster.capacity()
    sim_time = max(ex.now(), 1e-9)
    launches = stats.renewals + stats.launches
    return {
        "policy": config.policy,
        "avg_jct_hours": _hours(jct.mean()) if len(jct) else None,
        "p50_jct_hours": _hours(np.percentile(jct, 50)) if len(jct) else None,
        "p90_jct_hours": _hours(np.percentile(jct, 90)) if len(jct) else None,
        "p99_jct_hours": _hours(np.percentile(jct, 99)) if len(jct) else None,
        "makespan_hours": _hours(jobs.finish[done].max() - jobs.arrival[ids].min()) if len(done) else None,
        "utilization": round(float(ex.busy.sum() / (cap.sum() * sim_time)), 6),
        "gpu_hours": round(float(ex.busy.sum()) / HOUR, 3),   # GPU time held by all jobs of the run
        "reallocations": int(jobs.reallocations.sum()),      # adaptive jobs' configuration changes
        "adaptive_jobs": int(jobs.adaptive[ids].sum()),
        "jobs_measured": int(len(done)),
        "window": [int(lo), int(hi)],
        "total_cost_usd": jobs_cost(jobs, ids),
        "run_cost_usd": total_cost(config, cluster, ex.busy),
        "slo_violations": int(late.sum()),
        "jobs_with_slo": int(has_slo.sum()),
        "avg_ftf_rho": round(float(rho.mean()), 6) if len(rho) else None,
        "max_ftf_rho": round(float(rho.max()), 6) if len(rho) else None,
        "lease_renewal_fraction": round(stats.renewals / launches, 6) if launches else 0.0,
        "unstable": bool(unstable),
        "unstable_reason": reason or None,
        "policy_solves": int(stats.solves),
        "solve_seconds": round(stats.solve_seconds, 3),
        "rounds": int(stats.rounds),
        "simulated_hours": _hours(ex.now()),
        "wall_seconds": round(wall, 3),
        "mode": "ideal" if config.ideal else ("gavel-compat" if config.gavel_compat else "mechanism"),
        "round_seconds": config.round_seconds,
        "seed": config.seed,
        **({"entity_avg_jct_hours": entity_jct(jobs, done, jct)} if config.entities else {}),
    }


def entity_of(jobs, job: int) -> str:
    """A job's entity as the policy saw it ("default": none named in its rules)."""
    return getattr(jobs.rules_of(job), "entity", None) or "default"


def entity_jct(jobs, done: np.ndarray, jct: np.ndarray) -> dict[str, float]:
    """Average JCT (hours) of the measured jobs of each entity: what hierarchical policies trade."""
    names = np.array([entity_of(jobs, int(m)) for m in done], dtype=object)
    return {str(e): _hours(jct[names == e].mean()) for e in sorted(set(names.tolist()))}


def ftf_rho(config, cluster, jobs, done: np.ndarray) -> np.ndarray:
    """Themis finish-time fairness: JCT over the time on 1/n of the cluster (n: average active jobs)."""
    if not len(done):
        return np.zeros(0)
    T = jobs.T[jobs.key[done]]
    thr = isolated_throughput(T, jobs.sf[done].astype(float), cluster.capacity(), jobs.avg_active[done])
    t_iso = jobs.steps[done] / np.maximum(thr, 1e-300)
    return (jobs.finish[done] - jobs.arrival[done]) / t_iso


def jobs_cost(jobs, ids: np.ndarray) -> float | None:
    """$ charged to these jobs (the measured window): the cost a policy is judged by. Runs of
    different length (a policy that delays jobs runs longer) see different numbers of jobs
    arrive after the window, so the whole run's GPU time does not compare across policies.
    None when one of them ran on a type without a price."""
    c = jobs.cost[ids]
    return None if np.isnan(c).any() else round(float(c.sum()), 2)


def total_cost(config, cluster, busy: np.ndarray) -> float | None:
    """$ for the GPU time all jobs used during the run (the window's and the others');
    None when some used type has no price."""
    prices = resolve_prices(cluster.worker_types, cluster.price_per_gpu_hour, config.prices)
    total = 0.0
    for w, seconds in zip(cluster.worker_types, busy):
        if seconds > 0:
            if w not in prices:
                return None
            total += seconds / HOUR * prices[w]
    return round(total, 2)


def write_outputs(result, out_dir: str | Path) -> tuple[Path, Path, Path]:
    """jobs.csv (one row per job that arrived), summary.json and jct.png under out_dir."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    ja = result.jobs
    lo, hi = result.window
    arrived = np.flatnonzero(~np.isnan(ja.admitted_at))
    done = arrived[~np.isnan(ja.finish[arrived])]
    rho = dict(zip(done.tolist(), ftf_rho_from_summary(result, done).tolist()))
    jobs_csv = out / "jobs.csv"
    with jobs_csv.open("w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["job_id", "job_type", "scale_factor", "weight", "steps", "arrival_s", "finish_s", "jct_s",
                    "slo_s", "slo_violated", "slo_dropped", "cost_usd", "ftf_rho", "in_window", "entity"])
        dropped = result.slo_dropped if result.slo_dropped is not None else np.zeros(len(ja), bool)
        for i in arrived.tolist():
            fin = ja.finish[i]
            jct = fin - ja.arrival[i] if not math.isnan(fin) else math.nan
            slo = ja.slo[i]
            violated = "" if not math.isfinite(slo) else int(math.isnan(jct) or jct > slo)
            w.writerow([i, result.job_types[i], int(ja.sf[i]), ja.weight[i], ja.steps[i], ja.arrival[i],
                        "" if math.isnan(fin) else round(fin, 3), "" if math.isnan(jct) else round(jct, 3),
                        "" if not math.isfinite(slo) else slo, violated,
                        "" if not math.isfinite(slo) else int(dropped[i]),
                        "" if math.isnan(ja.cost[i]) else round(float(ja.cost[i]), 4),
                        "" if i not in rho else round(rho[i], 6), int(lo <= i < hi), entity_of(ja, i)])
    summary_json = out / "summary.json"
    summary_json.write_text(json.dumps(result.summary, indent=2) + "\n")
    from ..plots import plot_jct_cdf

    jct, total = window_jcts(result)
    png = plot_jct_cdf({result.summary["policy"]: jct}, out / "jct.png",
                       title=f"job completion times, jobs {lo}-{hi - 1}", totals={result.summary["policy"]: total})
    return jobs_csv, summary_json, png


def window_jcts(result) -> tuple[np.ndarray, int]:
    """The JCTs (hours) of the window's finished jobs, and how many jobs the window measures (those
    admitted): a CDF over the second ends below 1.0 by the share left unfinished."""
    lo, hi = result.window
    ja = result.jobs
    ids = np.arange(lo, min(hi, len(ja)))
    done = ids[~np.isnan(ja.finish[ids])]
    return (ja.finish[done] - ja.arrival[done]) / HOUR, len(done) + int(result.summary.get("jobs_unfinished", 0))


def ftf_rho_from_summary(result, done: np.ndarray) -> np.ndarray:
    return ftf_rho(result.config, result.cluster, result.jobs, done)


def _hours(seconds: float) -> float:
    return round(float(seconds) / HOUR, 6)
