"""Elastic jobs in the simulator and the `goodput` policy (issue 14, items 3 and 4)."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from gavel_ng.cluster import Cluster
from gavel_ng.elastic import PhiCurve, best_goodput, fixed_job_table, pollux_workload, read_pollux_csv
from gavel_ng.elastic.policy import ElasticColumns, solve_goodput
from gavel_ng.elastic.simulate import DEFAULT_GPU_COUNTS, simulate_elastic
from gavel_ng.elastic.workload import POLLUX_NETWORK_GBPS
from gavel_ng.simulator.engine import SimConfig, simulate


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


def test_adaptive_job_alone_grows_to_its_best_configuration_and_finishes_on_time(tmp_path):
    et = one_job(tmp_path)
    cluster = Cluster.parse("t4=16", gpus_per_server=4)
    seen = []
    r = simulate_elastic(cluster, et, "goodput", observe=seen.append)
    g, k = best_config(et.specs[0], "t4", 16)
    assert k > 1                                             # it grows
    assert {int(p.sfs[0]) for p in seen if p.num_entries} == {k}   # ... to its best count, and stays there
    expected = 30.0 + et.work[0] / g                         # one re-allocation delay, then constant goodput
    assert r.state.finish[0] == pytest.approx(expected, rel=1e-9)
    assert r.state.reallocations[0] == 1


def test_reallocation_costs_the_delay(tmp_path):
    et = one_job(tmp_path)
    cluster = Cluster.parse("t4=16", gpus_per_server=4)
    finish = {d: simulate_elastic(cluster, et, "goodput", realloc_delay=d).state.finish[0] for d in (0.0, 30.0, 200.0)}
    assert finish[30.0] - finish[0.0] == pytest.approx(30.0)
    assert finish[200.0] - finish[0.0] == pytest.approx(200.0)


def test_a_change_of_configuration_is_a_reallocation(tmp_path):
    # the second job's arrival makes the first one shrink: a second delay for it
    et = one_job(tmp_path, arrivals=(0, 720))
    cluster = Cluster.parse("t4=8", gpus_per_server=4)
    counts = {}
    r = simulate_elastic(cluster, et, "goodput",
                         observe=lambda p: [counts.setdefault(int(m), set()).add(int(k))
                                            for m, k in zip(p.member_job, p.sfs)])
    assert len(counts[0]) >= 2
    assert r.state.reallocations[0] >= 2
    assert not np.isnan(r.state.finish).any()


def test_mixed_fixed_and_adaptive_workload_completes():
    et = pollux_workload(num_jobs=16, hours=1, seed=3)
    cluster = Cluster.parse("t4=48,v100=48", gpus_per_server=4)
    adaptive = np.arange(16) % 2 == 0
    table = fixed_job_table(et, cluster.worker_types, network_gbps=POLLUX_NETWORK_GBPS)
    fixed_counts = set()
    r = simulate_elastic(cluster, et, "goodput", adaptive=adaptive, table=table,
                         observe=lambda p: fixed_counts.update((int(m), int(k)) for m, k in zip(p.member_job, p.sfs)
                                                               if not adaptive[m]))
    assert r.summary["jobs_measured"] == 16 and not r.summary["unstable"]
    assert all(k == et.gpus[m] for m, k in fixed_counts)       # fixed jobs keep their GPU count
    assert (r.state.reallocations[~adaptive] == 0).all()        # and pay no re-allocation delay


def test_goodput_beats_fixed_batch_las_on_a_small_pollux_workload():
    et = pollux_workload(num_jobs=40, hours=2, seed=0)
    cluster = Cluster.parse("t4=64", gpus_per_server=4)
    ours = simulate_elastic(cluster, et, "goodput").summary
    table = fixed_job_table(et, cluster.worker_types, network_gbps=POLLUX_NETWORK_GBPS)
    las = simulate(cluster, table, et.trace, SimConfig(policy="las")).summary
    assert ours["jobs_measured"] == las["jobs_measured"] == 40
    assert ours["avg_jct_hours"] < 0.9 * las["avg_jct_hours"]


def test_goodput_policy_floor_and_agnostic_twin():
    cols = ElasticColumns.build(["fast", "slow"], np.array([4.0, 4.0]), (1, 2, 4))
    # job 0 scales linearly, job 1 not at all; the slow type is half as fast
    per_k = {1: 1.0, 2: 2.0, 4: 4.0}
    S = np.zeros((2, cols.num))
    for c, (t, k) in enumerate(zip(cols.pool, cols.gpus)):
        if k:
            S[0, c] = per_k[k] * (1.0 if t == 0 else 0.5)
            S[1, c] = 1.0 * (1.0 if t == 0 else 0.5)
    need = np.broadcast_to(np.maximum(cols.gpus, 1), S.shape).astype(float)
    cap = np.array([4.0, 4.0])
    X = solve_goodput(S, need, cols, cap, floor=0.0)
    used = (X * need)
    assert used[:, cols.pool == 0].sum() <= 4 + 1e-6 and used[:, cols.pool == 1].sum() <= 4 + 1e-6
    # one configuration at a time per job: job 0 on the 4 fast GPUs, job 1 on a slow one
    assert (X * S).sum(axis=1) == pytest.approx([4.0, 0.5])
    X1 = solve_goodput(S, need, cols, cap, floor=1.0)
    assert (X1 * S).sum(axis=1)[1] >= 0.75 - 1e-6             # its fair share: one GPU, half fast half slow
    Xa = solve_goodput(S, need, cols, cap, floor=0.0, agnostic=True)
    assert (Xa * need)[:, cols.pool == 0].sum() == pytest.approx((Xa * need)[:, cols.pool == 1].sum())


def test_cli_simulate_pollux_csv_goodput_and_las(tmp_path, capsys):
    import json

    from gavel_ng.cli import main

    path = tmp_path / "w.csv"
    path.write_text("name,time,application,num_replicas,batch_size\na,0,cifar10,2,256\nb,100,bert,1,12\n")
    assert main(["simulate", "--trace", str(path), "--cluster", "t4=8,v100=8", "--policy", "goodput,las",
                 "--realloc-delay", "60", "--json"]) == 0
    runs = json.loads(capsys.readouterr().out)["runs"]
    assert [r["policy"] for r in runs] == ["goodput", "las"]
    assert all(r["jobs_measured"] == 2 for r in runs)
