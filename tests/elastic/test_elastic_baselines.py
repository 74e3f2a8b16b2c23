"""The baselines of Pollux's evaluation, round policies of the one simulator: `tiresias` and `pollux`."""

from __future__ import annotations

import numpy as np
import pytest

from gavel_ng.cluster import Cluster
from gavel_ng.elastic import cap_tuned_gpus, pollux_workload, read_pollux_csv
from gavel_ng.errors import InputError
from gavel_ng.policies.builtin.pollux import power_mean
from gavel_ng.policies.registry import ADAPTIVE, BOTH, FIXED, get_policy
from gavel_ng.policies.rounds.configurations import STARVED
from gavel_ng.simulator import SimConfig, simulate
from gavel_ng.topology import Topology


def workload(tmp_path, rows):
    path = tmp_path / "w.csv"
    path.write_text("name,time,application,num_replicas,batch_size\n" + "".join(f"{r}\n" for r in rows))
    return read_pollux_csv(path)


def run_tiresias(et, cluster, **kw):
    """Tiresias in 360 s rounds (the thresholds below count rounds of that length)."""
    plans = []
    kw.setdefault("round_seconds", 360.0)
    r = simulate(cluster, None, et, SimConfig(policy="tiresias", **kw), observe=plans.append)
    return r, plans


def running(plans):
    return [set(p.member_job.tolist()) for p in plans]


# ----- tiresias --------------------------------------------------------------------------------
def test_tiresias_a_new_job_preempts_one_past_the_threshold_and_fifo_within_a_queue(tmp_path):
    # one 4-GPU server; two long 4-GPU jobs, the second arrives during the first's first round
    et = workload(tmp_path, ["a,0,cifar10,4,512", "b,60,cifar10,4,512"])
    cluster = Cluster.parse("t4=4", gpus_per_server=4)
    # threshold of one round of 4 GPUs: a is demoted after its first round, b (Q0) preempts it
    _, low = run_tiresias(et, cluster, options={"thresholds": (4 * 360.0 - 1,)})
    assert running(low)[:3] == [{0}, {1}, {0}]        # then both in Q1: FIFO, a (earlier) first
    assert low[2].renewed.sum() == 0                   # a resumed: a launch, not a renewal
    # a threshold no job reaches: one queue, FIFO, a runs to the end before b starts
    _, high = run_tiresias(et, cluster, options={"thresholds": (1e12,)})
    first_b = next(i for i, s in enumerate(running(high)) if 1 in s)
    assert all(s == {0} for s in running(high)[:first_b]) and first_b > 3


def test_tiresias_attained_service_is_gpus_times_time(tmp_path):
    # a 4-GPU job and a 1-GPU job on 5 GPUs; threshold between 1 and 4 rounds of one GPU
    et = workload(tmp_path, ["wide,0,cifar10,4,512", "narrow,0,cifar10,1,128", "late,300,cifar10,4,512"])
    cluster = Cluster.parse("t4=5", gpus_per_server=5)
    _, plans = run_tiresias(et, cluster, options={"thresholds": (2 * 360.0,)})
    # round 2: `late` (Q0) arrived; `wide` has 4 x 360 GPU-s (Q1), `narrow` 360 (Q0): wide is preempted
    assert running(plans)[1] == {1, 2}


def test_tiresias_promote_knob_ends_starvation(tmp_path):
    et = workload(tmp_path, ["a,0,cifar10,1,128", "b,60,cifar10,1,128"])
    cluster = Cluster.parse("t4=1", gpus_per_server=1)
    opts = {"thresholds": (100.0,)}
    _, plain = run_tiresias(et, cluster, options=opts)
    _, knob = run_tiresias(et, cluster, options=opts | {"promote_knob": 1.0})

    def b_runs_before_a_ends(plans):
        r = running(plans)
        a_last = max(i for i, s in enumerate(r) if 0 in s)
        return sum(1 in s for s in r[2:a_last])        # after both have run once

    assert b_runs_before_a_ends(plain) == 0            # both in Q1, FIFO: a to the end
    assert b_runs_before_a_ends(knob) > 0              # b waited longer than it ran: promoted


def test_tiresias_places_consolidated_and_keeps_type(tmp_path):
    et = workload(tmp_path, [f"j{i},{i},cifar10,4,512" for i in range(3)])
    cluster = Cluster.parse("t4=8,v100=8", gpus_per_server=4)
    r, plans = run_tiresias(et, cluster)
    assert r.summary["jobs_measured"] == 3
    topo = Topology.from_cluster(cluster)
    for p in plans:
        assert p.consolidated.all()
        for g, t in zip(p.gpus, p.types):
            assert set(topo.gpu_type[list(g)].tolist()) == {int(t)}


