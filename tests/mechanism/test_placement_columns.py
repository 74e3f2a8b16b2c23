"""Placement-sensitive allocations: TYPE and TYPE_unconsolidated columns on the same GPUs."""

import numpy as np

from gavel_ng.cluster import Cluster
from gavel_ng.columns import Columns
from gavel_ng.mechanism import AllocationRows, MechanismConfig, RoundMechanism, greedy_select
from gavel_ng.topology import Topology


def topo(spec="v100=8", per=4):
    return Topology.from_cluster(Cluster.parse(spec, gpus_per_server=per))


def servers(t, gpus):
    return {int(t.gpu_server[g]) for g in gpus}


def test_greedy_columns_draw_on_their_pool():
    # columns: 0 = v100, 1 = v100_unconsolidated (pool 0), 2 = k80 (pool 1)
    rows = [(0,), (1,), (2,)]
    order = np.array([0 * 3 + 0, 1 * 3 + 1, 2 * 3 + 1, 2 * 3 + 2])
    free, busy = [8, 4], set()
    taken = greedy_select(order, 3, rows, [4, 4, 4], free, busy, col_pool=np.array([0, 0, 1]))
    assert taken == [(0, 0), (1, 1), (2, 2)] and free == [0, 0]


def test_consolidated_entries_get_whole_servers_spread_ones_the_rest():
    t = topo("v100=8", per=4)
    m = RoundMechanism(t, MechanismConfig(decay=1.0), Columns.types(t.worker_types, placement_sensitive=True))
    # job 0 (2 GPUs) may spread and ranks first; job 1 (4 GPUs) must be consolidated
    X = np.array([[0.0, 1.0], [0.9, 0.0]])
    m.reset(AllocationRows([(0,), (1,)], X, np.array([2, 4])))
    plan = m.plan()
    assert plan.cols.tolist() == [1, 0] and plan.types.tolist() == [0, 0]
    gpus = dict(zip([k[0] for k in plan.keys], plan.gpus))
    assert len(servers(t, gpus[1])) == 1 and plan.consolidated.all()
    m.record(plan, np.full(plan.num_entries, 360.0))
    assert m.received[0, 1] == 360.0 and m.received[1, 0] == 360.0 and m.received[:, 0].sum() == 360.0


def test_pooled_capacity_is_shared_between_twin_columns():
    t = topo("v100=8", per=4)
    m = RoundMechanism(t, columns=Columns.types(t.worker_types, placement_sensitive=True))
    X = np.array([[0.5, 0.5]] * 3)
    m.reset(AllocationRows([(0,), (1,), (2,)], X, np.full(3, 4)))
    for _ in range(6):
        plan = m.plan()
        assert plan.sfs.sum() <= 8 and len(set(plan.member_job.tolist())) == plan.num_entries
        assert sum(len(g) for g in plan.gpus) == plan.sfs.sum()
        m.record(plan, np.full(plan.num_entries, 360.0))


def test_consolidated_entry_gives_up_a_split_lease_to_consolidate():
    t = topo("v100=8", per=4)
    m = RoundMechanism(t, columns=Columns.types(t.worker_types, placement_sensitive=True))
    m.reset(AllocationRows([(0,)], np.array([[0.0, 1.0]]), np.array([4])))
    m.placer.last = {(0,): (0, (2, 3, 4, 5))}                 # last round: split over two servers
    assert m.plan().renewed[0]                                 # spread column: the split lease is renewed
    m.reset(AllocationRows([(0,)], np.array([[1.0, 0.0]]), np.array([4])))
    m.placer.last = {(0,): (0, (2, 3, 4, 5))}
    plan = m.plan()                                            # consolidated column: re-placed on one server
    assert not plan.renewed[0] and plan.consolidated[0] and len(servers(t, plan.gpus[0])) == 1
