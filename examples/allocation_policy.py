import cvxpy as cp

import gavel_ng as g


@g.policy("proportional_fairness", "maximize sum_m log(sf_m thr_m / thr_equal_m)")
def proportional_fairness(p):
    return cp.Maximize(cp.sum(cp.log(p.normalized_thr.cvx)))
