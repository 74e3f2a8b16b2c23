"""`sia` (Sia's formulation as a round policy) and `pollux_sia` (Pollux on a mixed cluster as Sia ran it)."""

from __future__ import annotations

import numpy as np
import pytest

from gavel_ng.cluster import Cluster
from gavel_ng.columns import Columns
from gavel_ng.elastic import pollux_workload
from gavel_ng.errors import InputError
from gavel_ng.policies.builtin.goodput import Goodput
from gavel_ng.policies.builtin.pollux import majority_type, type_power
from gavel_ng.policies.builtin.sia import Sia, place_configurations, sia_gpu_counts
from gavel_ng.policies.registry import get_policy
from gavel_ng.policies.rounds import RoundJobs
from gavel_ng.policies.rounds.configurations import STARVED, config_values
from gavel_ng.round_planner import RoundPlanner
from gavel_ng.simulator import SimConfig, simulate
from gavel_ng.topology import Topology


class PowerLawSource:
    """A RoundSource whose adaptive jobs' goodput is speed[type] x K^alpha (alpha 1: linear scaling)."""

    def __init__(self, types, speed, alpha=1.0, arrival=0.0, reallocations=0):
        self.types, self.speed, self.alpha = list(types), dict(speed), alpha
        self.arrival, self.reallocations = arrival, reallocations

    def round_jobs(self, jobs):
        n = len(jobs)
        return RoundJobs(np.ones(n, bool), np.ones(n, np.int64), np.zeros((n, len(self.types))),
                         np.full(n, self.arrival, float), np.full(n, self.reallocations, np.int64))

    def goodput(self, jobs, worker_type, gpus, servers):
        g = self.speed[worker_type] * np.asarray(gpus, float) ** self.alpha
        return np.repeat(g[None, :], len(jobs), axis=0)


def context(cluster: Cluster, source, jobs, held=None, now=600.0, delay=30.0):
    """A real RoundPlanner's context with sia's declared configurations and the given GPUs held."""
    topo = Topology.from_cluster(cluster)
    planner = RoundPlanner("sia", Sia().decide, source, topo, lambda: now, realloc_delay=delay,
                           gpu_counts=get_policy("sia").gpu_counts)
    planner.arrive(list(jobs))
    planner.last = {m: tuple(h) for m, h in zip(jobs, held or []) if h}
    return planner.context(now)


def gpus_of(entries):
    return {e.job: e.gpus for e in entries}


# ----- the configuration set and the planner's hook -----------------------------------------------
def test_configuration_set_follows_each_types_server_size():
    topo = Topology.from_cluster(Cluster(gpus={"t4": 24, "a100": 16, "x": 12},
                                         gpus_per_server={"t4": 4, "a100": 8, "x": 6}))
    counts = sia_gpu_counts(topo)
    assert counts[0] == (1, 2, 4, 8, 12, 16, 20, 24)      # 4-GPU servers: powers of two to 4, then whole servers
    assert counts[1] == (1, 2, 4, 8, 16)                   # 8-GPU servers
    assert counts[2] == (1, 2, 4, 8)                       # 6 = 4 + 2 virtual nodes: R = 4, two whole 4s
    planner = RoundPlanner("sia", Sia().decide, None, topo, lambda: 0.0, gpu_counts=get_policy("sia").gpu_counts)
    names = planner.columns.names
    assert {"t4x12", "t4x24", "a100x16", "xx8"} <= set(names)
    assert not {"t4x3", "t4x6", "a100x12", "a100x24", "xx12"} & set(names)
    assert get_policy("goodput").gpu_counts is None        # the others keep the planner's global counts


def test_columns_take_one_list_of_counts_per_type():
    cols = Columns.configurations(["a", "b"], np.array([8, 8]), [(1, 2), (4, 8)])
    assert cols.names == ["a", "b", "ax1", "ax2", "bx4", "bx8"]
    with pytest.raises(ValueError, match="3 lists"):
        Columns.configurations(["a", "b"], np.array([8, 8]), [(1,), (2,), (4,)])


# ----- the program ----------------------------------------------------------------------------------
def test_scale_up_limit_doubles_at_most_per_round():
    cluster = Cluster(gpus={"a100": 16}, gpus_per_server={"a100": 8})
    src = PowerLawSource(["a100"], {"a100": 1.0})
    for held, want in (((), 1), ((0, 1), 4), ((0, 1, 2, 3), 8), (tuple(range(8)), 16)):
        entries = Sia().decide(context(cluster, src, [0], [held]))
        assert len(gpus_of(entries)[0]) == want
    assert len(gpus_of(Sia(scale_up=None).decide(context(cluster, src, [0], [()])))[0]) == 16
    # shrinking is free: two newcomers share the GPUs with a job that holds all 16
    entries = Sia().decide(context(cluster, src, [0, 1, 2], [tuple(range(16)), (), ()]))
    assert sorted(len(g) for g in gpus_of(entries).values()) == [1, 1, 8]


