"""RoundMechanism.set_topology (workers join and leave) and its ledger (save, restore)."""

import numpy as np
import pytest

from gavel_ng.cluster import Cluster
from gavel_ng.columns import Columns
from gavel_ng.mechanism import AllocationRows, Ledger, MechanismConfig, RoundMechanism
from gavel_ng.topology import Topology

TYPES = ["v100", "p100", "k80"]


def servers(*workers: tuple[str, int]) -> Topology:
    """One server per worker, GPUs numbered type by type (as the deployment's ClusterState does)."""
    live = sorted(enumerate(workers), key=lambda iw: (TYPES.index(iw[1][0]), iw[0]))
    gpu_type, gpu_server, server_type, server_gpus = [], [], [], []
    type_servers = [[] for _ in TYPES]
    for s, (_, (w, n)) in enumerate(live):
        j = TYPES.index(w)
        server_gpus.append(np.arange(len(gpu_type), len(gpu_type) + n))
        server_type.append(j)
        type_servers[j].append(s)
        gpu_type += [j] * n
        gpu_server += [s] * n
    cap = np.bincount(np.array(gpu_type, dtype=np.int64), minlength=len(TYPES)).astype(float)
    return Topology(list(TYPES), cap, np.array(gpu_type, dtype=np.int64), np.array(gpu_server, dtype=np.int64),
                    np.array(server_type, dtype=np.int64), server_gpus,
                    [np.array(t, dtype=np.int64) for t in type_servers])


def alloc(X, sfs=None, rows=None):
    X = np.asarray(X, dtype=float)
    rows = rows or [(i,) for i in range(len(X))]
    return AllocationRows(rows, X, np.ones(len(X)) if sfs is None else np.asarray(sfs, dtype=float))


def run(m, rounds=1):
    plans = []
    for _ in range(rounds):
        plan = m.plan()
        m.record(plan, np.full(plan.num_entries, 100.0))
        plans.append(plan)
    return plans


def placed(plan):
    return {k[0]: (g, bool(r)) for k, g, r in zip(plan.keys, plan.gpus, plan.renewed)}


def test_worker_added_keeps_placements_received_and_renewals():
    before = servers(("v100", 2), ("k80", 1))            # GPUs: v100 0,1; k80 2
    m = RoundMechanism(before)
    a = alloc([[1, 0, 0], [1, 0, 0], [0, 0, 1]])
    m.reset(a)
    [first] = run(m)
    got = placed(first)
    assert got[2][0] == (2,)
    received = m.received.copy()
    after = servers(("v100", 2), ("k80", 1), ("p100", 1))   # the p100 takes GPU 2, the k80 moves to 3
    m.set_topology(after, [0, 1, 3])
    np.testing.assert_array_equal(m.received, received)
    assert m.rows == [(0,), (1,), (2,)]
    m.reset(alloc([[1, 0, 0], [1, 0, 0], [0, 0, 1], [0, 1, 0]]))    # a new job for the new GPU
    np.testing.assert_array_equal(m.received[:3], received)
    [second] = run(m)
    now = placed(second)
    assert now[0] == (got[0][0], True) and now[1] == (got[1][0], True)
    assert now[2] == ((3,), True)                         # same GPU, new number: still a renewal
    assert now[3] == ((2,), False)
    assert sorted(zip(second.member_job.tolist(), second.types.tolist())) == [(0, 0), (1, 0), (2, 2), (3, 1)]


def test_worker_removed_drops_its_placements_only():
    before = servers(("v100", 2), ("v100", 2), ("k80", 1))   # worker A: 0,1; B: 2,3; k80: 4
    m = RoundMechanism(before)
    m.reset(alloc([[1, 0, 0], [1, 0, 0], [0, 0, 1]], sfs=[2, 2, 1]))
    [first] = run(m)
    got = placed(first)
    on_a = next(j for j, (g, _) in got.items() if g == (0, 1))
    on_b = 1 - on_a
    m.set_topology(servers(("v100", 2), ("k80", 1)), [-1, -1, 0, 1, 2])    # worker A is gone
    assert (on_a,) not in m.placer.last
    assert m.placer.last[(on_b,)] == (0, (0, 1)) and m.placer.last[(2,)] == (2, (2,))
    X = np.zeros((3, 3))
    X[on_a, 0], X[on_b, 0], X[2, 2] = 0.2, 1.0, 1.0         # the re-solve after the loss
    m.reset(alloc(X, sfs=[2, 2, 1]))
    [second] = run(m)
    now = placed(second)
    assert now[on_b] == ((0, 1), True) and now[2] == ((2,), True)
    assert on_a not in now                                # two GPUs of v100 left, both held
    assert m.topo.capacity.tolist() == [2, 0, 1]


def test_spread_placement_that_loses_one_gpu_is_dropped():
    m = RoundMechanism(servers(("v100", 1), ("v100", 1)))
    m.reset(alloc([[1, 0, 0]], sfs=[2]))
    run(m)
    assert m.placer.last[(0,)] == (0, (0, 1))
    m.set_topology(servers(("v100", 1), ("v100", 1)), [1, -1])   # one replaced by a new worker
    assert m.placer.last == {}
    [plan] = run(m)
    assert plan.num_entries == 1 and not plan.renewed.any()


