"""Space sharing by partner classes: variables grow with useful pairs, not with n^2.

The LP layout of `SchedulingProblem.pairs` (a `gavel_ng.pairs.PairTable`).
A pair's throughputs depend only on the two jobs' classes (job type and scale factor),
so a job m of class c gets, besides its single-job time x[m, j], variables
u[m, d, j] = time it shares a GPU of column j with *some* job of class d, wherever
the pair (c, d) beats time slicing on j. Then

    thr_m       = sum_j T[m, j] x[m, j] + sum_{d, j} frac[c, d, j] T[m, j] u[m, d, j]
    job row       sum_j x[m, j] + sum_{d, j} u[m, d, j] <= 1
    capacity      a pair uses its sf GPUs once: sf/2 on every u (each pair has two sides)
    balance       c != d:  sum_{m in c} u[m, d, j] == sum_{m' in d} u[m', c, j]
    within c      2 u[m, c, j] <= sum_{m' in c} u[m', c, j]   (no job pairs with itself)

These are exactly the conditions under which the class totals split into concrete
pairs of distinct jobs: `decompose` does it with a northwest-corner transportation
rule per (c, d, j) block (at most n_c + n_d - 1 pairs) and, inside a class, by
pairing position t with t + S/2 on the line of the jobs' amounts (at most n_c + 1
pairs). The Allocation therefore has concrete (job, job) rows for the mechanism.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

from ...allocation import Allocation
from ...errors import InputError
from .affine import Affine


@dataclass
class PackedLayout:
    """Where the partner variables sit, for rebalancing and decomposition."""

    part: np.ndarray         # indices of partner variables
    owner: np.ndarray        # their job
    owner_class: np.ndarray  # class of that job
    partner: np.ndarray      # partner class
    col: np.ndarray          # column
    weight: np.ndarray       # jobs each owner row stands for (counts)
    cross_block: np.ndarray  # per partner var: block id among cross blocks, -1 inside a class
    cross_side: np.ndarray   # 0 if owner class < partner class else 1
    within_block: np.ndarray  # per partner var: block id among within-class blocks, -1 across
    num_cross: int
    num_within: int


def build(p, inp) -> None:
    """Give Problem `p` the partner-class layout (see the module doc)."""
    T = inp.throughputs
    M, J = T.shape
    pairs = inp.pairs
    cls = pairs.job_class
    C = pairs.num_classes
    sf = inp.scale_factors
    cnt = np.ones(M) if inp.counts is None else inp.counts
    fits = (T > 0) & (sf[:, None] <= p.capacity[p.col_pool][None, :])
    size = np.bincount(cls, weights=cnt, minlength=C)
    class_fit = np.zeros((C, J), bool)
    np.logical_or.at(class_fit, cls, fits)
    csf = np.zeros(C)
    csf[cls] = sf
    if M and (csf[cls] != sf).any():
        m = int(np.argmax(csf[cls] != sf))
        raise InputError(f"jobs[{inp.job_ids[m]}].scale_factor", int(sf[m]),
                         "jobs of one pair class must have the same scale factor")
    useful = pairs.useful() & class_fit[:, None, :] & class_fit[None, :, :]
    useful &= (csf[:, None] == csf[None, :])[:, :, None]
    useful[np.arange(C), np.arange(C), :] &= (size >= 2 - 1e-9)[:, None]

    sm, sj = np.nonzero(fits)                     # single-job variables, grouped by job
    if C * C * J * M <= 50_000_000:
        pm, pd, pj = np.nonzero(useful[cls] & fits[:, None, :])
    else:  # per class, to bound memory when every job is its own class
        parts = []
        for c in np.unique(cls):
            jobs = np.flatnonzero(cls == c)
            a, d, j = np.nonzero(useful[c][None, :, :] & fits[jobs][:, None, :])
            parts.append((jobs[a], d, j))
        pm, pd, pj = (np.concatenate(v) for v in zip(*parts))
        order = np.lexsort((pj, pd, pm))
        pm, pd, pj = pm[order], pd[order], pj[order]
    row_code, prow = np.unique(pm * C + pd, return_inverse=True)   # one row per (job, partner class)
    prow = np.asarray(prow).ravel()
    p.members = np.r_[np.arange(M), row_code // C][:, None].astype(int)
    p.row_partner = np.r_[np.full(M, -1), row_code % C].astype(int)
    p.row_scale = sf[p.members[:, 0]]
    p.row_gpus = p.row_scale * cnt[p.members[:, 0]]
    p.var_row = np.r_[sm, M + prow].astype(int)
    p.var_col = np.r_[sj, pj].astype(int)
    n = len(p.var_row)
    p.num_vars = n
    ns = len(sm)
    p.var_share = np.r_[np.ones(ns), np.full(len(pm), 0.5)]
    owner = np.r_[sm, pm]
    coef = np.r_[T[sm, sj], pairs.frac[cls[pm], pd, pj] * T[pm, pj]]
    p.job_rows = sp.csr_matrix((np.ones(n), (owner, np.arange(n))), shape=(M, n))
    p.thr = Affine(p, sp.csr_matrix((coef, (owner, np.arange(n))), shape=(M, n)))

    # structural rows: class balance (equalities) and no self-pairing inside a class
    part = np.arange(ns, n)
    oc = cls[pm]
    w = cnt[pm]
    cross = oc != pd
    lo_c, hi_c = np.minimum(oc, pd), np.maximum(oc, pd)
    cross_code = (lo_c * C + hi_c) * J + pj
    cross_block = np.full(len(pm), -1)
    cross_codes, inv = np.unique(cross_code[cross], return_inverse=True)
    cross_block[cross] = np.asarray(inv).ravel()
    side = (oc > pd).astype(int)
    B = len(cross_codes)
    bal = sp.csr_matrix((np.where(side[cross] == 0, 1.0, -1.0) * w[cross], (cross_block[cross], part[cross])),
                        shape=(B, n))
    within = ~cross
    within_code = oc * J + pj
    within_block = np.full(len(pm), -1)
    within_codes, winv = np.unique(within_code[within], return_inverse=True)
    within_block[within] = np.asarray(winv).ravel()
    rows, cols, data = [], [], []
    widx = np.flatnonzero(within)
    order = widx[np.argsort(within_block[widx], kind="stable")]
    bounds = np.searchsorted(within_block[order], np.arange(len(within_codes) + 1))
    r0 = 0
    for b in range(len(within_codes)):
        vs = order[bounds[b]:bounds[b + 1]]
        s = len(vs)
        rows.append(np.repeat(np.arange(r0, r0 + s), s))
        cols.append(np.tile(part[vs], s))
        data.append(np.tile(-w[vs], s))
        rows.append(np.arange(r0, r0 + s))
        cols.append(part[vs])
        data.append(np.full(s, 2.0))
        r0 += s
    cat = lambda v, dt: np.concatenate(v).astype(dt) if v else np.zeros(0, dt)  # noqa: E731
    selfrows = sp.csr_matrix((cat(data, float), (cat(rows, int), cat(cols, int))), shape=(r0, n))
    p.extra_rows = [(bal, np.zeros(B), np.zeros(B)), (selfrows, np.full(r0, -np.inf), np.zeros(r0))]
    p.packing = PackedLayout(part, pm, oc, pd, pj, w, cross_block, side, within_block, B, len(within_codes))


def rebalance(p, x: np.ndarray) -> np.ndarray:
    """Restore balance after clipping or scaling, only ever lowering partner time."""
    L = p.packing
    if len(L.part) == 0:
        return x
    u = x[L.part] * L.weight
    cross = L.cross_block >= 0
    if L.num_cross:
        sums = np.zeros((L.num_cross, 2))
        np.add.at(sums, (L.cross_block[cross], L.cross_side[cross]), u[cross])
        target = sums.min(axis=1)
        scale = np.where(sums > 0, target[:, None] / np.maximum(sums, 1e-300), 0.0)
        x[L.part[cross]] *= scale[L.cross_block[cross], L.cross_side[cross]]
    win = ~cross
    if L.num_within:
        for _ in range(2):
            u = x[L.part] * L.weight
            S = np.bincount(L.within_block[win], weights=u[win], minlength=L.num_within)
            v = x[L.part[win]]
            wt = L.weight[win]
            others = S[L.within_block[win]] - wt * v
            cap = np.where(wt < 2, others / np.maximum(2 - wt, 1e-300), np.inf)
            x[L.part[win]] = np.minimum(v, np.maximum(cap, 0.0))
    return x


def _northwest(a: np.ndarray, b: np.ndarray):
    """Pieces (i, k, amount) of a transportation from supplies a to demands b, corner rule."""
    A, Bc = np.cumsum(a), np.cumsum(b)
    total = min(A[-1], Bc[-1])
    cuts = np.unique(np.concatenate([[0.0], A[A < total], Bc[Bc < total], [total]]))
    length = np.diff(cuts)
    mid = cuts[:-1] + length / 2
    keep = length > 1e-12
    i = np.minimum(np.searchsorted(A, mid[keep]), len(a) - 1)
    k = np.minimum(np.searchsorted(Bc, mid[keep]), len(b) - 1)
    return i, k, length[keep]


def _within(a: np.ndarray):
    """Pairs of distinct members (i, k, amount) with member i in pairs for a[i] in all.

    Lay the amounts on a line of length S and pair t with t + S/2: a member whose amount
    is at most S/2 can never meet itself."""
    S = a.sum()
    H = S / 2
    A = np.cumsum(a)
    cuts = np.unique(np.concatenate([[0.0, H], A[A < H], A[(A > H) & (A < S)] - H]))
    cuts = cuts[cuts <= H]
    length = np.diff(cuts)
    mid = cuts[:-1] + length / 2
    keep = length > 1e-12
    i = np.minimum(np.searchsorted(A, mid[keep]), len(a) - 1)
    k = np.minimum(np.searchsorted(A, mid[keep] + H), len(a) - 1)
    ok = i != k
    return i[ok], k[ok], length[keep][ok]


def decompose(p, x: np.ndarray) -> Allocation:
    """The allocation with concrete rows: every job alone, then (job, job) pairs."""
    inp = p.input
    M, J = inp.num_jobs, len(inp.worker_types)
    L = p.packing
    single = p.var_share == 1.0
    values = np.zeros((M, J))
    values[p.var_row[single], p.var_col[single]] = np.clip(x[single], 0.0, 1.0)
    pa, pb, pc, pt = [], [], [], []
    u = np.clip(x[L.part], 0.0, 1.0)
    cross = L.cross_block >= 0
    if L.num_cross:
        idx = np.flatnonzero(cross)
        order = idx[np.lexsort((L.owner[idx], L.cross_side[idx], L.cross_block[idx]))]
        blk, sd = L.cross_block[order], L.cross_side[order]
        starts = np.searchsorted(blk * 2 + sd, np.arange(2 * L.num_cross + 1))
        for b in range(L.num_cross):
            s0, s1 = order[starts[2 * b]:starts[2 * b + 1]], order[starts[2 * b + 1]:starts[2 * b + 2]]
            a_amt, b_amt = u[s0], u[s1]
            if len(s0) == 0 or len(s1) == 0 or a_amt.sum() <= 1e-12 or b_amt.sum() <= 1e-12:
                continue
            i, k, t = _northwest(a_amt, b_amt)
            pa.append(L.owner[s0][i])
            pb.append(L.owner[s1][k])
            pc.append(np.full(len(t), L.col[s0[0]]))
            pt.append(t)
    if L.num_within:
        idx = np.flatnonzero(~cross)
        order = idx[np.lexsort((L.owner[idx], L.within_block[idx]))]
        starts = np.searchsorted(L.within_block[order], np.arange(L.num_within + 1))
        for b in range(L.num_within):
            vs = order[starts[b]:starts[b + 1]]
            amt = u[vs]
            if len(vs) < 2 or amt.sum() <= 1e-12:
                continue
            i, k, t = _within(amt)
            pa.append(L.owner[vs][i])
            pb.append(L.owner[vs][k])
            pc.append(np.full(len(t), L.col[vs[0]]))
            pt.append(t)
    labels = [(inp.job_ids[m],) for m in range(M)]
    scales = list(p.row_scale[:M].astype(float))
    if pa:
        a, b = np.concatenate(pa), np.concatenate(pb)
        lo, hi = np.minimum(a, b), np.maximum(a, b)
        pair_code, inv = np.unique(lo * M + hi, return_inverse=True)   # one row per (job, job)
        pair_vals = np.zeros((len(pair_code), J))
        np.add.at(pair_vals, (np.asarray(inv).ravel(), np.concatenate(pc)), np.concatenate(pt))
        values = np.vstack([values, np.clip(pair_vals, 0.0, 1.0)])
        labels += [(inp.job_ids[k // M], inp.job_ids[k % M]) for k in pair_code.tolist()]
        scales += list(inp.scale_factors[pair_code // M].astype(float))
    return Allocation(labels, list(inp.worker_types), values, np.asarray(scales), inp.capacity.astype(float),
                      inp.pools)
