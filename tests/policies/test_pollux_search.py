"""Pollux's population search on small integer arrays (gavel_ng.policies.builtin.pollux_search) against the plain
formulation it replaced, kept here as the reference: the same random draws must give the same
matrices, the same fitness and the same decisions."""

from __future__ import annotations

import numpy as np
import pytest

from gavel_ng.cluster import Cluster
from gavel_ng.policies.builtin.pollux import Pollux, PolluxSia, majority_type, power_mean
from gavel_ng.policies.builtin.pollux_search import FitnessTable, Search
from gavel_ng.policies.rounds import RoundJobs
from gavel_ng.round_planner import RoundPlanner
from gavel_ng.topology import Topology


# ----- the plain formulation (the search before it moved to small integer arrays) ---------------------
def ref_cap_cumulative(A, cap, axis, order):
    B = np.take(A, order, axis=axis)
    before = np.cumsum(B, axis=axis) - B
    B = np.clip(cap - before, 0, B)
    out = np.empty_like(A)
    idx = [slice(None)] * A.ndim
    idx[axis] = order
    out[tuple(idx)] = B
    return out


def ref_repair(rng, A, kmax, node_cap, node_type, onehot, one_type, avoid):
    A = A.copy()
    if one_type:
        per_type = A @ onehot
        keep = np.argmax(per_type + rng.random(per_type.shape) * 0.5, axis=2)
        A[node_type[None, None, :] != keep[:, :, None]] = 0
    A = ref_cap_cumulative(A, kmax[None, :, None], axis=2, order=rng.permutation(A.shape[2]))
    A = ref_cap_cumulative(A, node_cap[None, None, :], axis=1, order=rng.permutation(A.shape[1]))
    if avoid:
        order = rng.permutation(A.shape[1])
        dist = ((A > 0).sum(axis=2) > 1)[:, :, None] & (A > 0)
        seen = np.cumsum(dist[:, order], axis=1)
        extra = np.empty_like(dist)
        extra[:, order] = dist[:, order] & (seen > 1)
        A[extra] = 0
    return A


def ref_crossover(rng, pop, fit):
    P, J, _ = pop.shape

    def tournament():
        a, b = rng.integers(0, P, (2, P))
        return np.where(fit[a] >= fit[b], a, b)

    p1, p2 = tournament(), tournament()
    pick = rng.random((P, J, 1)) < 0.5
    return np.where(pick, pop[p1], pop[p2])


def ref_mutate(rng, pop, node_cap):
    P, J, N = pop.shape
    out = pop.copy()
    hit = rng.random((P, J)) < 1.0 / max(J, 1)
    hit[np.arange(P), rng.integers(0, J, P)] = True
    pi, ji = np.nonzero(hit)
    ni = rng.integers(0, N, len(pi))
    out[pi, ji, ni] = rng.integers(0, node_cap[ni] + 1)
    return out


def ref_fitness(A, A0, local, dist, base, factor, p):
    J = A.shape[1]
    K = A.sum(axis=2)
    spread = (A > 0).sum(axis=2)
    rows = np.arange(J)[None, :]
    g = np.where(spread > 1, dist[rows, K], local[rows, K])
    speed = g / base[None, :]
    changed = (A != A0[None]).any(axis=2)
    return power_mean(np.where(changed, speed * factor[None, :], speed), p)


