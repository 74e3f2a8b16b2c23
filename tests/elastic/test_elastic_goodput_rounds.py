"""The `goodput` round policy: one whole configuration per job, p-mean, restart factor (Sia-like)."""

from __future__ import annotations

import itertools
from dataclasses import replace

import numpy as np
import pytest

from gavel_ng.cluster import Cluster
from gavel_ng.columns import Columns
from gavel_ng.elastic import contention_free_jct, fit_to_cluster, pollux_workload
from gavel_ng.errors import InputError
from gavel_ng.policies.rounds.configurations import STARVED, config_values, solve_configurations
from gavel_ng.simulator import SimConfig, simulate


def small_instance(rng, jobs=4):
    cols = Columns.configurations(["fast", "slow"], np.array([4.0, 3.0]), (1, 2, 4))
    scale = rng.uniform(0.3, 1.0, jobs)[:, None] ** np.log2(np.maximum(cols.gpus, 1))[None, :]
    S = rng.uniform(0.5, 2.0, (jobs, 1)) * np.maximum(cols.gpus, 1) * scale * np.where(cols.pool == 0, 1.0, 0.5)
    S[:, cols.gpus == 0] = 0.0                               # adaptive jobs: no plain columns
    need = np.broadcast_to(np.maximum(cols.gpus, 1), S.shape).astype(float)
    return cols, S, need, np.array([4.0, 3.0])


def brute_force(S, need, cols, cap, p):
    """Best power mean over every assignment of at most one column per job."""
    M, C = S.shape
    best = -np.inf
    for pick in itertools.product(range(-1, C), repeat=M):
        used = np.zeros(len(cap))
        s = np.full(M, STARVED if p < 0 else 0.0)
        ok = True
        for m, c in enumerate(pick):
            if c >= 0:
                if S[m, c] <= 0:
                    ok = False
                    break
                used[cols.pool[c]] += need[m, c]
                s[m] = S[m, c]
        if ok and (used <= cap).all():
            best = max(best, np.mean(np.maximum(s, STARVED) ** p if p < 0 else s ** p) ** (1 / p))
    return best


@pytest.mark.parametrize("p", [-1.0, 0.5, 1.0])
def test_configurations_are_whole_within_capacity_and_exact_for_the_power_mean(p):
    rng = np.random.default_rng(7)
    for _ in range(3):
        cols, S, need, cap = small_instance(rng, jobs=3)
        choice = solve_configurations(S, need, cols, cap, p=p)
        used = np.zeros(2)
        s = np.full(len(S), STARVED if p < 0 else 0.0)
        for m, c in enumerate(choice):
            if c >= 0:
                used[cols.pool[c]] += need[m, c]
                s[m] = S[m, c]
        assert (used <= cap).all()
        ours = np.mean(np.maximum(s, STARVED) ** p if p < 0 else s ** p) ** (1 / p)
        assert ours == pytest.approx(brute_force(S, need, cols, cap, p), rel=1e-6)


def test_harmonic_mean_runs_every_job_before_growing_one():
    cols = Columns.configurations(["t"], np.array([4.0]), (1, 2, 4))
    S = np.zeros((4, cols.num))
    S[:, cols.gpus > 0] = [1.0, 1.9, 3.6]                      # near-linear scaling
    need = np.broadcast_to(np.maximum(cols.gpus, 1), S.shape).astype(float)
    assert (cols.gpus[solve_configurations(S, need, cols, np.array([4.0]), p=-1.0)] == 1).all()
    # the sum of speedups (p = 1) is indifferent to who runs and takes the best total: 3.6 on 4 GPUs < 4 x 1.0
    assert (solve_configurations(S, need, cols, np.array([4.0]), p=1.0) >= 0).sum() == 4


