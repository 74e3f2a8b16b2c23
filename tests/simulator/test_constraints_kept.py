"""What a policy adds holds in the schedule that runs (issue 37): a budget and a cap on one type's GPUs,
checked on every round the simulator executed (the executor's own rounds, backfill included) and over the
run, with the summary's report of them."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import gavel_ng as g
from gavel_ng.cluster import Cluster
from gavel_ng.elastic.workload import read_pollux_csv
from gavel_ng.policies.plugins import load_plugins
from gavel_ng.simulator import SimConfig, simulate
from gavel_ng.simulator.executor import SimExecutor
from gavel_ng.simulator.tables import default_table
from gavel_ng.throughputs import ThroughputTable
from gavel_ng.traces import Trace, TraceGenerator, TraceSpec, generate

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


@pytest.fixture(scope="module", autouse=True)
def _policies(module_registry):
    """The example plugin and this module's policies, registered while its tests run."""
    load_plugins([str(EXAMPLES / "constrained_policies.py")])
    g.policy("half_the_price", "max-min fairness within half the cluster's price", idle_aware=True)(within(0.5))
    g.policy("a_fifth_of_the_price", "max-min fairness within a fifth of the cluster's price")(within(0.2))
    g.policy("four_v100s", "max-min fairness on at most 4 V100 GPUs (a cvxpy constraint, affine)")(four_v100s)
    g.policy("slow_first_job", "max-min fairness with job 0's throughput capped below what it does anywhere")(
        slow_first_job)
    g.policy("two_a100s", "max-min fairness on at most 2 A100 GPUs")(two_a100s)


@pytest.fixture
def rounds(monkeypatch):
    """Every executed round as it ran: per entry its worker type, GPUs and seconds held (a spy on the real
    executor: the rounds are the simulator's own)."""
    seen = []
    execute = SimExecutor.execute

    def spy(self, plan):
        result = execute(self, plan)
        ran = result.plan if result.plan is not None else plan
        if ran.num_entries:
            seen.append((ran.types.copy(), ran.sfs.copy(), np.asarray(result.occupied, float) / self.L,
                         self.prices.copy()))
        return result

    monkeypatch.setattr(SimExecutor, "execute", spy)
    return seen


def spend_per_round(rounds) -> np.ndarray:
    """$/h each round spent: every entry's GPUs at its type's price for the share of the round it held them."""
    return np.array([(price[t] * sf * held).sum() for t, sf, held, price in rounds])


def run(cluster: str, policy: str, trace=None, **kw):
    cl = Cluster.parse(cluster)
    table = default_table(cl.worker_types)
    trace = trace if trace is not None else generate(TraceSpec(None, kw.pop("multi_gpu", False), False, False, 0),
                                                    table, kw.pop("jobs", 12))
    res = simulate(cl, table, trace, SimConfig(policy=policy, **kw))
    assert np.isfinite(res.jobs.finish[:len(res.jobs)]).all() and not res.summary["unstable"]   # every job done
    return res.summary, cl


def within(share):
    """max-min fairness spending at most `share` of the cluster's price per hour (written as on main, so
    that main runs it too: there its rounds spend up to twice the budget)."""
    def fn(p):
        prices = p.input.prices
        p.add_constraint(p.cost_per_hour(prices) <= share * float(prices @ p.input.capacity))
        return p.maximize_min(p.normalized_thr)
    return fn


def four_v100s(p):
    v100 = p.input.worker_types.index("v100")
    p.add_constraint(p.capacity_rows[[v100]] @ p.cvx_variable <= 4)
    return p.maximize_min(p.normalized_thr)


def budget_of(cl: Cluster, share: float) -> float:
    prices = cl.priced({}).price_per_gpu_hour
    return share * sum(prices[w] * n for w, n in cl.gpus.items())


@pytest.mark.parametrize("policy,cluster,kw", [
    ("half_the_price", "v100=2,p100=2,k80=2", {}),
    ("half_the_price", "v100=2,p100=2,k80=2", {"backfill": False}),
    ("a_fifth_of_the_price", "v100=8,p100=8,k80=8", {"multi_gpu": True}),   # 4 and 8 V100s cost more than it
])
def test_a_budget_holds_in_every_round_and_over_the_run(rounds, policy, cluster, kw):
    s, cl = run(cluster, policy, **kw)
    budget = budget_of(cl, 0.5 if policy == "half_the_price" else 0.2)
    per_round = spend_per_round(rounds)
    assert len(per_round) == s["rounds"]
    assert per_round.max() <= budget * (1 + 1e-9), (per_round.max(), budget)   # main: up to 2x and 5x
    assert s["run_cost_usd"] / s["simulated_hours"] <= budget
    assert s["constraints"] == {"constraint 0": {"enforced": "every round", "rounds": s["rounds"],
                                                 "max_round_excess": 0.0, "run_excess": 0.0}}


