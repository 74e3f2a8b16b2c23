"""Rules over servers in placement, and every rule kind through a whole simulation."""

from __future__ import annotations

import numpy as np
import pytest

from gavel_ng.cluster import Cluster
from gavel_ng.errors import InputError
from gavel_ng.mechanism import AllocationRows, RoundMechanism
from gavel_ng.mechanism.core import JobView
from gavel_ng.policies.input.entities import Entity
from gavel_ng.rules import ClusterRules, JobRules, ServerRules
from gavel_ng.simulator.engine import SimConfig, simulate
from gavel_ng.throughputs import ThroughputTable
from gavel_ng.topology import Topology
from gavel_ng.traces import TraceSpec, generate, read_trace, write_trace

CLUSTER = Cluster({"v100": 8, "p100": 8}, gpus_per_server={"v100": 4, "p100": 4})


def _mechanism(rules: dict, job_rules: dict[int, JobRules], crules: ClusterRules):
    mech = RoundMechanism(Topology.from_cluster(CLUSTER, crules.server_labels))
    mech.placer.rules = ServerRules(crules, job_rules.get)
    return mech


def _round(mech, sfs: list[int]) -> tuple:
    n = len(sfs)
    X = np.zeros((n, 2))
    X[:, 0] = 1.0 / n * 2       # everyone wants v100
    mech.reset(AllocationRows([(m,) for m in range(n)], X, np.array(sfs, dtype=float)))
    plan = mech.plan()
    servers = {k[0]: {int(mech.topo.gpu_server[x]) for x in g} for k, g in zip(plan.keys, plan.gpus)}
    return plan, servers


def test_labels_anti_affinity_affinity_in_placement():
    crules = ClusterRules.from_dict({"server_labels": {"v100": {"nvlink": 1}}})
    jobs = {0: JobRules(labels=("nvlink",)), 1: JobRules(group="big", anti_affinity=("big",)),
            2: JobRules(group="big", anti_affinity=("big",)), 3: JobRules(affinity=("0",))}
    mech = _mechanism({}, jobs, crules)
    plan, servers = _round(mech, [1, 2, 2, 1])
    assert servers[0] == {0}                       # only server 0 carries nvlink
    assert not servers[1] & servers[2]             # the two "big" jobs never share a server
    assert servers[3] <= servers[0]                # affinity: next to job 0
    for k, g in zip(plan.keys, plan.gpus):
        assert len(g) == [1, 2, 2, 1][k[0]]        # gang: all GPUs at once


def test_one_distributed_job_per_server_and_round_quota():
    crules = ClusterRules.from_dict({"one_distributed_per_server": True, "quotas": {"t": {"v100": 2}}})
    mech = RoundMechanism(Topology.from_cluster(Cluster({"v100": 6}, gpus_per_server={"v100": 2})))
    mech.placer.rules = ServerRules(crules, {0: None, 1: None, 2: JobRules(entity="t"), 3: JobRules(entity="t")}.get)
    X = np.array([[0.5], [0.5], [1.0], [1.0]])
    mech.reset(AllocationRows([(0,), (1,), (2,), (3,)], X, np.array([3.0, 3.0, 1.0, 2.0])))
    plan = mech.plan()
    split_servers = [{int(mech.topo.gpu_server[x]) for x in g} for g in plan.gpus if len(g) > 1]
    spread = [s for s in split_servers if len(s) > 1]
    for a in range(len(spread)):
        for b in range(a + 1, len(spread)):
            assert not spread[a] & spread[b]       # no server hosts two split jobs
    held = sum(sf for k, sf in zip(plan.keys, plan.sfs) if k[0] in (2, 3))
    assert held <= 2                               # the entity's quota holds in every round


def _trace(n: int = 40):
    table = ThroughputTable.builtin("gavel-osdi20")
    tr = generate(TraceSpec(jobs_per_hour=6, multi_gpu=True, seed=3), table, n)
    tr.rules = [JobRules(entity="a" if i % 2 else "b", user=f"u{i % 3}",
                         group="dist" if tr.scale_factors[i] > 1 else None,
                         anti_affinity=("dist",) if tr.scale_factors[i] > 1 else (),
                         allowed_types=("v100",) if i % 5 == 0 else None,
                         labels=("nvlink",) if i % 7 == 0 and tr.scale_factors[i] <= 4 else ())
                for i in range(n)]
    return table, tr


