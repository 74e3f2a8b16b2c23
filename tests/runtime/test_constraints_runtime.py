"""A policy's budget on a cluster (issue 37): the scheduler service's own allocator, planner and mid-round
backfill (a real DeployExecutor and LiveBackfill, workers registered but never called) keep it, as the
simulator's rounds do: both ask the same RoundMechanism and Waitlist."""

from __future__ import annotations

import time

import numpy as np
from service_helpers import register

from gavel_ng.protocol.jobspec import JobSpec

PRICES = {"v100": 3.0, "p100": 2.0, "k80": 1.0}
BUDGET = 4.0       # half of what the cluster below costs (2 V100s and 2 K80s: 8 $/h)
PLUGIN = f'''
import gavel_ng as g

@g.policy("rt_budget", "max-min fairness within {BUDGET} $/h", idle_aware=True)
def rt_budget(p):
    p.add_constraint(p.cost_per_hour(p.input.prices) <= {BUDGET})
    return p.maximize_min(p.normalized_thr)
'''
JOB = JobSpec("ResNet-18 (batch size 32)", steps=100_000, size="tiny")


def spend(types, sfs, worker_types) -> float:
    return sum(PRICES[worker_types[int(t)]] * int(s) for t, s in zip(types, sfs))


def test_the_cluster_plans_and_backfills_within_the_policys_budget(make_service, tmp_path, clean_registry):
    plugin = tmp_path / "budget.py"
    plugin.write_text(PLUGIN)
    svc = make_service(policy="rt_budget", plugins=(str(plugin),), prices=PRICES)
    register(svc, "w-v100", "v100", 2)
    register(svc, "w-k80", "k80", 2)
    ids = svc.state.submit([JOB] * 4)
    types = list(svc.state.worker_types)
    svc.planner.arrive(ids)
    plan = svc.planner.plan(time.time())
    assert 0 < spend(plan.types, plan.sfs, types) <= BUDGET   # main: all 4 GPUs, 8 $/h

    ex, live = svc.executor, svc.executor.backfill
    live.publish(plan)
    live.begin()
    ex.current = ex._resolve(plan)                # the round runs the plan
    ex.round_end = time.time() + 0.9 * ex.L
    ended = int(plan.keys[0][0])
    svc.state.cancel(ended)                       # a job ends early: its GPU and its dollars come free
    live.tick(time.time())
    running = [a for m, a in ex.current.items() if m != ended]
    assert spend([types.index(a.worker_type) for a in running], [len(a.placement) for a in running],
                 types) <= BUDGET                 # main: both free V100s, 6 $/h
    assert live.entries                           # what the budget allows was spent: a backfill


SLOW_PLUGIN = '''
import gavel_ng as g

@g.policy("rt_slow", "max-min fairness, each job capped at half what it does anywhere", agnostic=False)
def rt_slow(p):
    p.add_constraint(p.thr <= 0.5 * p.thr_fastest)
    return p.maximize_min(p.normalized_thr)
'''


def test_a_job_over_its_row_everywhere_runs_on_the_time_the_cluster_idled(make_service, tmp_path, clean_registry):
    """No round that runs the job keeps its cap: it waits while the cap's unused allowance builds up over the
    executor's idle waits (no rounds on a cluster: nothing runs), then runs one round on it, not every round."""
    plugin = tmp_path / "slow.py"
    plugin.write_text(SLOW_PLUGIN)
    svc = make_service(policy="rt_slow", plugins=(str(plugin),))
    register(svc, "w-v100", "v100", 1)
    [job] = svc.state.submit([JOB])
    planner = svc.planner
    planner.arrive([job])
    ran = []
    for _ in range(60):
        plan = planner.plan(time.time())
        ran.append(plan.num_entries)
        planner.record(plan, np.full(plan.num_entries, svc.executor.L))
        if not plan.num_entries:
            time.sleep(0.05 * svc.executor.L)   # the executor's idle wait (shortened)
    assert ran[0] == 0 and 1 <= sum(ran) <= 4, ran   # a round needs 20 idle waits of a twentieth of a round
