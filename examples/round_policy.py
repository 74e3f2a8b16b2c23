import numpy as np

import gavel_ng as g


@g.round_policy("speedup_sum", "maximize the sum of speedups, a minimum share for every job first")
def speedup_sum(ctx, minimum=1.0):
    S = ctx.speedups                          # (jobs, columns): speedup on each (type, GPU count)
    share = np.where(S > 0, minimum, 0.0)     # any GPUs at all are worth `minimum` to a job
    return ctx.assign(S + share)              # one column per job, each type's GPUs within capacity