def test_simulation_keeps_every_rule_and_reports_refusals(tmp_path, monkeypatch):
    """Every entry keeps the job's type and label rules and one split job per server; the quota holds for the
    entries the mechanism placed at each round's start (backfilled ones, which start as others end, are counted
    per moment by the waitlist: test_backfill_respects_quotas)."""
    from gavel_ng.simulator.executor import SimExecutor

    placed = []                                      # entries each round's plan placed, before any backfill
    run_round = SimExecutor._execute
    monkeypatch.setattr(SimExecutor, "_execute", lambda self, plan: placed.append(plan.num_entries) or
                        run_round(self, plan))
    table, tr = _trace()
    write_trace(tr, tmp_path / "t.txt")             # the rules travel in the trace's 11th column
    back = read_trace(tmp_path / "t.txt")
    assert back.rules == tr.rules
    crules = ClusterRules.from_dict({"quotas": {"a": {"v100": 4}}, "one_distributed_per_server": True,
                                     "server_labels": {"v100": {"nvlink": 1}},
                                     "admission": {"max_jobs_per_user": 6}})
    cluster = Cluster({"v100": 8, "p100": 8, "k80": 8}, gpus_per_server={"v100": 4, "p100": 4, "k80": 4})
    topo = Topology.from_cluster(cluster, crules.server_labels)
    plans = []
    res = simulate(cluster, table, back, SimConfig(policy="las", window=(0, 40), rules=crules,
                                                               entities={"a": Entity(), "b": Entity()}),
                   observe=plans.append)
    assert res.summary["refused"] > 0 and res.summary["refusals"] == {"max_jobs_per_user": res.summary["refused"]}
    assert res.summary["jobs_measured"] + res.summary["refused"] == 40
    placed = [n for n in placed if n]                # (observe sees the rounds that ran something)
    assert len(placed) == len(plans)
    for plan, n in zip(plans, placed):
        a_v100 = 0
        hosts: dict[int, list[int]] = {}
        for i, (k, j, g) in enumerate(zip(plan.keys, plan.types, plan.gpus)):
            m = k[0]
            r = tr.rules[m]
            srv = {int(topo.gpu_server[x]) for x in g}
            if r.allowed_types:
                assert cluster.worker_types[j] in r.allowed_types
            if r.labels:
                assert all("nvlink" in topo.server_labels[s] for s in srv)
            if r.entity == "a" and j == 0 and i < n:
                a_v100 += len(g)
            for s in srv:
                hosts.setdefault(s, []).append(m)
        assert a_v100 <= 4
        for s, ms in hosts.items():
            assert sum(tr.rules[m].group == "dist" for m in ms) <= 1


def test_simulation_rejects_infeasible_rules_naming_the_job():
    table, tr = _trace(10)
    tr.rules = [None] * 10
    tr.rules[3] = JobRules(allowed_types=("a100",))
    with pytest.raises(InputError) as e:
        simulate(CLUSTER, table, tr, SimConfig(policy="las", window=(0, 10)))
    assert "trace job 3" in e.value.field
    tr.rules[3] = JobRules(labels=("nvlink",))      # no server of this cluster carries it
    with pytest.raises(InputError) as e:
        simulate(CLUSTER, table, tr, SimConfig(policy="las", window=(0, 10)))
    assert e.value.field == "jobs[3].labels"


