"""Policies that add constraints of their own: a cost budget, a cap on one type's GPUs.

What a policy adds holds in the schedule that runs, not only in its allocation: the mechanism
keeps such a row in every round, and the simulator's summary says by how much a round and the
run exceeded each (docs/policies.md, "What holds").

    gavel-ng simulate --plugin examples/constrained_policies.py --policy budget_las \
        --cluster v100=8,p100=8,k80=8 --jobs-per-hour 1.5 --window 0:40 --seed 0
"""

import gavel_ng as g


def within_budget(p, share):
    """max-min fairness with $/h <= share of what every GPU of the cluster costs."""
    prices = p.input.prices
    budget = share * float(prices @ p.input.capacity)
    p.add_constraint(p.cost_per_hour(prices) <= budget, name="budget")
    return p.maximize_min(p.normalized_thr)


@g.policy("budget_las", "max-min fairness, $/h at most half the cluster's price", idle_aware=True)
def budget_las(p):
    return within_budget(p, 0.5)


@g.policy("budget_las_20", "max-min fairness, $/h at most a fifth of the cluster's price", idle_aware=True)
def budget_las_20(p):
    return within_budget(p, 0.2)


@g.policy("v100_cap", "max-min fairness, at most 4 V100 GPUs in use")
def v100_cap(p):
    p.add_constraint(p.gpus[p.input.worker_types.index("v100")] <= 4, name="v100 cap")
    return p.maximize_min(p.normalized_thr)