def test_tiresias_rejects_bad_options_and_runs_adaptive_jobs_fixed(tmp_path):
    et = workload(tmp_path, ["a,0,cifar10,1,128"])
    cluster = Cluster.parse("t4=4")
    with pytest.raises(InputError, match="tiresias.thresholds"):
        simulate(cluster, None, et, SimConfig(policy="tiresias", options={"thresholds": (10.0, 5.0)}))
    with pytest.raises(InputError, match="unknown"):
        simulate(cluster, None, et, SimConfig(policy="tiresias", options={"p": 1.0}))
    s = simulate(cluster, None, et, SimConfig(policy="tiresias")).summary
    assert s["adaptive_jobs"] == 0 and s["jobs_measured"] == 1   # jobs=FIXED: the spec is ignored


# ----- pollux ----------------------------------------------------------------------------------
def test_power_mean():
    assert power_mean(np.array([1.0, 4.0]), -1.0) == pytest.approx(1.6)       # harmonic mean
    assert power_mean(np.array([1.0, 4.0]), 1.0) == pytest.approx(2.5)
    assert power_mean(np.array([0.0, 4.0]), -1.0) == pytest.approx(2 / (1 / STARVED + 0.25))


def test_pollux_allocations_respect_its_constraints():
    et = pollux_workload(num_jobs=12, hours=0.5, seed=2)
    cluster = Cluster.parse("t4=16,v100=8", gpus_per_server=4)
    topo = Topology.from_cluster(cluster)
    plans = []
    r = simulate(cluster, None, et, SimConfig(policy="pollux", round_seconds=120,
                                              options={"population": 16, "generations": 10}), observe=plans.append)
    assert r.summary["jobs_measured"] == 12 and not r.summary["unstable"]
    assert any((p.sfs > 1).any() for p in plans)                  # jobs scale out
    for p in plans:
        used = [g for gs in p.gpus for g in gs]
        assert len(used) == len(set(used))                        # no GPU twice
        dist_on = {}
        for g, t in zip(p.gpus, p.types):
            assert set(topo.gpu_type[list(g)].tolist()) == {int(t)}   # one type per job
            servers = set(topo.gpu_server[list(g)].tolist())
            if len(servers) > 1:
                for s in servers:
                    dist_on[s] = dist_on.get(s, 0) + 1
        assert all(c == 1 for c in dist_on.values())              # one distributed job per server


def test_pollux_beats_tiresias_on_a_small_pollux_workload():
    cluster = Cluster.parse("t4=16", gpus_per_server=4)
    et = cap_tuned_gpus(pollux_workload(num_jobs=24, hours=1, seed=0), 16)
    pol = simulate(cluster, None, et, SimConfig(policy="pollux", round_seconds=120,
                                                options={"generations": 15})).summary
    tir = simulate(cluster, None, et, SimConfig(policy="tiresias", round_seconds=120,
                                                preemption_overhead_s=30)).summary
    assert pol["jobs_measured"] == tir["jobs_measured"] == 24
    assert pol["avg_jct_hours"] < 0.9 * tir["avg_jct_hours"]


def test_pollux_options_are_checked():
    et = pollux_workload(num_jobs=2, hours=0.1, seed=0)
    cluster = Cluster.parse("t4=4")
    with pytest.raises(InputError, match="pollux.model_type"):
        simulate(cluster, None, et, SimConfig(policy="pollux", options={"model_type": "a100"}))
    with pytest.raises(InputError, match="pollux.p"):
        simulate(cluster, None, et, SimConfig(policy="pollux", options={"p": 0.0}))


def test_registry_declares_what_the_simulator_follows():
    assert all(get_policy(n).is_round for n in ("goodput", "goodput_agnostic", "tiresias", "pollux"))
    assert not get_policy("las").is_round and get_policy("las").round_seconds == 360.0
    assert get_policy("goodput").jobs == BOTH and get_policy("tiresias").jobs == FIXED
    assert get_policy("pollux").jobs == ADAPTIVE
    assert not get_policy("goodput").agnostic and get_policy("goodput_agnostic").agnostic
    assert get_policy("pollux").agnostic


# ----- tuned GPU counts on small types, and the CLI ---------------------------------------------
def test_cap_tuned_gpus_keeps_jobs_that_fit_and_narrows_the_others():
    et = pollux_workload(num_jobs=60, hours=3, seed=1)
    assert et.gpus.max() > 16
    capped = cap_tuned_gpus(et, 16)
    wide = et.gpus > 16
    assert capped.gpus.max() <= 16 and (capped.gpus[wide] >= 1).all()
    assert (capped.gpus[~wide] == et.gpus[~wide]).all()
    assert np.array_equal(capped.trace.steps[~wide], et.trace.steps[~wide])
    assert capped.specs == et.specs and np.array_equal(capped.work, et.work)
    assert cap_tuned_gpus(et, 64) is et
    cluster = Cluster.parse("t4=16")
    # the simulator caps them itself: tiresias runs every job at a count that fits
    r = simulate(cluster, None, et, SimConfig(policy="tiresias"))
    assert r.summary["jobs_measured"] == 60 and int(r.jobs.sf.max()) <= 16
    with pytest.raises(InputError, match="max_gpus"):
        cap_tuned_gpus(et, 0)
