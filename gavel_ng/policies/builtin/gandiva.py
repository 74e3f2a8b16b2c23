"""Gandiva's ad-hoc space sharing (Xiao et al., OSDI'18) as a baseline policy.

Jobs are shuffled (seeded, so runs reproduce) and each unpaired job is tried with the
next unpaired job of equal scale factor; the pair is kept when it helps (the two
normalized throughputs sum to more than 1 on some type), otherwise the job time-slices
alone. Every unit (pair or single job) then gets an equal share of the cluster, blind
to worker types: 1/(units' GPU demand) of every type it can use, as `isolated` does for
single jobs. Without pair throughputs (no space sharing) it is `isolated`.
"""

from __future__ import annotations

import time

import numpy as np

from ..lp.layout import var_codes
from ..lp.problem import Problem
from ..lp.solving import finish
from ..registry import policy
from .fairness import _min_normalized

SEED = 0


@policy("gandiva", "Gandiva baseline: random pairs kept when they help, equal time slices otherwise",
        evaluate=_min_normalized, agnostic=False, pairs=True)
def gandiva(p: Problem):
    start = time.perf_counter()
    inp = p.input
    if p.packing is None or inp.num_jobs < 2:
        return finish(p, None, p.fallback_x(), "gandiva (time slicing)", "optimal", start)
    cls = inp.pairs.job_class
    useful = inp.pairs.useful()
    M, J = inp.throughputs.shape
    C = inp.pairs.num_classes
    codes = var_codes(p)
    order = np.argsort(codes)

    def var(m, d, j):  # index of the variable (job m, partner class d or -1, column j), or -1
        code = (m * (C + 1) + d + 1) * J + j
        i = np.searchsorted(codes[order], code)
        return int(order[i]) if i < len(codes) and codes[order[i]] == code else -1

    rng = np.random.default_rng(SEED)
    shuffled = list(rng.permutation(M))
    units: list[tuple[int, ...]] = []
    waiting: dict[float, int] = {}   # scale factor -> an unpaired job tried next
    for m in shuffled:
        sf = float(inp.scale_factors[m])
        other = waiting.pop(sf, None)
        if other is None:
            waiting[sf] = m
        elif useful[cls[other], cls[m]].any() and var(other, cls[m], int(np.argmax(useful[cls[other], cls[m]]))) >= 0:
            units.append((other, m))
        else:
            units.append((other,))
            waiting[sf] = m
    units += [(m,) for m in waiting.values()]
    demand = sum(float(inp.scale_factors[u[0]]) for u in units)
    cap = inp.capacity
    x = np.zeros(p.num_vars)
    for u in units:
        if len(u) == 1:
            cols = [(j, var(u[0], -1, j)) for j in range(J)]
            cols = [(j, [v]) for j, v in cols if v >= 0]
        else:
            a, b = u
            cols = [(j, [var(a, cls[b], j), var(b, cls[a], j)]) for j in range(J)]
            cols = [(j, vs) for j, vs in cols if min(vs) >= 0]
        share = np.array([cap[j] / demand for j, _ in cols])
        share /= max(share.sum(), 1.0)
        for (_, vs), s in zip(cols, share):
            x[vs] += s
    return finish(p, None, x, "gandiva", "optimal", start)
