import pytest

from gavel_ng.cluster import Cluster
from gavel_ng.errors import InputError
from gavel_ng.profiles import GPUS
from gavel_ng.simulator import SimConfig, simulate
from gavel_ng.traces import TraceGenerator, TraceSpec


def finish_times(result):
    return [float(x) for x in result.jobs.finish]


def test_hand_checked_two_types(tiny_table, make_trace):
    """A runs on the V100 only, B on the K80 only; B arrives mid-round onto the idle K80 and starts at
    once, as on a cluster (issue 41)."""
    cluster = Cluster.parse("v100=1,k80=1", gpus_per_server=1)
    trace = make_trace([("A", 1, 1000, 0), ("B", 1, 500, 100)])
    r = simulate(cluster, tiny_table, trace, SimConfig(policy="las"))
    # A: 2 steps/s, 720 steps in round 1, the last 280 in 140 s of round 2
    # B: started at 100 on the idle K80, 1 step/s for 500 s
    assert finish_times(r) == [500.0, 600.0]
    s = r.summary
    assert s["avg_jct_hours"] == round((500 + 500) / 2 / 3600, 6)
    assert s["makespan_hours"] == round(600 / 3600, 6)
    assert s["utilization"] == round((500 + 500) / (2 * 720), 6)   # two rounds of 2 GPUs
    v100, k80 = GPUS["v100"].dollars_per_hour, GPUS["k80"].dollars_per_hour   # default list prices
    assert s["total_cost_usd"] == round(500 / 3600 * v100 + 500 / 3600 * k80, 2)
    assert s["jobs_measured"] == 2 and not s["unstable"]


def test_hand_checked_time_sharing_vs_ideal(tiny_table, make_trace):
    """Two equal jobs on one V100: LAS gives each half; the mechanism alternates whole rounds."""
    cluster = Cluster.parse("v100=1", gpus_per_server=1)
    trace = make_trace([("C", 1, 1000, 0), ("C", 1, 1000, 0)])
    r = simulate(cluster, tiny_table, trace, SimConfig(policy="las"))
    # rounds: 0 1 0 1 | job 0 finishes 280 s into round 5 | job 1 alone, 280 s into round 6
    assert finish_times(r) == [1440.0 + 280, 1800.0 + 280]
    assert r.summary["lease_renewal_fraction"] == pytest.approx(0.0)
    ideal = simulate(cluster, tiny_table, trace, SimConfig(policy="las", ideal=True))
    # half a GPU each: 900 steps in five rounds, the last 100 at 0.5/s
    assert finish_times(ideal) == [2000.0, 2000.0]


def test_unconsolidated_throughput_when_split(tiny_table, make_trace):
    cluster = Cluster.parse("v100=4", gpus_per_server=2)
    trace = make_trace([("W", 4, 900 * 2.5, 0)])
    r = simulate(cluster, tiny_table, trace, SimConfig(policy="las"))
    assert finish_times(r) == [900.0]
    whole = simulate(Cluster.parse("v100=4", gpus_per_server=4), tiny_table, trace, SimConfig(policy="las"))
    assert finish_times(whole) == [900 * 2.5 / 4]


def test_preemption_overhead_is_charged_on_launch_only(tiny_table, make_trace):
    cluster = Cluster.parse("v100=1", gpus_per_server=1)
    trace = make_trace([("A", 1, 2000, 0)])
    r = simulate(cluster, tiny_table, trace, SimConfig(policy="las", preemption_overhead_s=10))
    # launched once (10 s lost), then renewed: 2000 steps at 2/s = 1000 s
    assert finish_times(r) == [1010.0]
    assert r.summary["lease_renewal_fraction"] == pytest.approx(2 / 3)


def test_same_seed_same_numbers(reference_table):
    cluster = Cluster.parse("v100=8,p100=8,k80=8", gpus_per_server=4)
    out = []
    for _ in range(2):
        gen = TraceGenerator(TraceSpec(jobs_per_hour=0.5, multi_gpu=True, seed=5), reference_table)
        s = simulate(cluster, reference_table, gen, SimConfig(policy="las", window=(20, 60), seed=5)).summary
        s.pop("wall_seconds")
        s.pop("solve_seconds")
        out.append(s)
    assert out[0] == out[1] and out[0]["jobs_measured"] == 40


def test_gavel_compat_runs_and_is_deterministic(reference_table):
    cluster = Cluster.parse("v100=4,p100=4,k80=4", gpus_per_server=4)
    res = []
    for _ in range(2):
        gen = TraceGenerator(TraceSpec(jobs_per_hour=0.5, seed=2), reference_table)
        s = simulate(cluster, reference_table, gen,
                     SimConfig(policy="las_agnostic", window=(0, 30), gavel_compat=True, seed=2)).summary
        res.append((s["avg_jct_hours"], s["policy_solves"], s["mode"]))
    assert res[0] == res[1] and res[0][2] == "gavel-compat"


def test_overloaded_run_is_capped_and_unstable(reference_table):
    cluster = Cluster.parse("v100=1,p100=1,k80=1", gpus_per_server=1)
    gen = TraceGenerator(TraceSpec(jobs_per_hour=4.0, seed=0), reference_table)
    s = simulate(cluster, reference_table, gen,
                 SimConfig(policy="las", window=(0, 50), max_sim_seconds=48 * 3600)).summary
    assert s["unstable"] and s["jobs_measured"] < 50
    assert s["simulated_hours"] <= 48.2


def test_window_past_trace_end(tiny_table, make_trace):
    trace = make_trace([("A", 1, 10, 0)])
    with pytest.raises(InputError, match="window"):
        simulate(Cluster.parse("v100=1,k80=1"), tiny_table, trace, SimConfig(window=(0, 5)))


def test_job_that_fits_nowhere_is_named(tiny_table, make_trace):
    trace = make_trace([("A", 1, 10, 0), ("W", 4, 10, 0)])
    with pytest.raises(InputError, match="job 1"):
        simulate(Cluster.parse("v100=2,k80=2"), tiny_table, trace, SimConfig())


def test_rate_limited_solves_backfill_new_jobs(tiny_table, make_trace):
    """With solves at most every 10 rounds, a job arriving in between still starts before the next solve:
    at once on the idle GPU (issue 41), without backfill at the next round."""
    cluster = Cluster.parse("v100=2", gpus_per_server=2)
    trace = make_trace([("C", 1, 100000, 0), ("C", 1, 360, 10)])
    r = simulate(cluster, tiny_table, trace, SimConfig(policy="las", min_solve_interval=3600))
    assert finish_times(r)[1] == 370.0
    assert r.summary["policy_solves"] == 2     # at 0 s, and at 3600 s for the completion at 370 s
    r = simulate(cluster, tiny_table, trace, SimConfig(policy="las", min_solve_interval=3600, backfill=False))
    assert finish_times(r)[1] == 720.0


def test_het_aware_las_beats_agnostic_small(reference_table):
    cluster = Cluster.parse("v100=12,p100=12,k80=12", gpus_per_server=4)
    jct = {}
    for policy in ("las", "las_agnostic"):
        gen = TraceGenerator(TraceSpec(jobs_per_hour=1.0, seed=0), reference_table)
        jct[policy] = simulate(cluster, reference_table, gen,
                               SimConfig(policy=policy, window=(50, 150))).summary["avg_jct_hours"]
    assert jct["las"] < jct["las_agnostic"]
