import numpy as np

from gavel_ng.cluster import Cluster
from gavel_ng.mechanism import (
    AllocationRows,
    JobView,
    MechanismConfig,
    Placer,
    RoundMechanism,
    greedy_select,
    priorities,
)
from gavel_ng.mechanism.priorities import eligible_rank, entry_priorities, global_order, rank_entries
from gavel_ng.topology import Topology


def topo(spec="v100=4,k80=4", per=2):
    return Topology.from_cluster(Cluster.parse(spec, gpus_per_server=per))


def test_priorities_rank_never_served_first():
    X = np.array([[0.5, 0.5], [0.2, 0.0], [0.3, 0.5]])
    received = np.array([[100.0, 50.0], [0.0, 0.0], [100.0, 50.0]])
    p, never = priorities(X, received)
    assert never[1, 0] and not never[1, 1] and not never[0].any()
    np.testing.assert_allclose(p[0], [0.5 / 0.5, 0.5 / 0.5])
    np.testing.assert_allclose(p[2], [0.3 / 0.5, 0.5 / 0.5])
    order = global_order(X, p, never, X > 0)
    assert order[0] == 1 * 2 + 0          # row 1 on type 0, never served, comes first
    assert p[1, 1] == 0


def test_priorities_of_a_flat_subset_are_those_of_the_grid():
    """The mechanism ranks only its eligible entries (entry_priorities, rank_entries, eligible_rank):
    bit for bit what priorities() and global_order() give over the whole (row, type) grid, ties
    included (rows 0-9 repeat rows 10-19, so their entries tie on priority and X)."""
    rng = np.random.default_rng(0)
    X = np.where(rng.random((40, 3)) < 0.3, 0.0, rng.random((40, 3)))
    received = np.where(rng.random((40, 3)) < 0.2, 0.0, rng.random((40, 3)) * 1e3)
    X[:10], received[:10] = X[10:20], received[10:20]
    eligible = (X > 1e-9) & (rng.random((40, 1)) < 0.8)
    eligible[:20] = X[:20] > 1e-9
    flat = np.flatnonzero(eligible.ravel())
    for idle_type in (False, True):            # True: a type that handed out nothing yet
        if idle_type:
            received[:, 2] = 0.0
        for factor in (None, 1e9):
            p, never = priorities(X, received, None, factor)
            total = received.sum(axis=0)[flat % 3]
            Xf, rf = X.ravel()[flat], received.ravel()[flat]
            q, qnever = entry_priorities(Xf, rf, total, factor)
            assert np.array_equal(q, p.ravel()[flat]) and np.array_equal(qnever, never.ravel()[flat])
            order = global_order(X, p, never, eligible)
            # Algorithm 1's order spelled out: never served first, then priority, then X, then index
            assert np.array_equal(order, flat[np.lexsort((flat, -Xf, -q, ~qnever))])
            assert np.array_equal(flat[rank_entries(flat, Xf, q, qnever)], order)
            assert np.array_equal(flat[eligible_rank(Xf, -Xf, rf, total, factor)], order)


def test_retired_jobs_leave_the_cached_entries():
    m = RoundMechanism(topo("v100=2", per=2))
    m.reset(AllocationRows([(0,), (1,), (2,)], np.full((3, 1), 0.6), np.ones(3)))
    assert 0 in m.plan().member_job
    m.retire(0)
    for _ in range(3):
        plan = m.plan()
        assert sorted(plan.member_job.tolist()) == [1, 2]
        m.record(plan, np.full(plan.num_entries, 360.0))


def test_greedy_respects_conflicts_and_capacity():
    # rows: (0,) (1,) (0,1) pair, (2,) needs 2 GPUs
    rows = [(0,), (1,), (0, 1), (2,)]
    sf = [1, 1, 1, 2]
    order = np.array([2 * 2 + 0, 0 * 2 + 0, 1 * 2 + 1, 3 * 2 + 0, 3 * 2 + 1])
    free, busy = [2, 2], set()
    taken = greedy_select(order, 2, rows, sf, free, busy)
    # the pair takes jobs 0 and 1: rows (0,) and (1,) conflict; job 2 needs 2 GPUs: only type 1 has them
    assert taken == [(2, 0), (3, 1)]
    assert busy == {0, 1, 2} and free == [1, 0]


def test_mechanism_realizes_allocation_over_rounds():
    t = topo("v100=1,k80=1", per=1)
    m = RoundMechanism(t, MechanismConfig(decay=1.0))
    X = np.array([[0.75, 0.25], [0.25, 0.75]])
    m.reset(AllocationRows([(0,), (1,)], X, np.ones(2)))
    got = np.zeros((2, 2))
    for _ in range(40):
        plan = m.plan()
        assert len(set(plan.member_job.tolist())) == plan.num_entries  # a job at most once a round
        for r, j in zip(plan.rows, plan.types):
            got[r, j] += 1
        m.record(plan, np.full(plan.num_entries, 360.0))
    np.testing.assert_allclose(got / 40, X, atol=0.05)


def test_pairs_and_jobs_do_not_run_twice():
    t = topo("v100=2", per=2)
    m = RoundMechanism(t)
    rows = [(0,), (1,), (0, 1), (2,)]
    X = np.array([[0.3], [0.3], [0.7], [1.0]])
    m.reset(AllocationRows(rows, X, np.ones(4)))
    for _ in range(10):
        plan = m.plan()
        jobs = plan.member_job.tolist()
        assert len(jobs) == len(set(jobs))
        m.record(plan, np.full(plan.num_entries, 360.0))