def test_capacity_comes_from_the_new_topology():
    """A mechanism built with no workers (a scheduler before any registered) must see the GPUs that
    arrive: which rows fit depends on the capacity."""
    m = RoundMechanism(servers())
    m.reset(alloc([[1, 0, 0], [0, 0, 1]], sfs=[2, 1]))
    assert run(m)[0].num_entries == 0
    m.set_topology(servers(("v100", 2), ("k80", 1)), [])
    [plan] = run(m)                                       # same allocation, now runnable
    assert sorted(plan.member_job.tolist()) == [0, 1]
    m.reset(alloc([[1, 0, 0], [0, 0, 1]], sfs=[2, 1]))
    assert run(m)[0].renewed.all()


CONFIGS = [MechanismConfig(), MechanismConfig.gavel_compat(agnostic=True, seed=3), MechanismConfig.since_reset()]


@pytest.mark.parametrize("cfg", CONFIGS, ids=["default", "compat", "since_reset"])
def test_nothing_carried_plans_like_a_fresh_mechanism(cfg):
    old = servers(("v100", 1), ("k80", 2))
    new = servers(("v100", 2), ("v100", 2), ("p100", 2), ("k80", 1))
    rng = np.random.default_rng(0)
    X = rng.uniform(0, 0.4, (9, 3))
    sfs = [1, 1, 2, 1, 2, 1, 1, 1, 2]
    m = RoundMechanism(old, cfg)
    m.set_topology(new, [-1, -1, -1])
    fresh = RoundMechanism(new, cfg)
    for mech in (m, fresh):
        mech.reset(alloc(X, sfs))
    for a, b in zip(run(m, 6), run(fresh, 6)):
        assert a.keys == b.keys and a.gpus == b.gpus
        assert a.types.tolist() == b.types.tolist() and a.renewed.tolist() == b.renewed.tolist()


def test_placement_columns_follow_the_new_topology():
    """With TYPE / TYPE_unconsolidated columns the pooled capacity and the spread rule still hold."""
    old = servers(("v100", 2), ("k80", 1))
    cols = Columns(tuple(old.worker_types), np.array([0, 0, 1, 2]), np.zeros(4, np.int64),
                   np.array([False, True, False, False]))
    m = RoundMechanism(old, MechanismConfig(decay=1.0), cols)
    X = np.array([[0.0, 1.0, 0.0, 0.0], [1.0, 0.0, 0.0, 0.0]])
    m.reset(alloc(X, sfs=[2, 2]))
    new = servers(("v100", 2), ("v100", 2), ("k80", 1))
    m.set_topology(new, [0, 1, 4])
    fresh = RoundMechanism(new, MechanismConfig(decay=1.0), cols)
    fresh.reset(alloc(X, sfs=[2, 2]))
    np.testing.assert_array_equal(m.topo.capacity, fresh.topo.capacity)
    for a, b in zip(run(m, 3), run(fresh, 3)):
        assert sorted(a.member_job.tolist()) == sorted(b.member_job.tolist()) == [0, 1]
        assert a.consolidated.all()


def test_set_topology_refuses_bad_input():
    m = RoundMechanism(servers(("v100", 2)))
    with pytest.raises(ValueError, match="entries"):
        m.set_topology(servers(("v100", 2)), [0])
    with pytest.raises(ValueError, match="distinct"):
        m.set_topology(servers(("v100", 2)), [0, 0])
    with pytest.raises(ValueError, match="distinct"):
        m.set_topology(servers(("v100", 2)), [0, 2])
    other = Topology.from_cluster(Cluster.parse("a100=2"))
    with pytest.raises(ValueError, match="worker types"):
        m.set_topology(other, [0, 1])


def test_ledger_round_trip_carries_into_the_next_reset():
    topo = servers(("v100", 1), ("k80", 1))
    m = RoundMechanism(topo, MechanismConfig(decay=1.0))
    m.reset(alloc([[0.5, 0, 0.5]] * 3))
    run(m, 4)
    m.retire(1)
    saved = m.ledger()
    assert saved.rows == [(0,), (2,)]                     # a retired job's rows carry nothing
    restored = RoundMechanism(topo, MechanismConfig(decay=1.0))
    restored.restore_ledger(Ledger([list(r) for r in saved.rows], saved.received.tolist()))
    assert restored.plan().num_entries == 0              # no allocation yet: nothing runs
    for mech in (m, restored):
        mech.reset(alloc([[0.5, 0, 0.5], [0.5, 0, 0.5]], rows=[(0,), (2,)]))
    np.testing.assert_array_equal(restored.received, m.received)
    assert [p.keys for p in run(restored, 3)] == [p.keys for p in run(m, 3)]


def test_ledger_without_jobs_and_shape_check():
    led = Ledger([(0,), (1,), (0, 2)], np.arange(9.0).reshape(3, 3))
    kept = led.without_jobs({0})
    assert kept.rows == [(1,)] and kept.received.tolist() == [[3.0, 4.0, 5.0]]
    m = RoundMechanism(servers(("v100", 1)))
    with pytest.raises(ValueError, match="shape"):
        m.restore_ledger(Ledger([(0,)], np.zeros((1, 2))))
