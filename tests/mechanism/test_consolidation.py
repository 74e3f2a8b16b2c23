"""Multi-GPU jobs that fell behind (experiments/README.md, "Large jobs that never finish"): what the
mechanism does and does not do to them.

The selection does not starve a multi-GPU entry: its priority rises until it runs its share. What
the mechanism did cost them was placement: one-GPU leases scattered over the servers, and split
leases renewed round after round, kept jobs split that fit on one server, at their unconsolidated
throughput. (An 8-GPU job on 4-GPU servers is split whatever the placement: that is the cluster.)
"""

import numpy as np
import pytest

from gavel_ng.cluster import Cluster
from gavel_ng.mechanism import AllocationRows, MechanismConfig, Placer, RoundMechanism
from gavel_ng.topology import Topology

CONSOLIDATED, SPLIT = 4.0, 1.0     # steps/s of the 4-GPU job W, whole on one server or split


def topo(spec="v100=8", per=4):
    return Topology.from_cluster(Cluster.parse(spec, gpus_per_server=per))


def servers(t, gpus):
    return {int(t.gpu_server[g]) for g in gpus}


def rows(sfs, X=None):
    X = np.ones((len(sfs), 1)) if X is None else np.asarray(X, dtype=float).reshape(len(sfs), 1)
    return AllocationRows([(j,) for j in sfs], X, np.array(list(sfs.values())))


def run_round(m):
    plan = m.plan()
    m.record(plan, np.full(plan.num_entries, 360.0))
    return plan


def fragmented(consolidate):
    """Six one-GPU jobs fill server 0 and half of server 1; two of server 0's finish and the
    4-GPU job W (job 9) arrives: two GPUs are free on each server, none whole."""
    t = topo()
    m = RoundMechanism(t, MechanismConfig(consolidate=consolidate))
    m.reset(rows({j: 1 for j in range(6)}))
    first = run_round(m)
    assert [len(servers(t, [g for k, gs in zip(first.keys, first.gpus) if k[0] in s for g in gs]))
            for s in ((0, 1, 2, 3), (4, 5))] == [1, 1]
    for j in (0, 1):
        m.retire(j)
    m.reset(rows({2: 1, 3: 1, 4: 1, 5: 1, 9: 4}))
    return t, m


def w_steps(m, rounds):
    """Steps W runs over `rounds` rounds, and in how many of them it was whole."""
    steps, whole = 0.0, 0
    for _ in range(rounds):
        plan = run_round(m)
        e = [k[0] for k in plan.keys].index(9)
        whole += bool(plan.consolidated[e])
        steps += 360.0 * (CONSOLIDATED if plan.consolidated[e] else SPLIT)
    return steps, whole


def test_reproduction_fragmented_servers_keep_a_wide_job_split_for_ever():
    """The prototype's placement: W is split on arrival, and its split lease is renewed every round."""
    _, m = fragmented(consolidate=False)
    steps, whole = w_steps(m, 10)
    assert whole == 0 and steps == 10 * 360 * SPLIT


def test_fix_one_gpu_leases_move_so_the_wide_job_runs_whole():
    t, m = fragmented(consolidate=True)
    plan = run_round(m)
    by_job = dict(zip([k[0] for k in plan.keys], zip(plan.gpus, plan.renewed, plan.consolidated)))
    gpus, renewed, whole = by_job[9]
    assert whole and len(servers(t, gpus)) == 1 and not renewed
    moved = [j for j in (2, 3, 4, 5) if not by_job[j][1]]
    assert len(moved) == 2                          # only as many one-GPU jobs as W needed moved
    steps, whole = w_steps(m, 9)                    # and from then on everything renews in place
    assert whole == 9 and steps == 9 * 360 * CONSOLIDATED
    assert run_round(m).renewed.all()


def test_split_lease_given_up_only_for_a_whole_server():
    t = topo()
    p = Placer(t)
    p.last = {(0,): (0, (2, 3, 4, 5)), (1,): (0, (0, 1)), (2,): (0, (6, 7))}
    kept = p.place([(0,), (1,), (2,)], [0, 0, 0], [4, 2, 2])
    assert kept.renewed.all() and not kept.consolidated[0]     # two-GPU leases block both servers
    p.last = {(0,): (0, (2, 3, 4, 5))}
    moved = p.place([(0,)], [0], [4])
    assert not moved.renewed[0] and moved.consolidated[0] and len(servers(t, moved.gpus[0])) == 1
    old = Placer(t, consolidate=False)
    old.last = {(0,): (0, (2, 3, 4, 5))}
    assert old.place([(0,)], [0], [4]).renewed[0]               # the prototype keeps the split lease


def test_spread_entries_keep_split_leases_and_move_nothing():
    """An `_unconsolidated` column's entry was meant to be split: it neither moves others nor its lease."""
    t = topo()
    p = Placer(t)
    p.last = {(1,): (0, (0,)), (2,): (0, (4,))}
    a = p.place([(1,), (2,), (0,)], [0, 0, 0], [1, 1, 4], spread=[False, False, True])
    assert a.renewed[:2].all() and not a.consolidated[2]
    b = p.place([(1,), (2,), (0,)], [0, 0, 0], [1, 1, 4], spread=[False, False, True])
    assert b.renewed.all() and b.gpus == a.gpus


def test_wider_than_a_server_moves_nobody():
    """An 8-GPU job on 4-GPU servers cannot be whole, so moving one-GPU jobs would gain it nothing:
    it is split over the servers with most room, as before."""
    t = topo("v100=12", per=4)
    p = Placer(t)
    p.last = {(1,): (0, (0,)), (2,): (0, (4,))}
    a = p.place([(1,), (2,), (0,)], [0, 0, 0], [1, 1, 8])
    assert a.renewed[:2].all() and len(servers(t, a.gpus[2])) == 3   # only 10 GPUs left, over 3 servers
    assert not a.consolidated[2]


@pytest.mark.parametrize("consolidate", [False, True])
def test_selection_gives_a_wide_entry_its_share_among_one_gpu_entries(consolidate):
    """The guess that greedy selection starves an 8-GPU entry while one-GPU entries take the freed
    GPUs: its priority rises until it runs, so it gets at least its allocation."""
    t = topo()
    m = RoundMechanism(t, MechanismConfig(consolidate=consolidate))
    sfs = {0: 8, **{j: 1 for j in range(1, 13)}}
    X = [0.25] + [0.5] * 12                        # 8 * 0.25 + 12 * 0.5 = 8 GPUs
    m.reset(rows(sfs, X))
    ran = sum(any(k == (0,) for k in run_round(m).keys) for _ in range(80))
    assert ran >= 0.25 * 80


def test_gavel_compat_keeps_the_prototype_placement():
    assert not MechanismConfig.gavel_compat(agnostic=False).consolidate
    assert MechanismConfig().consolidate and MechanismConfig.since_reset().consolidate
