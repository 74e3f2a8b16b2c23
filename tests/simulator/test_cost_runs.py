"""Cost policies in short simulations (issue 17): what is charged, SLOs kept, every job done."""

from __future__ import annotations

import csv
import math

import numpy as np
import pytest

from gavel_ng.cluster import Cluster
from gavel_ng.simulator import SimConfig, simulate
from gavel_ng.simulator.metrics import write_outputs
from gavel_ng.throughputs import ThroughputTable
from gavel_ng.traces import Trace

PRICES = {"v100": 3.0, "k80": 1.0}


@pytest.fixture
def cost_table():
    """R: 4 steps/s on a V100, 1 on a K80 (its work is cheaper on the V100: 4/3 vs 1 per $).
    Q: 2 on a V100, 1.2 on a K80 (cheaper on the K80: 1.2 vs 2/3 per $), 1.67x slower there."""
    return ThroughputTable(isolated={"v100": {("R", 1): 4.0, ("Q", 1): 2.0},
                                     "k80": {("R", 1): 1.0, ("Q", 1): 1.2}})


def trace(rows):
    """rows: (type, V100 seconds of work, SLO as a multiple of that or None, arrival)."""
    rate = {"R": 4.0, "Q": 2.0}
    return Trace([r[0] for r in rows], np.ones(len(rows), np.int64), np.ones(len(rows)),
                 np.array([r[1] * rate[r[0]] for r in rows]),
                 np.array([math.inf if r[2] is None else r[2] * r[1] for r in rows]),
                 np.array([float(r[3]) for r in rows]))


def run(policy, table, tr, cluster="v100=2,k80=2", **kw):
    return simulate(Cluster.parse(cluster, gpus_per_server=1), table, tr,
                    SimConfig(policy=policy, prices=PRICES, **kw))


def test_cost_is_the_gpu_time_jobs_hold_at_its_price(cost_table):
    # min_cost: R on a V100 for 1,000 s; Q's 7,200 steps on a K80 at 1.2/s, 6,000 s; idle GPUs cost nothing
    r = run("min_cost", cost_table, trace([("R", 1000, None, 0), ("Q", 3600, None, 0)]))
    assert list(r.jobs.finish) == [1000.0, 6000.0]
    np.testing.assert_allclose(r.jobs.cost, [1000 / 3600 * 3.0, 6000 / 3600 * 1.0])
    assert r.summary["total_cost_usd"] == round(1000 / 3600 * 3 + 6000 / 3600, 2)
    assert r.summary["run_cost_usd"] == r.summary["total_cost_usd"]


def test_a_runs_cost_counts_only_the_measured_jobs(cost_table):
    tr = trace([("R", 1000, None, 0), ("Q", 3600, None, 0), ("R", 7200, None, 0)])
    r = run("min_cost", cost_table, tr, window=(0, 2))
    assert r.summary["total_cost_usd"] == round(float(r.jobs.cost[:2].sum()), 2)
    assert r.summary["run_cost_usd"] > r.summary["total_cost_usd"]


def test_min_cost_slo_meets_feasible_slos_and_min_cost_does_not(cost_table, tmp_path):
    # two Q jobs with 1.2x SLOs (a K80 is 1.67x slower: they need mostly V100 time), two R jobs with
    # 10x SLOs, all at t=0 on 2 V100s + 2 K80s: min cost puts Q on the K80s and misses both SLOs
    rows = [("Q", 3600, 1.2, 0), ("Q", 3600, 1.2, 0), ("R", 1800, 10, 0), ("R", 1800, 10, 0)]
    cheap = run("min_cost", cost_table, trace(rows))
    slo = run("min_cost_slo", cost_table, trace(rows))
    fast = run("max_throughput", cost_table, trace(rows))
    for r in (cheap, slo, fast):
        assert not np.isnan(r.jobs.finish).any() and not r.summary["unstable"]
    assert cheap.summary["slo_violations"] == 2
    assert slo.summary["slo_violations"] == 0 and slo.summary["slo_dropped"] == 0
    assert cheap.summary["total_cost_usd"] < slo.summary["total_cost_usd"]
    jobs = list(csv.DictReader(write_outputs(slo, tmp_path)[0].open()))
    assert [j["slo_violated"] for j in jobs] == ["0"] * 4 and [j["slo_dropped"] for j in jobs] == ["0"] * 4
    assert sum(float(j["cost_usd"]) for j in jobs) == pytest.approx(slo.summary["total_cost_usd"], abs=0.01)


def test_a_dropped_slo_is_reported_per_job_and_the_job_still_finishes(cost_table, tmp_path):
    # job 1's SLO (0.5x its V100 time) can never be met: dropped at every solve, named, and it runs
    rows = [("R", 1800, 10, 0), ("Q", 3600, 0.5, 0), ("R", 1800, None, 0)]
    r = run("min_cost_slo", cost_table, trace(rows))
    assert not np.isnan(r.jobs.finish).any()
    assert r.summary["slo_dropped"] == 1 and r.summary["slo_violations"] == 1
    assert list(r.slo_dropped) == [False, True, False]
    [kind] = [w for w in r.summary["warnings"] if w["message"].startswith("SLOs cannot be met")]
    assert kind["jobs"] == [1]   # the simulator's job ids, as in jobs.csv
    jobs = list(csv.DictReader(write_outputs(r, tmp_path)[0].open()))
    assert [j["slo_dropped"] for j in jobs] == ["0", "1", ""]       # "" : no SLO