def test_lambda_fills_an_assignment_that_would_otherwise_be_empty():
    cluster = Cluster(gpus={"t4": 4}, gpus_per_server={"t4": 4})
    src = PowerLawSource(["t4"], {"t4": 1.0}, alpha=0.8)
    assert Sia(lam=0.0).decide(context(cluster, src, [0, 1, 2])) == []     # p < 0: every choice only costs
    assert sorted(gpus_of(Sia().decide(context(cluster, src, [0, 1, 2])))) == [0, 1, 2]


def test_restart_factor_keeps_a_job_where_moving_barely_helps():
    cluster = Cluster(gpus={"slow": 2, "fast": 2}, gpus_per_server={"slow": 2, "fast": 2})
    src = PowerLawSource(["slow", "fast"], {"slow": 1.0, "fast": 1.05}, reallocations=1)
    held = (0, 1)                                          # the slow type's two GPUs
    stay = Sia().decide(context(cluster, src, [0], [held]))
    assert gpus_of(stay)[0] == held                        # r = (600 - 30) / (600 + 30) < 1 / 1.05
    move = Sia(restart_factor=False).decide(context(cluster, src, [0], [held]))
    assert move[0].type == 1 and len(move[0].gpus) == 2


def test_goodput_and_sia_share_the_row_minimum_normalization():
    cluster = Cluster(gpus={"slow": 4, "fast": 4}, gpus_per_server={"slow": 4, "fast": 4})
    ctx = context(cluster, PowerLawSource(["slow", "fast"], {"slow": 1.0, "fast": 3.0}, alpha=0.5), [0, 1])
    G = ctx.min_speedups
    on = G > 0
    # every row's least productive option is the job's smallest GPU count (1 here), on the slow type
    assert np.allclose(np.where(on, G, np.inf).min(axis=1), 1.0)
    fast4 = ctx.columns.names.index("fastx4")
    assert np.allclose(G[:, fast4], 3.0 * 4 ** 0.5)
    assert np.array_equal(Sia(restart_factor=False).goodput_matrix(ctx), G)


def goodput_gpus(cluster, src, jobs, held, **options):
    """GPUs goodput gives each job (0: it waits) on a real planner's context with the planner's counts."""
    topo = Topology.from_cluster(cluster)
    planner = RoundPlanner("goodput", Goodput(**options).decide, src, topo, lambda: 600.0, realloc_delay=30.0)
    planner.arrive(list(jobs))
    planner.last = {m: tuple(h) for m, h in zip(jobs, held) if h}
    ctx = planner.context(600.0)
    choice = Goodput(**options).decide(ctx)
    return [int(ctx.need[i, c]) if c >= 0 else 0 for i, c in enumerate(choice.tolist())]


def test_goodput_lets_a_newcomer_wait_rather_than_shrink_running_jobs():
    """Two jobs run on 2 GPUs each (linear scaling) when a third arrives: shrinking one to start it
    gains a job worth 1 / 1.1 of its least productive option and costs a restart, so it waits; with
    Pollux's near-zero waiting speedup every job that fits is started (issue 29: the bursts' churn)."""
    cluster = Cluster(gpus={"a100": 4}, gpus_per_server={"a100": 4})
    src = PowerLawSource(["a100"], {"a100": 1.0})
    held = [(0, 1), (2, 3), ()]
    assert sorted(goodput_gpus(cluster, src, [0, 1, 2], held)) == [0, 2, 2]     # (which of the equals waits: a tie)
    assert sorted(goodput_gpus(cluster, src, [0, 1, 2], held, waiting=STARVED)) == [1, 1, 2]
    # no GPU idles while a job waits (every option is worth more than waiting); under linear scaling
    # the GPUs go to fewer jobs rather than one each (a job at its least productive option adds 0.1)
    got = goodput_gpus(cluster, src, [0, 1, 2], [(0,), (), ()])
    assert sum(got) == 4 and 0 in got
    with pytest.raises(InputError, match="waiting"):
        config_values(np.ones((1, 1)), -1.0, 0.0)