def test_a_cap_on_one_types_gpus_holds_in_every_round(rounds):
    s, _ = run("v100=8,p100=8,k80=8", "four_v100s")
    v100 = np.array([(sf * held)[t == 0].sum() for t, sf, held, _ in rounds])
    assert v100.max() == 4.0     # main hands out all 8 V100s
    assert s["constraints"]["constraint 0"]["max_round_excess"] == 0.0


@pytest.mark.parametrize("policy,name", [("budget_las", "budget"), ("v100_cap", "v100 cap")])
def test_the_examples_constraints_are_reported_by_name(rounds, policy, name):
    """examples/constrained_policies.py, as docs/policies.md shows it: named constraints, `p.gpus`."""
    s, cl = run("v100=4,p100=4,k80=4", policy, jobs=8)
    assert list(s["constraints"]) == [name] and s["constraints"][name]["max_round_excess"] == 0.0
    if policy == "budget_las":
        assert spend_per_round(rounds).max() <= budget_of(cl, 0.5) * (1 + 1e-9)


def test_jobs_no_solve_has_seen_wait_for_one_while_a_budget_applies(rounds):
    """With solves 2 h apart, a job that arrives in between has no coefficients in the budget: it is not
    backfilled onto free GPUs (it would break the budget unseen); the budget holds every round. Within half
    the price the cluster cannot keep up with a job an hour: two simulated days (about 50 jobs, 24 solves) show
    it, where the default cap ran 60 days."""
    cl = Cluster.parse("v100=2,p100=2,k80=2")
    table = default_table(cl.worker_types)
    s = simulate(cl, table, TraceGenerator(TraceSpec(1.0, seed=3), table),
                 SimConfig(policy="half_the_price", window=(0, 6), min_solve_interval=7200.0,
                           max_sim_seconds=2 * 86400.0)).summary
    assert s["rounds"] == len(rounds) > 400 and s["backfilled_entries"] > 0
    assert spend_per_round(rounds).max() <= budget_of(cl, 0.5) * (1 + 1e-9)
    assert s["constraints"]["constraint 0"]["max_round_excess"] == 0.0


def slow_first_job(p):
    """Job 0 runs 2 steps/s on the V100 and 1 on the K80; the cap is 0.5: no round that runs it keeps it."""
    if 0 in p.input.job_ids:   # the simulator's job ids, as the scheduler's: ints
        p.add_constraint(p.thr[p.input.job_ids.index(0)] <= 0.5, name="job 0 at most 0.5 steps/s")
    return p.maximize_min(p.normalized_thr)


def test_a_row_no_round_can_keep_is_kept_on_average_on_credit(rounds):
    """An entry over a row by itself runs only on what earlier rounds left unused of the row: job 0 finishes,
    each round that ran it is over by its excess (reported), and its average rate stays within the cap."""
    table = ThroughputTable(isolated={"v100": {("A", 1): 2.0, ("C", 1): 1.0}, "k80": {("A", 1): 1.0, ("C", 1): 1.0}})
    trace = Trace(["A", "C"], np.array([1, 1]), np.ones(2), np.array([720.0 * 20, 3600.0 * 10]),
                  np.full(2, np.inf), np.zeros(2))
    res = simulate(Cluster.parse("v100=1,k80=1"), table, trace, SimConfig(policy="slow_first_job"))
    s = res.summary
    assert np.isfinite(res.jobs.finish[:2]).all()
    rep = s["constraints"]["job 0 at most 0.5 steps/s"]
    assert rep["enforced"] == "every round" and rep["max_round_excess"] in (0.5, 1.5)
    assert rep["run_excess"] == 0.0


def two_a100s(p):
    p.add_constraint(p.gpus[p.input.worker_types.index("a100")] <= 2, name="a100 cap")
    return p.maximize_min(p.normalized_thr)


def test_a_cap_holds_while_jobs_pay_their_measured_restarts(rounds, tmp_path):
    """Under a profile set with per-application restart delays (simulator.restarts) every start costs its
    job seconds of the round; the cap on A100s still holds in every round (max-min fairness alone uses all 4)."""
    path = tmp_path / "jobs.csv"
    path.write_text("name,time,application,num_replicas,batch_size\n" + "".join(
        f"cifar10-{i},{600 * i},cifar10,1,128\n" for i in range(6)))
    et = read_pollux_csv(path, profiles="sia")
    res = simulate(Cluster.parse("t4=4,a100=4"), None, et, SimConfig(policy="two_a100s"))
    s = res.summary
    assert np.isfinite(res.jobs.finish[:6]).all() and s["reallocations"] >= 6   # each paid its first start
    a100 = np.array([(sf * held)[t == 1].sum() for t, sf, held, _ in rounds])
    assert a100.max() == 2.0
    assert s["constraints"]["a100 cap"]["max_round_excess"] == 0.0