def test_agnostic_twin_fits_each_type_and_keeps_a_job_on_its_type():
    cols = Columns.configurations(["fast", "slow"], np.array([4.0, 4.0]), (1, 2, 4))
    S = np.where(cols.gpus > 0, np.maximum(cols.gpus, 1) * np.where(cols.pool == 0, 2.0, 1.0), 0.0)[None, :]
    S = np.repeat(S, 2, axis=0)
    need = np.broadcast_to(np.maximum(cols.gpus, 1), S.shape).astype(float)
    choice = solve_configurations(S, need, cols, np.array([4.0, 4.0]), agnostic=True, prev_type=np.array([1, 0]))
    assert (choice >= 0).all()
    assert cols.pool[choice].tolist() == [1, 0]                # blind to speed: where each ran before
    used = [need[m, c] for m, c in enumerate(choice)]
    assert sum(u for u, c in zip(used, choice) if cols.pool[c] == 0) <= 4


def test_bad_p_and_unknown_options_are_input_errors():
    with pytest.raises(InputError, match="p"):
        config_values(np.ones((1, 1)), 0.0)
    et = pollux_workload(num_jobs=2, hours=0.1, seed=0)
    with pytest.raises(InputError, match="floor"):
        simulate(Cluster.parse("t4=4"), None, et, SimConfig(policy="goodput", options={"floor": 0.5}))
    with pytest.raises(InputError, match="las option='p': unknown; las takes no options"):
        simulate(Cluster.parse("t4=4"), None, et, SimConfig(policy="las", options={"p": 1.0}))


@pytest.mark.parametrize("policy, option, value, reason", [
    ("goodput", "p", "x", "finite number"), ("goodput", "restart_factor", 1, "true or false"),
    ("pollux", "p", float("nan"), "finite number"), ("pollux", "population", 2.5, "integer")])
def test_an_option_of_the_wrong_shape_is_named_in_one_line(policy, option, value, reason):
    from gavel_ng.policies import get_policy

    with pytest.raises(InputError, match=f"{policy} option {option}.*{reason}"):
        get_policy(policy).decider({option: value})


def test_restart_factor_keeps_jobs_on_their_configuration():
    et = pollux_workload(num_jobs=20, hours=1, seed=1)
    cluster = Cluster.parse("t4=8,v100=4,a100=4", gpus_per_server=4)
    et = fit_to_cluster(et, cluster)
    runs = {f: simulate(cluster, None, et, SimConfig(policy="goodput", options={"restart_factor": f})).summary
            for f in (True, False)}
    assert runs[True]["jobs_measured"] == runs[False]["jobs_measured"] == 20
    assert runs[True]["reallocations"] < runs[False]["reallocations"]


@pytest.mark.slow
def test_goodput_beats_las_and_its_agnostic_twin_on_a_small_heterogeneous_workload():
    cluster = Cluster.parse("t4=16,v100=8,a100=8", gpus_per_server=4)
    et = fit_to_cluster(pollux_workload(num_jobs=40, hours=2, seed=0), cluster)
    jct = {p: simulate(cluster, None, et, SimConfig(policy=p, preemption_overhead_s=30)).summary["avg_jct_hours"]
           for p in ("goodput", "goodput_agnostic", "las")}   # each policy's own rounds: 60 s, 60 s, 360 s
    assert jct["goodput"] < 0.7 * jct["las"]
    assert jct["goodput"] < jct["goodput_agnostic"]
    # and no policy beats the contention-free bound (one type per job, the 30 s start delay)
    assert jct["goodput"] * 3600 > contention_free_jct(et, cluster, 30.0).mean()


def test_an_adaptive_job_no_configuration_can_run_is_refused_up_front():
    et = pollux_workload(num_jobs=3, hours=0.1, seed=0)
    et.specs[1] = replace(et.specs[1], min_gpus=8)   # the cluster's types have 4 GPUs each
    with pytest.raises(InputError, match=r"trace job 1.*fits no configuration.*min_gpus 8"):
        simulate(Cluster.parse("t4=4,v100=4"), None, et, SimConfig(policy="goodput"))
    et.specs[1] = replace(et.specs[1], min_gpus=4)
    assert simulate(Cluster.parse("t4=4,v100=4"), None, et, SimConfig(policy="goodput")).summary["jobs_measured"] == 3