def ref_decide(policy: Pollux, ctx):
    """Pollux.decide as it was, on the reference operators."""
    policy._setup(ctx)
    J = len(ctx.jobs)
    local, dist, kmax = policy._goodput_tables(ctx)
    base = policy._fair_goodput(local, dist, J)
    A0 = policy._current(J)
    running = A0.sum(axis=1) > 0
    delta = ctx.realloc_delay
    with np.errstate(divide="ignore", invalid="ignore"):
        f = (ctx.age - ctx.reallocations * delta) / (ctx.age + delta)
    factor = np.where(running, np.where(ctx.age + delta > 0, np.clip(f, 0.0, 1.0), 1.0), 1.0)
    rng, cap = policy.rng, policy.node_cap

    def repair(A):
        return ref_repair(rng, A, kmax, cap, policy.node_type, policy.onehot, not policy.sia, policy.avoid)

    greedy = A0.copy()
    free = cap - A0.sum(axis=0)
    for i in np.flatnonzero(~running):
        n = np.flatnonzero(free > 0)
        if not len(n):
            break
        greedy[i, n[0]] += 1
        free[n[0]] -= 1
    half = policy.pop // 2
    seeds = np.concatenate([A0[None], greedy[None], ref_mutate(rng, np.repeat(A0[None], half - 1, axis=0), cap),
                            ref_mutate(rng, np.repeat(greedy[None], policy.pop - half - 1, axis=0), cap)])
    pop = repair(seeds)
    fit = ref_fitness(pop, A0, local, dist, base, factor, policy.p)
    for _ in range(policy.gens):
        kids = repair(ref_mutate(rng, ref_crossover(rng, pop, fit), cap))
        both = np.concatenate([pop, kids])
        both_fit = np.concatenate([fit, ref_fitness(kids, A0, local, dist, base, factor, policy.p)])
        keep = np.argsort(-both_fit, kind="stable")[: policy.pop]
        pop, fit = both[keep], both_fit[keep]
    best = pop[int(np.argmax(fit))]
    if policy.sia:
        best = majority_type(best, policy.node_type, policy.power)
    return policy._entries(ctx.jobs, best)


# ----- the operators -------------------------------------------------------------------------------
def search_setup(seed, J, caps, types, one_type, avoid):
    node_cap = np.array(caps, np.int64)
    node_type = np.array(types, np.int64)
    onehot = np.eye(int(node_type.max()) + 1, dtype=np.int64)[node_type]
    kmax = np.random.default_rng(seed + 1000).integers(0, min(int(node_cap.sum()), 16) + 1, J)
    return node_cap, node_type, onehot, kmax


SHAPES = [(3, [4, 4, 4, 2], [0, 0, 1, 1]),                         # small
          (9, [4] * 6 + [8, 8], [0] * 6 + [1, 1]),                 # wider nodes
          (40, [4] * 16, [0] * 6 + [1] * 6 + [2] * 4)]             # Sia's 16 virtual nodes, counts beyond int8


@pytest.mark.parametrize("one_type,avoid", [(False, True), (True, True), (True, False)])
@pytest.mark.parametrize("J,caps,types", SHAPES)
def test_operators_draw_and_repair_as_the_plain_formulation(J, caps, types, one_type, avoid):
    for seed in range(4):
        node_cap, node_type, onehot, kmax = search_setup(seed, J, caps, types, one_type, avoid)
        ref_rng, rng = np.random.default_rng(seed), np.random.default_rng(seed)
        search = Search(rng, node_cap, node_type, onehot, kmax, one_type=one_type, avoid=avoid)
        # any matrix (rows above their cap, nodes above capacity): the full repair
        raw = np.random.default_rng(seed + 7).integers(0, node_cap + 1, (16, J, len(caps)))
        pop_ref = ref_repair(ref_rng, raw, kmax, node_cap, node_type, onehot, one_type, avoid)
        pop = search.repair(raw.astype(search.dtype))
        assert np.array_equal(pop, pop_ref)
        fit = np.random.default_rng(seed + 9).random(16)
        for _ in range(3):   # generations: children of repaired parents, only the mutated rows checked for the cap
            kids_ref = ref_mutate(ref_rng, ref_crossover(ref_rng, pop_ref, fit), node_cap)
            kids_ref = ref_repair(ref_rng, kids_ref, kmax, node_cap, node_type, onehot, one_type, avoid)
            kids = search.children(pop, fit)
            assert kids.dtype == search.dtype and np.array_equal(kids, kids_ref)
            assert rng.bit_generator.state == ref_rng.bit_generator.state
            pop, pop_ref = kids, kids_ref
            assert (pop.sum(axis=2) <= kmax).all()                              # the job's GPU cap
            assert (pop.sum(axis=1) <= node_cap).all()                          # each node's capacity
            if avoid:                                                           # one distributed job per node
                dist = ((pop > 0).sum(axis=2) > 1)[:, :, None] & (pop > 0)
                assert (dist.sum(axis=1) <= 1).all()
            if one_type:
                assert ((pop > 0).astype(np.int64) @ onehot > 0).sum(axis=2).max() <= 1


