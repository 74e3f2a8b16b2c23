"""A round policy's history survives a scheduler restart (real services on one SQLite state directory).

Tiresias ranks jobs by the GPU-seconds they attained (the planner's history) and moves starved
jobs back to Q0 (its own state). A restarted scheduler that forgot either would put a long job,
demoted to Q1, back in Q0 ahead of a short one, and undo promotions: its decision must be the
one the stopped scheduler would have made.
"""

from __future__ import annotations

import numpy as np
from service_helpers import register

from gavel_ng.protocol.jobspec import JobSpec
from gavel_ng.runtime.records import StateReader

JOB = JobSpec("ResNet-18 (batch size 32)", steps=1000, size="tiny")
ROUND = 10.0
OPTIONS = {"thresholds": [15.0], "promote_knob": 0.4}   # Q1 after 15 GPU-seconds; starved: waited > 0.4 x run


class Clock:
    """The planner's clock, moved by the test one round at a time (so that waits are exact)."""

    def __init__(self, start: float):
        self.now = start

    def __call__(self) -> float:
        return self.now


def _service(make_service, clock: Clock, **config):
    svc = make_service(**{"policy": "tiresias", "policy_options": OPTIONS, "worker_types": ["v100"], **config})
    register(svc, "w-v100", "v100", 1)
    svc.planner.rounds.clock = clock
    return svc


def _round(svc, clock: Clock) -> list[int]:
    """One round of ROUND seconds: who ran."""
    plan = svc.planner.plan(svc.planner.rounds.clock())
    clock.now += ROUND
    svc.planner.record(plan, np.full(plan.num_entries, ROUND))
    return plan.member_job.tolist()


def _next(svc) -> list[int]:
    return svc.planner.plan(svc.planner.rounds.clock()).member_job.tolist()


def test_tiresias_resumes_its_queues_and_promotions_after_a_restart(make_service):
    clock = Clock(0.0)
    svc = _service(make_service, clock)
    a, b = svc.state.submit([JOB, JOB])
    clock.now = max(j.submitted for j in svc.state.jobs.values())
    svc.planner.arrive([a, b])
    # a runs twice (Q1 at 20 GPU-s), b twice; then a has waited 10 s > 0.4 x 20 s: promoted back to Q0
    assert [_round(svc, clock) for _ in range(4)] == [[a], [a], [b], [a]]
    rounds, tiresias = svc.planner.rounds, svc.planner.rounds.decide.__self__
    assert rounds.attained == {a: 30.0, b: 10.0} and tiresias.promoted == {a: 20.0}
    kept = (dict(rounds.attained), dict(rounds.executed), dict(rounds.last_end), dict(tiresias.promoted),
            rounds.rng.bit_generator.state)
    expected = _next(svc)              # what the scheduler would run next had it not stopped
    assert expected == [a]             # a: 10 GPU-s since its promotion (Q0), before b
    svc.stop(grace=0.1)

    again = _service(make_service, clock)    # the restart: same state directory, same moment
    again.planner.arrive([a, b])
    rounds, tiresias = again.planner.rounds, again.planner.rounds.decide.__self__
    assert (rounds.attained, rounds.executed, rounds.last_end, tiresias.promoted,
            rounds.rng.bit_generator.state) == kept
    assert _next(again) == expected    # forgetting the promotion would run b (a back in Q1 at 30 GPU-s)
    again.stop(grace=0.1)
    with StateReader(svc.state_dir) as rd:   # the history is in the store, readable without a scheduler
        saved = rd.load_round_history()
    assert saved.policy == "tiresias" and {m for m, *_ in saved.jobs} == {a, b}


def test_forgetting_the_service_attained_reorders_tiresias(make_service):
    """Without its history a restarted tiresias runs FIFO: the job demoted to Q1 goes first again."""
    clock = Clock(0.0)
    svc = _service(make_service, clock, policy_options={"thresholds": [15.0]})
    a, b = svc.state.submit([JOB, JOB])
    clock.now = max(j.submitted for j in svc.state.jobs.values())
    svc.planner.arrive([a, b])
    assert [_round(svc, clock) for _ in range(3)] == [[a], [a], [b]]
    svc.stop(grace=0.1)
    again = _service(make_service, clock, policy_options={"thresholds": [15.0]})
    again.planner.arrive([a, b])
    assert _next(again) == [b]        # b (10 GPU-s, Q0) before a (20 GPU-s, Q1), as before the restart


def test_a_restart_drops_finished_jobs_and_keeps_the_service_under_another_policy(make_service):
    clock = Clock(0.0)
    svc = _service(make_service, clock)
    a, b = svc.state.submit([JOB, JOB])
    clock.now = max(j.submitted for j in svc.state.jobs.values())
    svc.planner.arrive([a, b])
    assert [_round(svc, clock) for _ in range(3)] == [[a], [a], [b]]
    svc.state.cancel(a)
    svc.stop(grace=0.1)

    again = make_service(policy="goodput", worker_types=["v100"])   # the service b attained is the policy's input
    assert again.planner.rounds.attained == {b: 10.0} and again.planner.rounds.executed == {b: 10.0}


def test_tiresias_forgets_promotions_of_jobs_gone_for_good(make_service):
    """The stored history stays bounded: promotions of jobs no longer scheduled are dropped."""
    clock = Clock(0.0)
    svc = _service(make_service, clock)
    a, b = svc.state.submit([JOB, JOB])
    clock.now = max(j.submitted for j in svc.state.jobs.values())
    svc.planner.arrive([a, b])
    tiresias = svc.planner.rounds.decide.__self__
    tiresias.promoted = {10_000 + k: 1.0 for k in range(500)} | {a: 0.0}
    _round(svc, clock)
    assert set(tiresias.promoted) <= {a, b} and a in tiresias.promoted, tiresias.promoted
