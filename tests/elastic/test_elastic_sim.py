"""Adaptive jobs in the one simulator and the `goodput` round policy (issue 14, items 3 and 4)."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from gavel_ng.cluster import Cluster
from gavel_ng.elastic import (
    PhiCurve,
    best_goodput,
    fixed_job_table,
    load_workload,
    pollux_workload,
    read_pollux_csv,
)
from gavel_ng.elastic.workload import POLLUX_NETWORK_GBPS
from gavel_ng.round_planner import DEFAULT_GPU_COUNTS
from gavel_ng.simulator import SimConfig, simulate


def one_job(tmp_path, app="cifar10", arrivals=(0,), growth=1.0):
    """Jobs of one family with a constant noise scale (growth 1): goodput does not change with progress."""
    rows = "".join(f"j{i},{t},{app},1,{128 if app == 'cifar10' else 8}\n" for i, t in enumerate(arrivals))
    path = tmp_path / "w.csv"
    path.write_text("name,time,application,num_replicas,batch_size\n" + rows)
    et = read_pollux_csv(path)
    curve = PhiCurve(et.specs[0].phi.phi0 if et.specs[0].phi else 532.0, growth)
    et.specs = [dataclasses.replace(s, phi=curve) for s in et.specs]
    return et


def best_config(spec, worker, capacity, per_server=4):
    counts = [k for k in DEFAULT_GPU_COUNTS if k <= capacity]
    return max((best_goodput(spec, worker, k, -(-k // per_server), 0.0, POLLUX_NETWORK_GBPS)[0], k) for k in counts)


def run(cluster, et, policy="goodput", observe=None, **kw):
    return simulate(cluster, None, et, SimConfig(policy=policy, **kw), observe=observe)


def test_adaptive_job_alone_grows_to_its_best_configuration_and_finishes_on_time(tmp_path):
    et = one_job(tmp_path)
    cluster = Cluster.parse("t4=16", gpus_per_server=4)
    seen = []
    r = run(cluster, et, observe=seen.append)
    g, k = best_config(et.specs[0], "t4", 16)
    assert k > 1                                             # it grows
    assert {int(p.sfs[0]) for p in seen if p.num_entries} == {k}   # ... to its best count, and stays there
    expected = 30.0 + et.work[0] / g                         # one re-allocation delay, then constant goodput
    assert r.jobs.finish[0] == pytest.approx(expected, rel=1e-9)
    assert r.jobs.reallocations[0] == 1 and r.summary["reallocations"] == 1
    assert r.summary["adaptive_jobs"] == 1 and r.summary["round_seconds"] == 60.0


def test_reallocation_costs_the_delay(tmp_path):
    et = one_job(tmp_path)
    cluster = Cluster.parse("t4=16", gpus_per_server=4)
    finish = {d: run(cluster, et, realloc_delay=d).jobs.finish[0] for d in (0.0, 30.0, 200.0)}
    assert finish[30.0] - finish[0.0] == pytest.approx(30.0)
    assert finish[200.0] - finish[0.0] == pytest.approx(200.0)   # longer than a round: owed in the next


def test_a_change_of_configuration_is_a_reallocation(tmp_path):
    # the second job's arrival makes the first one shrink: a second delay for it
    et = one_job(tmp_path, arrivals=(0, 720))
    cluster = Cluster.parse("t4=8", gpus_per_server=4)
    counts = {}
    r = run(cluster, et, observe=lambda p: [counts.setdefault(int(m), set()).add(int(k))
                                            for m, k in zip(p.member_job, p.sfs)])
    assert len(counts[0]) >= 2
    assert r.jobs.reallocations[0] >= 2
    assert not np.isnan(r.jobs.finish).any()


def test_mixed_fixed_and_adaptive_workload_completes():
    # half the jobs lose their adaptive spec: goodput (jobs=BOTH) runs them fixed at their tuned count
    et = pollux_workload(num_jobs=12, hours=1, seed=3)
    adaptive = np.arange(12) % 2 == 0
    et = dataclasses.replace(et, specs=[s if a else None for s, a in zip(et.specs, adaptive)])
    cluster = Cluster.parse("t4=48,v100=48", gpus_per_server=4)
    fixed_counts = set()
    r = run(cluster, et, observe=lambda p: fixed_counts.update((int(m), int(k)) for m, k in zip(p.member_job, p.sfs)
                                                               if not adaptive[m]))
    assert r.summary["jobs_measured"] == 12 and not r.summary["unstable"]
    assert r.summary["adaptive_jobs"] == 6
    assert fixed_counts and all(k == et.gpus[m] for m, k in fixed_counts)   # fixed jobs keep their GPU count
    assert (r.jobs.reallocations[~adaptive] == 0).all()                     # and pay no re-allocation delay


def test_las_on_an_elastic_trace_is_the_fixed_path():
    cluster = Cluster.parse("t4=16", gpus_per_server=4)
    et = load_workload(cluster, jobs=12, hours=1, seed=0)    # tuned counts capped at 16, as simulate does
    ours = run(cluster, et, "las", preemption_overhead_s=30).summary
    table = fixed_job_table(et, cluster.worker_types, network_gbps=POLLUX_NETWORK_GBPS)
    plain = simulate(cluster, table, et.trace, SimConfig(policy="las", preemption_overhead_s=30)).summary
    for k in ("avg_jct_hours", "p99_jct_hours", "makespan_hours", "utilization", "gpu_hours", "policy_solves"):
        assert ours[k] == plain[k]
    assert ours["adaptive_jobs"] == ours["reallocations"] == 0 and ours["round_seconds"] == 360.0


@pytest.mark.slow
def test_goodput_beats_fixed_batch_las_on_a_small_pollux_workload():
    et = pollux_workload(num_jobs=40, hours=2, seed=0)
    cluster = Cluster.parse("t4=64", gpus_per_server=4)
    ours = run(cluster, et).summary
    las = run(cluster, et, "las").summary
    assert ours["jobs_measured"] == las["jobs_measured"] == 40
    assert ours["avg_jct_hours"] < 0.9 * las["avg_jct_hours"]