def test_fitness_table_is_the_power_mean_of_speedups_bit_for_bit():
    rng = np.random.default_rng(5)
    J, N, K = 12, 8, 16
    local, dist = rng.random((J, K + 1)) * 10, rng.random((J, K + 1)) * 10
    local[:, 0] = dist[:, 0] = 0.0
    dist[:3, 5:] = 0.0                                                          # no run at all: STARVED
    base, factor = rng.random(J) + 0.1, rng.random(J)
    A0 = rng.integers(0, 2, (J, N))
    search = Search(rng, np.full(N, 4), np.zeros(N, np.int64), np.ones((N, 1), np.int64),
                    np.full(J, K), one_type=False, avoid=True)
    A = np.minimum(rng.integers(0, 3, (20, J, N)), 2)
    A[:, :, 4:] = 0                                                             # rows within 8 GPUs
    A[3] = A0                                                                   # unchanged rows
    for p in (-1.0, -0.5, 1.0):
        table = FitnessTable(search, local, dist, base, factor, p, A0)
        assert np.array_equal(table(A.astype(search.dtype)), ref_fitness(A, A0, local, dist, base, factor, p))


# ----- the policy ---------------------------------------------------------------------------------
class CappedSource:
    """Adaptive jobs whose goodput is speed[type] x K^alpha_j up to a GPU cap of their own (0 beyond)."""

    def __init__(self, types, jobs, seed):
        rng = np.random.default_rng(seed)
        self.types = list(types)
        self.speed = dict(zip(types, rng.random(len(types)) + 0.5))
        self.alpha = dict(zip(jobs, rng.random(len(jobs)) * 0.8 + 0.2))
        self.cap = dict(zip(jobs, rng.integers(1, 20, len(jobs)).tolist()))
        self.arrival = dict(zip(jobs, rng.random(len(jobs)) * 500))

    def round_jobs(self, jobs):
        n = len(jobs)
        return RoundJobs(np.ones(n, bool), np.ones(n, np.int64), np.zeros((n, len(self.types))),
                         np.array([self.arrival[m] for m in jobs]), np.arange(n, dtype=np.int64) % 3)

    def goodput(self, jobs, worker_type, gpus, servers):
        k = np.asarray(gpus, float)
        out = np.array([self.speed[worker_type] * k ** self.alpha[m] * (k <= self.cap[m]) for m in jobs])
        return out * np.where(np.asarray(servers) > 1, 0.8, 1.0)[None, :]


def contexts(policy_name, seed, n_jobs):
    """Two identical contexts (same jobs, GPUs held and random stream) from real planners."""
    cluster = Cluster(gpus={"t4": 24, "rtx2080ti": 16, "a100": 16},
                      gpus_per_server={"t4": 4, "rtx2080ti": 8, "a100": 8})
    topo = Topology.from_cluster(cluster)
    jobs = list(range(n_jobs))
    held_rng = np.random.default_rng(seed + 50)
    free = list(held_rng.permutation(topo.num_gpus))
    held = {}
    for m in jobs[: n_jobs // 2]:                  # half the jobs hold GPUs of one type
        t = int(topo.gpu_type[free[0]])
        mine = [g for g in free if topo.gpu_type[g] == t][: int(held_rng.integers(1, 6))]
        held[m] = tuple(sorted(int(g) for g in mine))
        free = [g for g in free if g not in mine]
    out = []
    for _ in range(2):
        planner = RoundPlanner(policy_name, None, CappedSource(cluster.gpus, jobs, seed), topo, lambda: 900.0,
                               realloc_delay=30.0, seed=seed)
        planner.arrive(jobs)
        planner.last = dict(held)
        out.append(planner.context(900.0))
    return out


@pytest.mark.parametrize("cls", [PolluxSia, Pollux])
def test_pollux_decides_as_the_plain_formulation(cls):
    for seed, n_jobs in ((0, 5), (1, 14), (2, 40)):
        ctx_new, ctx_ref = contexts("pollux", seed, n_jobs)
        got = cls(generations=12).decide(ctx_new)
        want = ref_decide(cls(generations=12), ctx_ref)
        assert got == want and len(got) > 0
        assert ctx_new.rng.bit_generator.state == ctx_ref.rng.bit_generator.state