def test_options_are_checked():
    for opts, field in (({"p": 0.0}, "sia.p"), ({"lam": -1}, "sia.lam"), ({"scale_up": 0.5}, "sia.scale_up"),
                        ({"restart_factor": "yes"}, "sia option restart_factor")):
        with pytest.raises(InputError, match=field):
            get_policy("sia").decider(opts)
    with pytest.raises(InputError, match="pollux.mixed_types"):
        get_policy("pollux").decider({"mixed_types": "any"})


# ----- placement ------------------------------------------------------------------------------------
def test_whole_server_configuration_takes_whole_free_servers():
    topo = Topology.from_cluster(Cluster(gpus={"t4": 16}, gpus_per_server={"t4": 4}))
    got = gpus_of(place_configurations(topo, [0, 1, 2], [0, 0, 0], [1, 1, 8], [(0,), (4,), ()]))
    assert got[0] == (0,) and got[1] == (4,)               # kept
    assert got[2] == tuple(range(8, 16))                   # servers 2 and 3, whole


def test_fragmentation_repacks_the_type_and_stays_valid():
    topo = Topology.from_cluster(Cluster(gpus={"t4": 16}, gpus_per_server={"t4": 4}))
    held = [(0,), (4,), (8,), (12,), (1, 2), ()]           # no server is free for the newcomer's 8
    ks = [1, 1, 1, 1, 2, 8]
    got = gpus_of(place_configurations(topo, list(range(6)), [0] * 6, ks, held))
    assert sorted(got) == list(range(6))                   # nobody evicted: power-of-two nodes always pack
    used = [g for gs in got.values() for g in gs]
    assert len(used) == len(set(used)) == sum(ks)
    servers = {m: set(topo.gpu_server[list(g)].tolist()) for m, g in got.items()}
    assert all(len(servers[m]) == 1 for m in range(5))     # partial allocations on one server
    assert len(servers[5]) == 2 and all(set(topo.server_gpus[s].tolist()) <= set(got[5]) for s in servers[5])
    assert sum(got[m] == held[m] for m in range(5)) >= 3   # jobs off the newcomer's servers keep their GPUs


# ----- pollux as Sia ran it -------------------------------------------------------------------------
def test_pollux_sia_keeps_the_majority_type_and_idles_the_rest():
    node_type = np.array([0, 0, 1])                        # two t4 nodes, one a100 node
    power = type_power(["t4", "a100"])
    A = np.array([[2, 1, 1],                               # 3 t4 + 1 a100: runs on the 3 t4
                  [1, 1, 2],                               # 2 + 2: the a100 (more tensor FLOP/s) wins the tie
                  [0, 0, 0]])
    assert majority_type(A, node_type, power).tolist() == [[2, 1, 0], [0, 0, 2], [0, 0, 0]]
    assert majority_type(np.array([[1, 1, 2]]), node_type, type_power(["a100", "t4"])).tolist() == [[1, 1, 0]]
    assert get_policy("pollux_sia").agnostic and get_policy("pollux_sia").is_round


def test_sia_and_pollux_sia_run_a_small_pollux_workload_to_completion():
    cluster = Cluster(gpus={"t4": 8, "v100": 4, "a100": 8}, gpus_per_server={"t4": 4, "v100": 4, "a100": 8})
    topo = Topology.from_cluster(cluster)
    et = pollux_workload(num_jobs=12, hours=0.5, seed=3)
    for policy in ("sia", "pollux_sia"):
        plans = []
        r = simulate(cluster, None, et, SimConfig(policy=policy, options={"generations": 10}
                                                  if policy == "pollux_sia" else {}), observe=plans.append)
        assert r.summary["jobs_measured"] == 12 and not r.summary["unstable"]
        for p in plans:
            for g, t in zip(p.gpus, p.types.tolist()):
                assert set(topo.gpu_type[list(g)].tolist()) == {t}
                servers = set(topo.gpu_server[list(g)].tolist())
                if policy == "pollux_sia":
                    assert len(g) <= 16
                    continue
                size = {len(topo.server_gpus[s]) for s in servers}.pop()
                if len(g) < size:
                    assert len(servers) == 1                               # a partial node stays on one
                else:
                    assert len(g) == size * len(servers)                   # whole nodes only


def test_a_null_scale_up_means_no_limit_and_passes_the_option_check():
    spec = get_policy("sia")
    assert spec.decider({"scale_up": None}).__self__.scale_up is None   # null is the documented "no limit"
    assert spec.decider({}).__self__.scale_up == 2.0                    # Sia's default
