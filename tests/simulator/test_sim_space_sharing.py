"""Space sharing, placement and estimated throughputs in the simulator (issues 5 and 6)."""

import json

import numpy as np
import pytest

from gavel_ng.cli import main
from gavel_ng.cluster import Cluster
from gavel_ng.mechanism import make_plan
from gavel_ng.simulator import SimConfig, simulate
from gavel_ng.simulator.estimated import EstimatedThroughputs
from gavel_ng.simulator.executor import JobArrays, SimExecutor
from gavel_ng.throughputs import ThroughputTable
from gavel_ng.traces import TraceGenerator, TraceSpec


@pytest.fixture
def pair_table():
    """A (2/s alone) and B (1/s alone) keep 1.6/s and 0.8/s on a shared V100: 0.8 each of their
    isolated speed, so max-min fairness packs them all the time."""
    return ThroughputTable(
        isolated={"v100": {("A", 1): 2.0, ("B", 1): 1.0}},
        pairs={"v100": {("A", 1): {("B", 1): (1.6, 0.8)}, ("B", 1): {("A", 1): (0.8, 1.6)}}},
    )


def test_pair_runs_at_in_pair_rates_and_survivor_runs_alone_once_its_partner_is_done(pair_table, make_trace):
    """One V100, A and B packed every round. A: 736 steps at 1.6/s ends 100 s into round 2.
    B runs at 0.8/s until then (368 steps), then alone at 1/s (408 steps): done at 868 s, in round 3
    (its own entry). It shared the GPU for 460 of its 868 s."""
    trace = make_trace([("A", 1, 736, 0), ("B", 1, 776, 0)])
    plans = []
    r = simulate(Cluster.parse("v100=1", gpus_per_server=1), pair_table, trace,
                 SimConfig(policy="las", space_sharing=True), observe=lambda p: plans.append(p.keys))
    assert [float(x) for x in r.jobs.finish] == [460.0, 868.0]
    assert plans == [[(0, 1)], [(0, 1)], [(1,)]]
    assert r.summary["policy_solved"] == "las_packed"
    assert r.summary["paired_fraction"] == pytest.approx(2 * 460 / (460 + 868))
    ideal = simulate(Cluster.parse("v100=1", gpus_per_server=1), pair_table, trace,
                     SimConfig(policy="las", space_sharing=True, ideal=True))
    assert [float(x) for x in ideal.jobs.finish] == [460.0, 920.0]     # the pair row (share 1) all along: fluid
    plain = simulate(Cluster.parse("v100=1", gpus_per_server=1), pair_table, trace, SimConfig(policy="las"))
    assert plain.jobs.finish.max() > 920.0 and plain.summary["paired_fraction"] == 0.0


@pytest.mark.parametrize("policy", ["las_packed", "gandiva", "fifo_packed"])
def test_space_sharing_never_runs_a_job_twice_in_a_round(reference_table, policy):
    cluster = Cluster.parse("v100=3,p100=3,k80=3", gpus_per_server=4)
    gen = TraceGenerator(TraceSpec(jobs_per_hour=0.2, seed=3), reference_table)
    seen = {"rounds": 0, "pairs": 0}

    def check(plan):
        jobs = plan.member_job.tolist()
        assert len(jobs) == len(set(jobs))
        used = np.bincount(plan.types, weights=plan.sfs, minlength=3)
        assert (used <= 3).all()          # a pair holds its GPU once
        seen["rounds"] += 1
        seen["pairs"] += sum(len(k) == 2 for k in plan.keys)

    s = simulate(cluster, reference_table, gen, SimConfig(policy=policy, window=(0, 30)), observe=check).summary
    assert s["jobs_measured"] == 30 and not s["unstable"]
    assert seen["pairs"] > 0 and s["paired_fraction"] > 0


def test_executor_refuses_a_job_twice_in_one_round(pair_table, make_trace):
    jobs = JobArrays.empty(pair_table, ["v100"])
    jobs.add_pairs(pair_table, ["v100"])
    trace = make_trace([("A", 1, 100, 0), ("B", 1, 100, 0)])
    ex = SimExecutor(jobs, lambda n: trace, 360.0, 1)
    assert ex.admit() == [0, 1]
    plan = make_plan([(0, 1), (0,)], [0, 1], [0, 0], [1, 1], [(0,), (1,)], [False, False], [True, True])
    with pytest.raises(RuntimeError, match="two entries"):
        ex.execute(plan)


def test_pair_arrays_match_the_table(reference_table):
    workers = ["v100", "p100", "k80"]
    ja = JobArrays.empty(reference_table, workers)
    ja.add_pairs(reference_table, workers)
    for a in (0, 5, 17):
        for b in (1, 5, 20):
            ka, kb = ja.key_list[a], ja.key_list[b]
            for j, w in enumerate(workers):
                pair = reference_table.get_pair(ka, kb, w)
                if pair is not None:
                    assert ja.P[a, b, j] == pair[0]


