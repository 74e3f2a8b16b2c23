"""Mid-round backfill in the simulator: freed GPUs run waiting entries for the rest of the round."""

import numpy as np

from gavel_ng.cluster import Cluster
from gavel_ng.simulator import SimConfig, default_table, simulate
from gavel_ng.traces import TraceSpec, generate

ROUND = 360.0


def run(tiny_table, make_trace, rows, **config):
    """`rows` on one V100 under LAS; (result, the plans as they ran)."""
    plans = []
    cfg = SimConfig(policy="las", round_seconds=ROUND, **config)
    res = simulate(Cluster.parse("v100=1"), tiny_table, make_trace(rows), cfg, observe=plans.append)
    return res, plans


def test_a_short_jobs_gpu_runs_the_waiting_job_for_the_rest_of_the_round(tiny_table, make_trace):
    """Job 0 (10 s start-up, 36 s) runs first; job 1 waits. With backfill job 1 starts at 46 s, pays its start-up and
    keeps the GPU next round (a renewal: no second start-up); without, it starts in round 2."""
    rows = [("A", 1, 72, 0), ("C", 1, 1000, 0)]      # A: 2 steps/s, C: 1 step/s on a V100
    on, plans = run(tiny_table, make_trace, rows, preemption_overhead_s=10.0)
    off, _ = run(tiny_table, make_trace, rows, preemption_overhead_s=10.0, backfill=False)
    first = plans[0]
    assert first.member_job.tolist() == [0, 1] and first.gpus[0] == first.gpus[1]
    assert first.rows[1] >= 0                  # an allocation row: the ledger credits it
    np.testing.assert_allclose(on.jobs.finish, [10 + 36, 46 + 10 + 1000])
    np.testing.assert_allclose(off.jobs.finish, [10 + 36, ROUND + 10 + 1000])
    np.testing.assert_allclose(on.jobs.gpu_seconds, [46, 1010])     # held from each one's start
    assert on.summary["backfilled_entries"] == 1 and off.summary["backfilled_entries"] == 0
    assert on.summary["gpu_hours"] == round((46 + 1010) / 3600, 3)


def test_a_backfilled_job_that_finishes_frees_its_gpu_again(tiny_table, make_trace):
    rows = [("A", 1, 72, 0), ("A", 1, 72, 0), ("C", 1, 1000, 0)]
    res, plans = run(tiny_table, make_trace, rows)
    assert plans[0].member_job.tolist() == [0, 1, 2]
    np.testing.assert_allclose(res.jobs.finish, [36, 72, 1072])


def test_no_backfill_with_too_little_of_the_round_left(tiny_table, make_trace):
    """Job 0 ends 300 s into the round: 60 s left, under a quarter round."""
    res, plans = run(tiny_table, make_trace, [("A", 1, 600, 0), ("C", 1, 100, 0)])
    assert plans[0].member_job.tolist() == [0]
    np.testing.assert_allclose(res.jobs.finish, [300, ROUND + 100])


def test_a_four_gpu_job_backfills_only_onto_a_whole_server(tiny_table, make_trace):
    """Four one-GPU jobs of 10 s end early. Two on each 4-GPU server: the waiting 4-GPU job does not
    start split over them (it would run at its unconsolidated rate). All four on one server: it
    starts there."""
    cfg = SimConfig(policy="las", round_seconds=ROUND)
    long, short, wide = ("C", 1, 3000, 0), ("A", 1, 20, 0), ("W", 4, 400, 0)
    for rows, backfilled in (([long, long, short, short] * 2 + [wide], False),
                             ([long] * 4 + [short] * 4 + [wide], True)):
        plans = []
        simulate(Cluster.parse("v100=8", gpus_per_server=4), tiny_table, make_trace(rows), cfg, observe=plans.append)
        first = plans[0]
        assert first.keys[:8] == [(m,) for m in range(8)]      # the one-GPU jobs on GPUs 0-7, in order
        assert ((8,) in first.keys) == backfilled
        if backfilled:
            assert sorted(first.gpus[first.keys.index((8,))]) == [4, 5, 6, 7]


