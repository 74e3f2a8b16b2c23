"""The policy's own constraints in the mechanism (gavel_ng.mechanism.limits, issue 37): packing rows kept
by every step that hands out GPUs, other rows measured, entries over a row by themselves run on credit."""

import numpy as np
import pytest
import scipy.sparse as sp

from gavel_ng.cluster import Cluster
from gavel_ng.mechanism import AllocationRows, JobView, MechanismConfig, RoundMechanism
from gavel_ng.mechanism.backfill import holders
from gavel_ng.mechanism.limits import Limits, Meter, round_shares
from gavel_ng.topology import Topology

PRICE = np.array([3.0, 1.0])            # $/GPU-hour of v100, k80


def topo(spec="v100=4,k80=4", per=4):
    return Topology.from_cluster(Cluster.parse(spec, gpus_per_server=per))


def budget_rows(K: int, sf, budget: float, J: int = 2) -> Limits:
    """cost_per_hour <= budget over K single-job rows (sf GPUs each)."""
    C = (np.asarray(sf, float)[:, None] * PRICE[None, :]).reshape(1, K * J)
    return Limits.from_bounds(sp.csr_matrix(C), np.array([-np.inf]), np.array([budget]), ["budget"],
                              [(k,) for k in range(K)], J)


def equal_shares(K: int, sf=None, budget: float | None = None) -> AllocationRows:
    sf = np.ones(K) if sf is None else np.asarray(sf, float)
    X = np.full((K, 2), 0.5 / 1)
    return AllocationRows([(k,) for k in range(K)], X, sf, None if budget is None else budget_rows(K, sf, budget))


def spend(plan) -> float:
    return float((PRICE[plan.types] * plan.sfs).sum())


def test_a_budget_bounds_every_round_the_mechanism_plans():
    """Without the rows the mechanism hands out all 8 GPUs (16 $/h); with them, each round's entries cost at
    most 7 $/h, and the rounds still use what the budget allows (a v100 and four k80s, or two v100s and a k80)."""
    m = RoundMechanism(topo())
    m.reset(equal_shares(8))
    plan = m.plan()
    assert spend(plan) == 16.0
    m = RoundMechanism(topo(), MechanismConfig(round_seconds=360.0))
    m.reset(equal_shares(8, budget=7.0))
    for _ in range(20):
        plan = m.plan()
        assert 6.0 <= spend(plan) <= 7.0, plan.types
        m.record(plan, np.full(plan.num_entries, 360.0))
    rep = m.meter.report()["budget"]
    assert rep == {"enforced": "every round", "rounds": 20, "max_round_excess": 0.0, "run_excess": 0.0}


def test_jobs_the_allocation_does_not_know_wait_while_a_packing_row_applies():
    """A new job has no coefficients in the policy's rows: it is not backfilled (round or mid-round) while a
    budget applies, and is without one."""
    new = JobView([99], [1], np.array([[10.0, 5.0]]))
    for budget, backfilled in ((None, True), (100.0, False)):
        m = RoundMechanism(topo())
        m.reset(equal_shares(2, budget=budget))
        plan = m.plan(new)
        assert ((99,) in plan.keys) is backfilled
        assert not any(k == (99,) for k in plan.waiting.candidates.keys) or backfilled


def test_mid_round_backfill_counts_the_holders_against_the_budget():
    """A k80 job ends early: its $1/h and nothing more goes to the waiting entries, whatever GPUs are free."""
    t = topo()
    m = RoundMechanism(t, MechanismConfig(round_seconds=360.0))
    m.reset(equal_shares(8, budget=7.0))
    plan = m.plan()
    assert spend(plan) <= 7.0
    ended = int(np.flatnonzero(plan.types == 1)[0])   # a k80 entry frees its GPU and its dollar
    running = [h for e, h in enumerate(holders(plan)) if e != ended]
    free = np.ones(t.num_gpus, bool)
    for g in (g for e, gpus in enumerate(plan.gpus) if e != ended for g in gpus):
        free[g] = False
    busy = set(plan.member_job.tolist())
    chosen = plan.waiting.choose(free, busy, running)
    assert sum(PRICE[b.type] * b.sf for b in chosen) + sum(PRICE[h.type] * h.sf for h in running) <= 7.0
    assert sum(PRICE[b.type] for b in chosen) == PRICE[1]    # the freed dollar buys one k80, not a v100
    assert plan.waiting.choose(free, set(plan.member_job.tolist()), []) != []   # (without holders: more)


