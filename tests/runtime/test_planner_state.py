"""DynamicPlanner without processes: workers joining and leaving, and what a restart keeps
(the mechanism's ledger and the last allocation, in a real SQLite state directory)."""

from __future__ import annotations

import time

import numpy as np
import pytest
from service_helpers import register

from gavel_ng.mechanism import AllocationRows
from gavel_ng.protocol.jobspec import JobSpec

JOB = JobSpec("ResNet-18 (batch size 32)", steps=1000, size="tiny")


def rounds(planner, n: int = 1):
    """Plan and record n rounds; the placements ((worker, GPU) per job) and renewals of the last."""
    for _ in range(n):
        plan = planner.plan(time.time())
        planner.record(plan, np.full(plan.num_entries, 1.0))
    where = {int(plan.keys[e][0]): planner.placement(plan, e) for e in range(plan.num_entries)}
    return where, dict(zip((int(k[0]) for k in plan.keys), plan.renewed.tolist()))


def one_type_each(jobs: list[int], types: list[int], J: int = 3) -> AllocationRows:
    X = np.zeros((len(jobs), J))
    X[np.arange(len(jobs)), types] = 1.0
    return AllocationRows([(m,) for m in jobs], X, np.ones(len(jobs)))


def test_workers_joining_and_leaving_keep_placements_and_renewals(make_service):
    svc = make_service()
    register(svc, "w-v100", "v100", 2)
    register(svc, "w-k80", "k80", 1)
    a, b, c, d = svc.state.submit([JOB] * 4)
    planner = svc.planner
    planner.mech.reset(one_type_each([a, b, c], [0, 0, 2]))
    first, _ = rounds(planner)
    assert first[c] == [("w-k80", 0)] and {first[a][0], first[b][0]} == {("w-v100", 0), ("w-v100", 1)}

    register(svc, "w-p100", "p100", 1)          # numbered between the v100s and the k80: the k80 GPU moves
    second, renewed = rounds(planner)           # the allocation has not been re-solved yet
    assert second == first and all(renewed.values())
    planner.mech.reset(one_type_each([a, b, c, d], [0, 0, 2, 1]))
    third, renewed = rounds(planner)
    assert {m: third[m] for m in (a, b, c)} == first and third[d] == [("w-p100", 0)]
    assert renewed == {a: True, b: True, c: True, d: False}

    svc.state.worker_lost(svc.state.workers["w-v100"], "test")
    planner.mech.reset(one_type_each([a, b, c, d], [0, 0, 2, 1]))
    fourth, renewed = rounds(planner)
    assert set(fourth) == {c, d} and renewed == {c: True, d: True}
    assert all(w != "w-v100" for gpus in fourth.values() for w, _ in gpus)


def test_ledger_and_allocation_survive_a_restart(make_service):
    svc = make_service()
    register(svc, "w-v100", "v100", 1)
    register(svc, "w-k80", "k80", 1)
    ids = svc.state.submit([JOB] * 3)
    svc.planner.arrive(ids)                     # solved at the first plan, which also sets state.allocation
    rounds(svc.planner, 4)
    shown = svc.state.allocation
    svc.state.cancel(ids[0])                    # finished: its rows must not come back
    svc.planner.retire(ids[0])
    kept = svc.planner.mech.ledger()
    assert kept.received.sum() > 0 and all(ids[0] not in r for r in kept.rows)
    saved = svc.store.load_ledger()
    assert any(ids[0] in r for r in saved.rows)   # saved before the cancel
    svc.stop(grace=0.1)

    again = make_service()                       # the restart: same state directory
    restored = again.planner.mech.ledger()
    assert restored.rows == kept.rows
    np.testing.assert_allclose(restored.received, kept.received)
    rows, X = again.state.allocation
    assert rows == shown[0]
    np.testing.assert_allclose(X, shown[1])
    assert again.planner.mech.plan().num_entries == 0     # no allocation until the first solve
    register(again, "w-v100", "v100", 1)
    register(again, "w-k80", "k80", 1)
    again.planner.arrive(ids[1:])
    again.planner.plan(time.time())              # the first solve
    mech = again.planner.mech
    for r, got in zip(kept.rows, kept.received):
        if r in mech.rows:
            np.testing.assert_allclose(mech.received[mech.rows.index(r)], got)   # carried into the new epoch
    assert mech.received.sum() == pytest.approx(kept.received.sum())


def test_a_ledger_for_other_worker_types_is_ignored(make_service, caplog):
    from gavel_ng.runtime.records import LedgerRecord

    svc = make_service()
    svc.store.save_ledger(LedgerRecord(3, ["a100"], [(1,)], [[5.0]]))
    svc.stop(grace=0.1)
    again = make_service()
    assert again.planner.mech.ledger().rows == []
    assert "fairness history starts over" in caplog.text


PRICES = {"v100": 3.06, "p100": 1.46, "k80": 0.9}


def test_a_cost_policy_gets_the_simulators_idle_aware_mechanism(make_service):
    """The runtime builds its mechanism from the policy's declared `idle_aware`, as the simulator does
    (issue 17). A cost policy's 0.9 V100 + 0.1 P100, the V100 otherwise unallocated: las's mechanism
    (Gavel §5) drifts the job onto the P100 and leaves the V100 idle in those rounds; min_cost's runs
    it where it was allocated. Its wall-clock ledger survives a restart."""
    X = np.array([[0.9, 0.1, 0.0]] + [[0.0, 1.0, 0.0]] * 4)
    v100_busy, job0_on_v100 = {}, {}
    for policy in ("las", "min_cost"):
        svc = make_service(policy, policy=policy, prices=PRICES)
        register(svc, "w-v100", "v100", 1)
        register(svc, "w-p100", "p100", 5)
        ids = svc.state.submit([JOB] * 5)
        svc.planner.mech.reset(AllocationRows([(m,) for m in ids], X, np.ones(5)))
        used, where = [], []
        for _ in range(50):
            plan = svc.planner.plan(time.time())
            svc.planner.record(plan, np.full(plan.num_entries, 1.0))
            types = dict(zip((int(k[0]) for k in plan.keys), plan.types.tolist()))
            used.append(0 in types.values())
            where.append(types.get(ids[0]))
        v100_busy[policy], job0_on_v100[policy] = np.mean(used), np.mean(np.equal(where, 0))
        assert svc.planner.mech.cfg.idle_aware == (policy == "min_cost")
    assert v100_busy["las"] < 0.65 and job0_on_v100["las"] < 0.65      # the V100 idles over a third of the time
    assert abs(job0_on_v100["min_cost"] - 0.9) <= 0.06 and v100_busy["min_cost"] == job0_on_v100["min_cost"]

    saved = svc.planner.mech.elapsed
    svc.stop(grace=0.1)
    again = make_service("min_cost", policy="min_cost", prices=PRICES)   # restart: same state directory
    assert again.planner.mech.cfg.idle_aware and again.planner.mech.elapsed == pytest.approx(saved) and saved > 0