def generated(multi=False, **config):
    """A static trace of 40 jobs (all there at the start) on 16 GPUs: entries wait every round."""
    table = default_table(["v100", "p100", "k80"])
    trace = generate(TraceSpec(2.0, multi, False, False, 3), table, 40)
    cfg = SimConfig(policy="las", **config)
    return simulate(Cluster.parse("v100=8,p100=4,k80=4", gpus_per_server=4), table, trace, cfg)


def test_backfill_is_deterministic_and_used_on_a_loaded_cluster():
    a, b = generated(), generated()
    assert a.summary["backfilled_entries"] > 0
    np.testing.assert_array_equal(a.jobs.finish, b.jobs.finish)
    np.testing.assert_array_equal(a.jobs.gpu_seconds, b.jobs.gpu_seconds)
    # GPU-seconds charged to jobs are the GPU time the cluster was busy, backfilled leases included
    assert abs(a.jobs.gpu_seconds.sum() / 3600 - a.summary["gpu_hours"]) < 1e-2


def test_off_under_gavel_compat():
    on = generated(multi=True, gavel_compat=True)
    off = generated(multi=True, gavel_compat=True, backfill=False)
    assert on.summary["backfilled_entries"] == 0 and not on.summary["backfill"]
    np.testing.assert_array_equal(on.jobs.finish, off.jobs.finish)


def test_a_job_arriving_mid_round_starts_on_an_idle_gpu(tiny_table, make_trace):
    """Job 1 arrives 50 s into the first round while the second V100 idles: it starts then (paying its
    start-up), as the runtime starts an arrival within a tick (runtime.backfill); it is done within the
    round, so no later round runs it again. Without backfill it waits for the next round."""
    rows = [("C", 1, 1000, 0), ("A", 1, 72, 50)]
    cfg = dict(policy="las", round_seconds=ROUND, preemption_overhead_s=10.0)
    plans = []
    on = simulate(Cluster.parse("v100=2"), tiny_table, make_trace(rows), SimConfig(**cfg), observe=plans.append)
    off = simulate(Cluster.parse("v100=2"), tiny_table, make_trace(rows), SimConfig(**cfg, backfill=False))
    np.testing.assert_allclose(on.jobs.finish, [10 + 1000, 50 + 10 + 36])
    np.testing.assert_allclose(off.jobs.finish, [10 + 1000, ROUND + 10 + 36])
    assert plans[0].member_job.tolist() == [0, 1] and plans[0].rows[1] == -1    # in no allocation yet
    assert all(1 not in p.member_job.tolist() for p in plans[1:])
    assert on.summary["jobs_unfinished"] == 0 and on.summary["backfilled_entries"] == 1


def test_a_job_arriving_mid_round_waits_when_no_gpu_idles(tiny_table, make_trace):
    rows = [("C", 1, 1000, 0), ("A", 1, 72, 50)]
    res = simulate(Cluster.parse("v100=1"), tiny_table, make_trace(rows), SimConfig(policy="las", round_seconds=ROUND))
    assert res.jobs.finish[1] >= ROUND


def test_a_backfilled_start_pays_the_start_overhead_when_given(tiny_table, make_trace):
    """Job 1 starts on the GPU job 0 frees at 46 s: with --start-overhead 2 it pays 2 s there (no job is vacating
    the GPU; a cluster's launch onto free GPUs costs less than one at a round start), not the launch's 10 s."""
    rows = [("A", 1, 72, 0), ("C", 1, 1000, 0)]
    res, _ = run(tiny_table, make_trace, rows, preemption_overhead_s=10.0, start_overhead_s=2.0)
    np.testing.assert_allclose(res.jobs.finish, [10 + 36, 46 + 2 + 1000])


def test_a_job_arriving_mid_round_starts_when_a_gpu_frees(tiny_table, make_trace):
    """Job 1 arrives 10 s in while job 0 holds the only V100, and every entry of the plan runs (its waitlist
    is empty): when job 0 is done at 36 s its GPU goes to job 1, as the runtime offers the arrivals GPUs again
    whenever a job of the round ends (runtime.backfill, LiveBackfill.arrive). It used to wait for the round's
    end: the moments GPUs free were looked at only when the plan had entries waiting."""
    res, plans = run(tiny_table, make_trace, [("A", 1, 72, 0), ("C", 1, 1000, 10)])
    np.testing.assert_allclose(res.jobs.finish, [36, 36 + 1000])
    assert plans[0].member_job.tolist() == [0, 1] and plans[0].rows[1] == -1