def test_placement_columns_share_gpus_and_split_jobs_run_unconsolidated(tiny_table, make_trace):
    """Two 4-GPU W jobs on 8 V100s in 4-GPU servers: both consolidated at 4/s. On 2-GPU
    servers every placement is split: the policy's consolidated column cannot be had, so
    they run at the unconsolidated 2.5/s either way."""
    trace = make_trace([("W", 4, 3600, 0), ("W", 4, 3600, 0)])
    for per, rate in ((4, 4.0), (2, 2.5)):
        cluster = Cluster.parse("v100=8,k80=4", gpus_per_server=per)
        plans = []
        r = simulate(cluster, tiny_table, trace, SimConfig(policy="las", placement_sensitive=True),
                     observe=plans.append)
        assert [float(x) for x in r.jobs.finish] == [3600 / rate] * 2
        assert r.summary["placement_sensitive"]
        assert all(p.cols is not None and set(p.types.tolist()) <= {0, 1} for p in plans)


def test_estimator_measurements_flow_back(reference_table):
    workers = ["v100", "p100", "k80"]
    ja = JobArrays.empty(reference_table, workers)
    ja.add_pairs(reference_table, workers)
    from gavel_ng.traces import generate

    trace = generate(TraceSpec(jobs_per_hour=1.0, seed=1), reference_table, 3)
    ja.append(trace, 0)
    est = EstimatedThroughputs(reference_table, ja, workers, profile_fraction=0.2, reference_jobs=10, seed=1)
    assert len(est.held_out) == len(reference_table.job_types) - 10
    T = est.isolated([0, 1, 2], workers)
    assert T.shape == (3, 3) and (T >= 0).all()
    pairs = est.pair_table([0, 1, 2], workers, T)
    assert pairs.frac.shape == (3, 3, 3) and (np.diagonal(pairs.frac, axis1=0, axis2=1) == 0).all()
    # a round: job 0 alone on a V100 for 300 s (600 steps); jobs 1 and 2 share a K80 for 360 s
    plan = make_plan([(0,), (1, 2)], [0, 1], [0, 2], [1, 1], [(0,), (72,)], [False, False], [True, True])
    est.on_round(plan, np.array([600.0, 36.0, 72.0]), np.zeros(3), np.array([300.0, 360.0, 360.0]))
    assert est.measurements == 2
    assert est.est.isolated(0, "v100") == pytest.approx(2.0)
    assert est.est.pair(1, 2, "k80") == pytest.approx((0.1, 0.2))


def test_estimated_space_sharing_simulation_runs(reference_table):
    cluster = Cluster.parse("v100=2,p100=2,k80=2", gpus_per_server=2)
    gen = TraceGenerator(TraceSpec(jobs_per_hour=0.15, seed=2), reference_table)
    s = simulate(cluster, reference_table, gen,
                 SimConfig(policy="las", space_sharing=True, estimate_throughputs=True, window=(0, 25))).summary
    assert s["jobs_measured"] == 25 and not s["unstable"]
    assert s["estimated_throughputs"] and s["estimator_measurements"] > 0 and s["estimator_rejected"] == 0


def test_cli_space_sharing_flags(capsys, reference_table_path):
    rc = main(["simulate", "--throughputs", str(reference_table_path), "--cluster", "v100=2,p100=2,k80=2",
               "--static", "8", "--space-sharing", "--placement-sensitive", "--estimate-throughputs",
               "--profile-fraction", "0.3", "--json"])
    assert rc == 0
    assert json.loads(capsys.readouterr().out)["jobs_measured"] == 8
    rc = main(["simulate", "--throughputs", str(reference_table_path), "--cluster", "v100=2,p100=2,k80=2",
               "--static", "4", "--policy", "gandiva"])
    out = capsys.readouterr().out
    assert rc == 0 and "space sharing      gandiva" in out


def test_ideal_mode_sums_a_jobs_rows(make_trace):
    """Max-min packs A (2/s alone, 1.5/s with B) and B (1/s alone, 0.8/s with A) 20/21 of the
    time and gives A the rest alone: fluid rates 32/21 and 16/21 steps/s."""
    table = ThroughputTable(
        isolated={"v100": {("A", 1): 2.0, ("B", 1): 1.0}},
        pairs={"v100": {("A", 1): {("B", 1): (1.5, 0.8)}, ("B", 1): {("A", 1): (0.8, 1.5)}}},
    )
    trace = make_trace([("A", 1, 1000, 0), ("B", 1, 100, 0)])
    r = simulate(Cluster.parse("v100=1", gpus_per_server=1), table, trace,
                 SimConfig(policy="las", space_sharing=True, ideal=True))
    assert r.jobs.finish[1] == pytest.approx(100 / (16 / 21))
    assert r.jobs.finish[0] == pytest.approx(360 + (1000 - 360 * 32 / 21) / 2.0)   # alone from round 2