def test_over_quota_entries_leave_their_gpus_to_the_next_entries():
    """The selection asks the quota before it takes an entry: a's second job (over a's V100 quota
    this round) neither runs nor keeps b's job off the V100 it leaves free."""
    crules = ClusterRules.from_dict({"quotas": {"a": {"v100": 1}}})
    cluster = Cluster({"v100": 2, "p100": 1}, gpus_per_server={"v100": 4, "p100": 4})
    mech = RoundMechanism(Topology.from_cluster(cluster))
    owners = {0: JobRules(entity="a"), 1: JobRules(entity="a"), 2: JobRules(entity="b")}
    mech.placer.rules = ServerRules(crules, owners.get)
    X = np.array([[1.0, 0.0], [0.5, 0.0], [0.5, 0.0]])      # a's jobs rank first on the V100s (ties: row order)
    mech.reset(AllocationRows([(0,), (1,), (2,)], X, np.ones(3)))
    for _ in range(4):
        plan = mech.plan()
        on = {k[0]: int(t) for k, t in zip(plan.keys, plan.types)}
        assert sum(1 for m in (0, 1) if on.get(m) == 0) <= 1       # the quota holds
        assert sum(len(g) for g, t in zip(plan.gpus, plan.types) if t == 0) == 2, on   # no V100 idles
        mech.record(plan, np.full(plan.num_entries, 360.0))


def test_backfill_respects_quotas():
    crules = ClusterRules.from_dict({"quotas": {"a": {"v100": 0}}})
    cluster = Cluster({"v100": 1, "p100": 1}, gpus_per_server={"v100": 4, "p100": 4})
    mech = RoundMechanism(Topology.from_cluster(cluster))
    mech.placer.rules = ServerRules(crules, {0: JobRules(entity="a")}.get)
    view = JobView([0], [1], np.array([[10.0, 4.0]]))         # the new job runs fastest on the V100
    plan = mech.plan(view)
    assert [int(t) for t in plan.types] == [1]               # it gets the P100, not nothing


def test_gpus_an_anti_affine_entry_cannot_use_go_to_the_next_entries():
    """Two 4-GPU jobs that must not share a server are both selected for the one 8-GPU server;
    placement keeps one of them off it, and the four one-GPU jobs further down the order get the
    GPUs it leaves instead of those idling for the round."""
    cluster = Cluster({"v100": 8}, gpus_per_server={"v100": 8})
    mech = RoundMechanism(Topology.from_cluster(cluster))
    apart = JobRules(group="multi", anti_affinity=("multi",))
    mech.placer.rules = ServerRules(ClusterRules(), {0: apart, 1: apart}.get)
    mech.reset(AllocationRows([(m,) for m in range(6)], np.ones((6, 1)), np.array([4, 4, 1, 1, 1, 1])))
    for _ in range(4):
        plan = mech.plan()
        running = {k[0] for k in plan.keys}
        assert not {0, 1} <= running                       # the rule holds
        assert sum(map(len, plan.gpus)) == 8, running      # and no GPU idles for it
        assert len({g for gp in plan.gpus for g in gp}) == 8
        mech.record(plan, np.full(plan.num_entries, 360.0))


def test_a_renewal_moves_when_its_server_has_no_room_for_an_affinity_partner():
    """prep ran next to b1 last round; follow (affinity: prep) arrives: prep moves to a server with
    room for both instead of keeping its lease and leaving follow out (a loopback run once did)."""
    topo = Topology.from_cluster(Cluster({"v100": 6}, gpus_per_server={"v100": 2}))
    jobs = {0: JobRules(group="big", anti_affinity=("big",)), 1: JobRules(group="big", anti_affinity=("big",)),
            2: JobRules(), 3: JobRules(affinity=("2",))}
    rules = ServerRules(ClusterRules(), jobs.get)
    keys = [(0,), (1,), (2,), (3,)]
    last = {(0,): (0, (0,)), (1,): (0, (2,)), (2,): (0, (1,))}     # b1 and prep on server 0, b2 on server 1
    out = rules.place(topo, [0, 1, 2, 3], keys, [0, 0, 0, 0], [1, 1, 1, 1], np.ones(6, dtype=bool), last)
    assert all(out[i] is not None for i in range(4)), out
    server = {i: {int(topo.gpu_server[g]) for g in out[i]} for i in range(4)}
    assert server[2] == server[3] and not server[0] & server[1], server
    assert out[0] == (0,) and out[1] == (2,)        # the others keep their leases
    # with room beside it, prep keeps its lease and follow joins it
    last = {(2,): (0, (1,))}
    out = rules.place(topo, [2, 3], keys, [0, 0, 0, 0], [1, 1, 1, 1], np.ones(6, dtype=bool), last)
    assert out[2] == (1,) and int(topo.gpu_server[out[3][0]]) == 0, out