def test_placement_renews_and_consolidates():
    t = topo("v100=8", per=4)
    p = Placer(t)

    def servers(gs):
        return {int(t.gpu_server[g]) for g in gs}

    a = p.place([(0,), (1,), (2,)], [0, 0, 0], [4, 1, 2])
    assert a.consolidated.all() and not a.renewed.any()
    assert all(len(servers(g)) == 1 for g in a.gpus)
    assert servers(a.gpus[1]) == servers(a.gpus[2])    # best fit: the small ones share the other server
    b = p.place([(2,), (3,)], [0, 0], [2, 1])
    assert b.renewed.tolist() == [True, False]
    assert b.gpus[0] == a.gpus[2]
    assert servers(b.gpus[1]) == servers(b.gpus[0])    # fullest server that fits
    c = p.place([(0,), (1,)], [0, 0], [3, 3])
    assert not c.renewed.any() and servers(c.gpus[0]) != servers(c.gpus[1])
    d = p.place([(0,), (1,), (9,)], [0, 0, 0], [3, 3, 2])
    assert d.renewed.tolist() == [True, True, False]
    assert not d.consolidated[2] and len(servers(d.gpus[2])) == 2   # one GPU left on each server: split


def test_one_gpu_entries_of_several_types_fill_the_fullest_servers():
    p = Placer(topo("v100=4,k80=4", per=2))    # servers {0,1} {2,3} of v100, {4,5} {6,7} of k80
    assert p.place([(0,)], [0], [1]).gpus == [(0,)]
    b = p.place([(0,), (1,), (2,), (3,)], [0, 1, 0, 1], [1, 1, 1, 1])
    assert b.renewed.tolist() == [True, False, False, False] and b.consolidated.all()
    assert b.gpus == [(0,), (4,), (1,), (5,)]   # GPU 1's server is the fuller v100 one


def test_backfill_places_jobs_unknown_to_allocation():
    t = topo("v100=2,k80=2", per=2)
    m = RoundMechanism(t)
    m.reset(AllocationRows([(0,)], np.array([[1.0, 0.0]]), np.ones(1)))
    view = JobView([5, 6, 7], [1, 1, 2], np.array([[3.0, 1.0], [3.0, 1.0], [2.0, 1.0]]))
    plan = m.plan(view)
    placed = dict(zip([k[0] for k in plan.keys], plan.types.tolist()))
    assert placed == {0: 0, 5: 0, 6: 1}    # 7 needs two GPUs: only one k80 is left
    off = RoundMechanism(t, MechanismConfig(backfill_new_jobs=False))
    off.reset(AllocationRows([(0,)], np.array([[1.0, 0.0]]), np.ones(1)))
    assert off.plan(view).num_entries == 1


def test_compat_per_type_order_is_deterministic_per_seed():
    t = topo("v100=2,p100=2,k80=2", per=2)
    X = np.full((5, 3), 0.2)
    plans = []
    for _ in range(2):
        m = RoundMechanism(t, MechanismConfig.gavel_compat(agnostic=True, seed=4))
        m.reset(AllocationRows([(i,) for i in range(5)], X, np.ones(5)))
        plans.append([m.plan().keys for _ in range(3)])
    assert plans[0] == plans[1]


def test_a_job_split_over_an_idle_and_a_busy_type_gets_its_allocation():
    """A cost policy's 0.9 V100 + 0.1 P100 with the V100s otherwise idle and the P100s busy (issue 17):
    priorities from each type's time handed out ran it half on each; by wall-clock time received
    it gets about what it was allocated."""
    t = topo("v100=4,p100=8", per=4)
    X = np.array([[0.9, 0.1]] + [[0.0, 1.0]] * 4)
    got = {}
    for idle_aware in (False, True):   # False: Gavel §5, the default
        m = RoundMechanism(t, MechanismConfig(idle_aware=idle_aware))
        m.reset(AllocationRows([(i,) for i in range(5)], X, np.ones(5)))
        counts = np.zeros((5, 2))
        for _ in range(50):
            plan = m.plan()
            for r, j in zip(plan.rows, plan.types):
                counts[r, j] += 1
            m.record(plan, np.full(plan.num_entries, 360.0))
        got[idle_aware] = counts / 50
    assert got[False][0, 0] < 0.6
    assert abs(got[True][0, 0] - 0.9) <= 0.06
    np.testing.assert_allclose(got[True][1:], X[1:])


def test_sia_gavel_preset_fills_what_the_allocation_leaves_and_places_in_order():
    """Sia's artifact's Gavel: an entry the allocation gives nothing takes a GPU left idle (work conserving),
    and a fresh wide entry takes the type's first free GPUs, even those a narrower job held."""
    from gavel_ng.mechanism.core import PRESETS

    t = topo("v100=4", per=2)
    rows, X = [(0,), (1,)], np.array([[1.0], [0.0]])
    plain = RoundMechanism(t, MechanismConfig(backfill_new_jobs=False))
    plain.reset(AllocationRows(rows, X, np.ones(2)))
    assert plain.plan().num_entries == 1
    sia = RoundMechanism(t, MechanismConfig(**PRESETS["sia_gavel"]))
    sia.reset(AllocationRows(rows, X, np.ones(2), runnable=np.ones((2, 1), bool)))
    assert sorted(k[0] for k in sia.plan().keys) == [0, 1]
    p = Placer(t, consolidate=False, sequential=True)
    assert p.place([(0,)], [0], [1]).gpus == [(0,)]
    d = p.place([(0,), (1,)], [0, 0], [1, 2])
    assert d.gpus == [(2,), (0, 1)] and not d.renewed.any()
