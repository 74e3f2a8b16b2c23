"""The round path's shortcuts for one-GPU, one-job rows (issue 31) make the same choices as the
general path: greedy_ones as greedy_select, Placer.place_jobs (placements remembered by job) as
Placer.place (a dict), and a mechanism planning by job as one planning entry by entry."""

import numpy as np

from gavel_ng.cluster import Cluster
from gavel_ng.mechanism import AllocationRows, Placer, RoundMechanism, greedy_select
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