def test_an_entry_over_a_row_by_itself_runs_only_on_credit_and_alone():
    """A 4-GPU v100 job costs 12 $/h against a 10 $/h budget: it runs only when the budget's unused dollars of
    earlier rounds cover the 2 $/h over, with nothing else spending; the average then stays within budget."""
    m = RoundMechanism(topo(), MechanismConfig(round_seconds=360.0))
    X = np.array([[1.0, 0.0], [0.0, 1.0]])          # job 0: 4 v100s; job 1: one k80
    limits = budget_rows(2, [4, 1], 10.0)
    m.reset(AllocationRows([(0,), (1,)], X, np.array([4.0, 1.0]), limits))
    ran = []
    for _ in range(12):
        plan = m.plan()
        ran.append(sorted(k[0] for k in plan.keys))
        m.record(plan, np.full(plan.num_entries, 360.0))
    assert ran[0] == [1]                             # no credit yet: the k80 job alone
    assert [0] in ran and [0, 1] not in ran          # job 0 runs, never beside another spender
    rep = m.meter.report()["budget"]
    assert rep["max_round_excess"] == pytest.approx(2.0) and rep["run_excess"] == 0.0


def test_rows_with_negative_coefficients_are_measured_not_enforced():
    """thr_0 >= 5 (written -thr_0 <= -5) cannot hold in a round job 0 waits: the mechanism plans as without
    it, and the meter says by how much rounds and the run fell short."""
    K = 3
    C = np.zeros((1, K * 2))
    C[0, 0:2] = [10.0, 2.0]                           # job 0's steps/s on v100, k80
    limits = Limits.from_bounds(sp.csr_matrix(C), np.array([5.0]), np.array([np.inf]), ["speed"],
                                [(k,) for k in range(K)], 2)
    assert not limits.keeps_per_round and limits.b.tolist() == [-5.0]
    t = topo("v100=1,k80=1", per=1)
    a = RoundMechanism(t, MechanismConfig(round_seconds=10.0))
    b = RoundMechanism(t)
    X = np.full((K, 2), 1 / 3)
    a.reset(AllocationRows([(k,) for k in range(K)], X, np.ones(K), limits))
    b.reset(AllocationRows([(k,) for k in range(K)], X, np.ones(K)))
    for _ in range(6):
        pa, pb = a.plan(), b.plan()
        assert pa.keys == pb.keys and pa.types.tolist() == pb.types.tolist()
        a.record(pa, np.full(pa.num_entries, 10.0))
        b.record(pb, np.full(pb.num_entries, 10.0))
    rep = a.meter.report()["speed"]
    assert rep["enforced"] == "on average" and rep["max_round_excess"] == 5.0   # a round job 0 did not run


def test_the_meter_follows_a_row_across_solves_and_an_equality_gives_two_rows():
    C = sp.csr_matrix(np.array([[1.0, 1.0, 1.0, 1.0]]))
    limits = Limits.from_bounds(C, np.array([1.0]), np.array([1.0]), ["exactly one"], [(0,), (1,)], 2)
    assert limits.b.tolist() == [1.0, -1.0] and limits.packing.tolist() == [True, False]
    meter = Meter()
    y = round_shares(limits, np.array([0, 3]), np.array([10.0, 5.0]), 10.0)   # 1 + 0.5 of a round
    meter.observe(limits, y)
    again = Limits.from_bounds(C, np.array([1.0]), np.array([1.0]), ["exactly one"], [(5,), (6,)], 2)
    meter.observe(again, np.zeros(4))                                          # nothing ran: 1 short
    rep = meter.report()["exactly one"]
    assert rep["max_round_excess"] == 1.0 and rep["run_excess"] == 0.25 and rep["rounds"] == 2
    assert meter.credit(again).tolist() == [0.5, 0.0]   # (<= side: 0.5 over, then 1 under: 0.5 left unused)
