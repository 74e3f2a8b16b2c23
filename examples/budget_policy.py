"""Max-min fairness within a cost budget: a policy that adds a constraint of its own.

`budget_las` spends at most half of the cluster's list price per hour, `budget_las_20` a fifth.
What the policy adds holds in the schedule that runs, not only in its allocation
(docs/policies.md, "What holds"): the simulator's summary says by how much a round exceeded it.

    gavel-ng simulate --plugin examples/budget_policy.py --policy budget_las \
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
