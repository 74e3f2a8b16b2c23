"""Issue 40: a measured profile set's per-application restart delays, charged to every job that
starts or changes placement (fixed jobs included, carried over rounds), scoped to the sets that have
them; Sia's raw-throughput Gavel (`gavel_sia`)."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

import gavel_ng as g
from gavel_ng.cluster import Cluster
from gavel_ng.elastic import get_family
from gavel_ng.elastic.workload import fixed_job_table, read_pollux_csv
from gavel_ng.mechanism import make_plan
from gavel_ng.policies import SchedulingProblem
from gavel_ng.policies.registry import get_policy
from gavel_ng.policies.rounds import RoundJobs
from gavel_ng.round_planner import DEFAULT_GPU_COUNTS, RoundPlanner
from gavel_ng.simulator import SimConfig, simulate
from gavel_ng.simulator.adaptive import AdaptiveRunner
from gavel_ng.simulator.restarts import RestartLedger
from gavel_ng.topology import Topology


def one_job(tmp_path, app: str, gpus: int, batch: int, profiles: str):
    path = tmp_path / f"{app}.csv"
    path.write_text(f"name,time,application,num_replicas,batch_size\n{app}-0,0,{app},{gpus},{batch}\n")
    return read_pollux_csv(path, profiles=profiles)


@pytest.mark.parametrize(("policy", "cluster", "app", "batch", "delay"), [
    ("las", "t4=1", "cifar10", 128, 50.0),        # Gavel's mechanism, 360 s rounds
    ("tiresias", "a100=1", "bert", 12, 120.0),    # a round policy of 60 s: the 120 s carry over a round
])
def test_a_fixed_job_pays_its_applications_restart_on_its_first_start(tmp_path, policy, cluster, app, batch, delay):
    c = Cluster.parse(cluster)
    for profiles, want_delay in (("sia", delay), ("modeled", 0.0)):   # the modeled set: the run's flat 0 s
        et = one_job(tmp_path, app, 1, batch, profiles)
        assert et.restart_seconds[0] == (delay if profiles == "sia" else pytest.approx(np.nan, nan_ok=True))
        table = fixed_job_table(et, c.worker_types)
        rate = table.get((et.trace.job_types[0], 1), c.worker_types[0])
        res = simulate(c, None, et, SimConfig(policy=policy, realloc_delay=0.0, preemption_overhead_s=0.0))
        jct = res.summary["avg_jct_hours"] * 3600
        assert jct == pytest.approx(want_delay + et.trace.steps[0] / rate, abs=1.0), profiles
        assert res.summary["reallocations"] == (1 if profiles == "sia" else 0)


def _jobs(n: int, restart: float):
    fam = get_family("cifar10")
    return SimpleNamespace(specs=[fam.spec(profiles="sia")] * n, progress=np.zeros(n), work=np.full(n, fam.work),
                           adaptive=np.ones(n, bool), rules=[], reallocations=np.zeros(n, np.int64),
                           batch=np.zeros(n), restart=np.full(n, restart))


@pytest.mark.parametrize("restart, flat_rule", [(50.0, False), (np.nan, True)])
def test_an_adaptive_job_pays_its_measured_delay_when_its_placement_changes_shape(restart, flat_rule):
    """Under a measured set a job restarts, as in Sia's artifact, when its GPUs per server change (here
    2 on one server -> 1 + 1), not when it moves to other GPUs of the same shape; under the flat rule
    (the modeled set, unchanged) only a change of type or GPU count costs, 30 s."""
    topo = Topology.from_cluster(Cluster.parse("a100=8:4"))
    ja = _jobs(1, restart)
    runner = AdaptiveRunner(ja, topo, ["a100"], 60.0, 30.0)
    runner.ledger = RestartLedger(60.0, topo.gpu_server)

    def run(gpus, renewed, now):
        start, _, _ = runner.run(make_plan([(0,)], [-1], [0], [len(gpus)], [tuple(gpus)], [renewed], [True]),
                                 np.array([0]), now)
        runner.ledger.end_round()
        return start[0]

    assert run((0, 1), False, 0.0) == (30.0 if flat_rule else 50.0)   # the first start
    assert run((0, 1), True, 60.0) == 0.0                             # renewed
    assert run((4, 5), False, 120.0) == 0.0                           # other server, same shape: free
    assert run((0, 4), False, 180.0) == (0.0 if flat_rule else 50.0)  # 1 + 1 on two servers
    runner.idle()
    runner.ledger.end_round()                                         # a round without GPUs
    assert run((0, 4), False, 300.0) == (30.0 if flat_rule else 50.0)
    assert ja.reallocations[0] == (2 if flat_rule else 3)


def test_a_restart_longer_than_the_round_is_owed_while_the_placement_stays():
    topo = Topology.from_cluster(Cluster.parse("a100=8:4"))
    ledger = RestartLedger(60.0, topo.gpu_server)
    shape = ledger.shape(0, (0, 1, 2, 3))
    assert shape == (0, (4,)) and ledger.shape(0, (0, 4)) == (0, (1, 1))
    got = []
    for _ in range(5):
        got.append(ledger.start(7, shape, 250.0))
        ledger.end_round()
    assert got == [(60.0, True), (60.0, False), (60.0, False), (60.0, False), (10.0, False)]
    assert ledger.start(7, ledger.shape(0, (4, 5)), 250.0, room=20.0) == (20.0, True)   # moved: afresh


def test_gavel_sia_maximizes_raw_steps_where_max_throughput_normalizes():
    """Two jobs, one GPU of each type. Raw max-sum gives the A100 to the job with short steps (30 + 1 steps/s
    against 10 + 4); the normalized objective gives it to the job the A100 speeds up most (1/3 + 1 against
    1 + 1/4 of each job's best)."""
    inp = SchedulingProblem.build(["fast", "slow"], ["t4", "a100"], [1, 1], np.array([[10.0, 30.0], [1.0, 4.0]]))
    raw, norm = g.solve(inp, "gavel_sia"), g.solve(inp, "max_throughput")
    assert raw.objective == pytest.approx(31.0, rel=1e-6)
    assert norm.objective == pytest.approx(10 / 30 + 1.0, rel=1e-6)


class Restarting:
    """A round source of adaptive jobs scaling linearly at speed[type] x K, the first still restarting."""

    def __init__(self, types, speed, restarting):
        self.types, self.speed, self.restarting = list(types), dict(speed), restarting

    def round_jobs(self, jobs):
        n = len(jobs)
        return RoundJobs(np.ones(n, bool), np.ones(n, np.int64), np.zeros((n, len(self.types))), np.zeros(n),
                         np.ones(n, np.int64), np.full(n, 250.0), np.array([self.restarting] + [False] * (n - 1)))

    def goodput(self, jobs, worker_type, gpus, servers):
        return np.repeat((self.speed[worker_type] * np.asarray(gpus, float))[None, :], len(jobs), axis=0)


@pytest.mark.parametrize("policy", ["sia", "goodput"])
def test_a_job_still_paying_its_restart_keeps_its_configuration(policy):
    """Job 0 holds the slow type's 2 GPUs at 4 h; the fast type is 10x faster and free. Without the
    restart factor it would move; while its restart is unpaid it stays (Sia's artifact's constraint)."""
    cluster = Cluster(gpus={"slow": 2, "fast": 2}, gpus_per_server={"slow": 2, "fast": 2})
    topo = Topology.from_cluster(cluster)
    got = {}
    for restarting in (False, True):
        src = Restarting(["slow", "fast"], {"slow": 1.0, "fast": 10.0}, restarting)
        spec = get_policy(policy)
        decide = spec.decider({"restart_factor": False})
        planner = RoundPlanner(policy, decide, src, topo, lambda: 4 * 3600.0, realloc_delay=30.0,
                               gpu_counts=spec.gpu_counts or DEFAULT_GPU_COUNTS)
        planner.arrive([0])
        planner.last = {0: (0, 1)}
        ctx = planner.context(4 * 3600.0)
        assert ctx.pinned.tolist() == [restarting]
        plan = planner.plan(4 * 3600.0)
        got[restarting] = plan.gpus[0]
    assert got == {False: (2, 3), True: (0, 1)}


def test_sia_rounding_option_is_checked():
    from gavel_ng.errors import InputError
    from gavel_ng.policies.builtin.sia import Sia
    assert Sia(decimals=None).decimals is None and Sia().decimals == 2
    for bad in (-1, 1.5, True, "2"):
        with pytest.raises(InputError, match="sia.decimals"):
            Sia(decimals=bad)


def test_gavel_sia_gives_identical_jobs_equal_shares():
    """Four identical jobs, two GPUs: the optimum is a face; the interior point (the artifact's ECOS) shares it
    equally, where a simplex vertex would give two jobs everything and two nothing."""
    inp = SchedulingProblem.build([f"j{i}" for i in range(4)], ["t4"], [2], np.full((4, 1), 5.0))
    x = np.asarray(g.solve(inp, "gavel_sia").allocation.values, float)
    np.testing.assert_allclose(x, 0.5, atol=1e-4)


def test_restart_factor_of_measured_jobs_is_the_artifacts():
    """Two jobs each started once (reallocations 1, the first start counted) at age 600 s, delay 250 s: the job
    with a measured delay gets Sia's artifact's factor, restarts after the first start only, (600 - 0) / 850;
    the flat one keeps (600 - 250) / 850. Younger than its delay (100 s), the measured job is not penalized."""
    from gavel_ng.policies.rounds import RoundContext

    topo = Topology.from_cluster(Cluster(gpus={"t4": 4}, gpus_per_server={"t4": 4}))
    for now, want in ((600.0, [600 / 850, 350 / 850]), (100.0, [1.0, 0.0])):
        info = RoundJobs(np.ones(2, bool), np.ones(2, np.int64), np.zeros((2, 1)), np.zeros(2), np.ones(2, np.int64),
                         np.array([250.0, np.nan]))
        z = np.zeros(2)
        ctx = RoundContext(now, np.arange(2), None, topo, info, [(0,), (1,)], z, z, z, 250.0,
                           np.random.default_rng(0), None, None)
        np.testing.assert_allclose(ctx.restart_factor(), want)
