"""The round path's shortcuts for one-GPU, one-job rows (issue 31) make the same choices as the
general path: greedy_ones as greedy_select, Placer.place_jobs (placements remembered by job) as
Placer.place (a dict), and a mechanism planning by job as one planning entry by entry."""

import numpy as np

from gavel_ng.cluster import Cluster
from gavel_ng.mechanism import AllocationRows, Placer, RoundMechanism, greedy_select
from gavel_ng.mechanism.priorities import eligible_rank, global_order, priorities
from gavel_ng.mechanism.selection import greedy_ones
from gavel_ng.topology import Topology


def topo(spec="v100=8,p100=6,k80=4", per=2):
    return Topology.from_cluster(Cluster.parse(spec, gpus_per_server=per))


def test_greedy_ones_is_greedy_select_for_one_gpu_rows():
    rng = np.random.default_rng(1)
    for _ in range(200):
        K, J = int(rng.integers(1, 30)), 3
        flat = np.flatnonzero(rng.random(K * J) < 0.6)
        order = rng.permutation(flat)
        capacity = rng.integers(0, 12, J).tolist()
        free, busy = list(capacity), set()
        want = greedy_select(order, J, [(k,) for k in range(K)], [1] * K, free, busy)
        mine = list(capacity)
        rows, cols = greedy_ones((order // J).tolist(), (order % J).tolist(), mine,
                                 len(set((order // J).tolist())), K)
        assert list(zip(rows, cols)) == want and mine == free


def test_placements_by_job_are_those_of_the_dict():
    """Rounds of one-GPU entries with jobs coming and going, mid-round backfills (remember) and a
    read of `last` in between (which hands the dict out and goes back to it for a round)."""
    t = topo()
    by_job, by_dict = Placer(t), Placer(t)
    rng = np.random.default_rng(2)
    cap = np.bincount(t.gpu_type)
    for rnd in range(60):
        jobs, types = [], []
        for j in range(3):   # a random set of jobs per type, within capacity
            n = int(rng.integers(0, cap[j] + 1))
            jobs += rng.choice(40, n, replace=False).tolist()
            types += [j] * n
        jobs, idx = np.unique(np.array(jobs, np.int64), return_index=True)
        types = [types[i] for i in idx]
        keep = rng.permutation(len(jobs))   # any order of entries
        jobs, types = jobs[keep], [types[i] for i in keep]
        keys = [(int(m),) for m in jobs]
        a = by_job.place_jobs(keys, jobs, types)
        b = by_dict.place(keys, types, [1] * len(keys))
        assert a.gpus == b.gpus and np.array_equal(a.renewed, b.renewed)
        if rnd % 3 == 1 and len(keys):   # a job backfilled onto a GPU an entry freed
            newcomer, gpu = 100 + rnd, a.gpus[int(rng.integers(len(keys)))]
            for p in (by_job, by_dict):
                p.remember((newcomer,), int(t.gpu_type[gpu[0]]), gpu)
        if rnd % 7 == 5:
            assert by_job.last == by_dict.last
    assert by_job.last == by_dict.last


def test_mechanism_plans_by_job_as_entry_by_entry():
    t = topo()
    rng = np.random.default_rng(3)
    fast, slow = RoundMechanism(t), RoundMechanism(t)
    active = list(range(12))
    nxt = 12
    for epoch in range(12):
        K = len(active)
        X = np.where(rng.random((K, 3)) < 0.4, 0.0, rng.random((K, 3)))
        X /= np.maximum(X.sum(axis=1, keepdims=True), 1.0)
        alloc = AllocationRows([(m,) for m in active], X, np.ones(K))
        for m in (fast, slow):
            m.reset(alloc)
        slow._plain_ones = False   # the general path
        for _ in range(8):
            p, q = fast.plan(), slow.plan()
            assert p.keys == q.keys and p.gpus == q.gpus and np.array_equal(p.renewed, q.renewed)
            occupied = np.full(p.num_entries, 360.0)
            fast.record(p, occupied)
            slow.record(q, occupied)
        gone = active.pop(int(rng.integers(len(active))))
        for m in (fast, slow):
            m.retire(gone)
        active += [nxt, nxt + 1]
        nxt += 2


def reference_selection(m: RoundMechanism) -> list[tuple[int, int]]:
    """The round's (row, type) choice from first principles: priorities over the whole grid, the
    global order, greedy selection (what the mechanism's cached, presorted entries must give)."""
    prio, never = priorities(m.X, m.received, None)
    eligible = (m.X > 1e-9) & m.alive[:, None]
    order = global_order(m.X, prio, never, eligible)
    return greedy_select(order, m.J, m.rows, [1] * len(m.rows), list(m._capacity), set())


def test_round_path_is_the_general_one_through_resets_retires_backfills_and_a_new_topology():
    """Every round, the one-GPU path (cached entries, job -> row index, leases by job) plans what the
    general path and first principles plan, and both keep the same ledger: across arrivals,
    completions (retired mid-epoch, dropped at the next reset), a mid-round backfill, workers
    joining, and an epoch with a two-job row (off the one-GPU path, and back)."""
    t = topo()
    rng = np.random.default_rng(4)
    fast, slow = RoundMechanism(t), RoundMechanism(t)
    active, nxt = list(range(10)), 10
    for epoch in range(14):
        K = len(active)
        X = np.where(rng.random((K, 3)) < 0.4, 0.0, rng.random((K, 3)))
        X /= np.maximum(X.sum(axis=1, keepdims=True), 1.0)
        rows = [(m,) for m in active]
        if epoch == 6:   # a combination row: neither plans by job this epoch
            rows[0] = (active[0], nxt)
            nxt += 1
        before = {r: fast.received[k].copy() for k, r in enumerate(fast.rows)}
        alloc = AllocationRows(rows, X, np.ones(K))
        for m in (fast, slow):
            m.reset(alloc)
        slow._plain_ones = False   # the general path
        assert fast._plain_ones == (epoch != 6)
        for k, r in enumerate(fast.rows):   # carried over where the row persists, afresh where new
            np.testing.assert_array_equal(fast.received[k], before.get(r, np.zeros(3)))
        if epoch == 9:   # a worker joins: GPUs renumbered, leases move with them
            bigger = topo("v100=10,p100=6,k80=4")
            remap = np.array([g if g < 8 else g + 2 for g in range(t.num_gpus)])
            for m in (fast, slow):
                m.set_topology(bigger, remap)
        for rnd in range(6):
            p, q = fast.plan(), slow.plan()
            assert p.keys == q.keys and p.gpus == q.gpus and np.array_equal(p.renewed, q.renewed)
            assert np.array_equal(p.rows, q.rows) and np.array_equal(p.types, q.types)
            if epoch != 6:
                assert list(zip(p.rows.tolist(), p.types.tolist())) == reference_selection(fast)
            occupied = np.full(p.num_entries, 360.0)
            if rnd == 2 and p.num_entries:   # an entry ends early and a waiting job takes its GPU
                e = int(rng.integers(p.num_entries))
                occupied[e] = 100.0
                newcomer = (1000 + epoch,)
                for m in (fast, slow):
                    m.placer.remember(newcomer, int(p.types[e]), p.gpus[e])
            fast.record(p, occupied)
            slow.record(q, occupied)
            np.testing.assert_array_equal(fast.received, slow.received)
            if rnd == 3:   # a job finishes mid-epoch
                gone = active.pop(int(rng.integers(len(active))))
                for m in (fast, slow):
                    m.retire(gone)
                assert not fast.knows(gone)
        active += [nxt, nxt + 1]
        nxt += 2


def test_knows_and_retire_follow_rows_across_resets():
    m = RoundMechanism(topo())
    X = lambda k: np.full((k, 3), 0.3)   # noqa: E731
    m.reset(AllocationRows([(0,), (1,), (2,)], X(3), np.ones(3)))
    m.retire(1)
    assert [m.knows(j) for j in (0, 1, 2, 7)] == [True, False, True, False]
    m.reset(AllocationRows([(2,), (500,)], X(2), np.ones(2)))   # job ids beyond the index: it grows
    assert [m.knows(j) for j in (0, 2, 500)] == [False, True, True]
    m.reset(AllocationRows([(2, 500), (7,)], X(2), np.ones(2)))
    assert [m.knows(j) for j in (2, 500, 7, 0)] == [True, True, True, False]
    m.reset(AllocationRows([(7,), (9,)], X(2), np.ones(2)))
    assert [m.knows(j) for j in (2, 500, 7, 9)] == [False, False, True, True]
    m.retire(9)
    assert not m.knows(9) and m.alive.tolist() == [True, False]


def test_ranking_of_entries_presorted_by_allocation_and_its_fallbacks():
    """eligible_rank over entries sorted by -X (one stable sort) is global_order; where an f
    underflows or an X / f overflows it falls back to the three keys and still is."""
    rng = np.random.default_rng(5)
    for case in ("plain", "underflow", "overflow"):
        X = np.where(rng.random((30, 3)) < 0.3, 0.0, rng.random((30, 3)))
        X[:6] = X[6:12]   # ties on X, and (below) on time received
        received = np.where(rng.random((30, 3)) < 0.25, 0.0, rng.random((30, 3)) * 1e3)
        received[:6] = received[6:12]
        if case == "underflow":
            received[12, :] = 1e-310
            X[12, :] = 0.5
        if case == "overflow":
            X[13, :] = 1e300
            received[13, :] = 1e-5
        prio, never = priorities(X, received, None)
        eligible = X > 1e-9
        want = global_order(X, prio, never, eligible)
        flat = np.flatnonzero(eligible)
        neg_x = -X.ravel()[flat]
        by_x = neg_x.argsort(kind="stable")
        flat, neg_x = flat[by_x], neg_x[by_x]
        total = received.sum(axis=0)
        rank = eligible_rank(None, neg_x, received.ravel()[flat], total[flat % 3], None, True, by_x=True)
        assert np.array_equal(flat[rank], want), case


def test_holders_answer_as_a_walk_over_every_entry_after_any_writes():
    """Placer.remember asks the dict who holds a GPU (an index kept by every write) instead of walking
    every entry: after random sets, deletes, pops, updates and remembers, the index says what the walk
    says, and the dict is the one a plain dict with the walk's deletions would be."""
    from gavel_ng.mechanism.leases import Holders

    rng = np.random.default_rng(5)
    for trial in range(30):
        holders, plain = Holders(), {}
        if trial % 2:                     # the index built late, over a dict already written
            for k in range(10):
                g = tuple(int(x) for x in rng.choice(16, int(rng.integers(1, 4)), replace=False))
                holders[(k,)] = plain[(k,)] = (0, g)
        for _ in range(200):
            op, key = int(rng.integers(6)), (int(rng.integers(20)),)
            gpus = tuple(int(x) for x in rng.choice(16, int(rng.integers(1, 4)), replace=False))
            if op == 0:
                holders[key] = plain[key] = (0, gpus)
            elif op == 1 and key in plain:
                del holders[key], plain[key]
            elif op == 2:
                assert holders.pop(key, None) == plain.pop(key, None)
            elif op == 3:
                holders.update({key: (1, gpus)})
                plain.update({key: (1, gpus)})
                holders |= {(key[0] + 1,): (2, gpus[:1])}
                plain |= {(key[0] + 1,): (2, gpus[:1])}
            else:                         # remember: the old holders of these GPUs let go
                walk = {k for k, (_, g) in plain.items() if set(g) & set(gpus)}
                assert holders.holding(gpus) == walk
                for k in walk:
                    del plain[k]
                    del holders[k]
                holders[key] = plain[key] = (1, gpus)
            assert dict(holders) == plain and list(holders) == list(plain)
    placer = Placer(topo())
    placer.last = {(1,): (0, (0, 1)), (2,): (0, (2,))}
    placer.remember((3,), 0, (1, 2))      # takes GPU 1 from job 1 and GPU 2 from job 2
    assert placer.last == {(3,): (0, (1, 2))}
