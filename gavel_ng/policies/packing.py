"""Space sharing by partner classes: variables grow with useful pairs, not with n^2.

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

from dataclasses import dataclass, replace

import numpy as np
import scipy.sparse as sp

from ..allocation import Allocation
from ..errors import InputError

USEFUL_EPS = 1e-9


@dataclass(frozen=True)
class PairTable:
    """How jobs share a GPU, by class.

    job_class[m] is job m's class (jobs of one class pair identically: same job type and
    scale factor); frac[c, d, j] is the fraction of its isolated steps/s on column j that a
    job of class c keeps while sharing a GPU with a job of class d (0: cannot share).
    """

    job_class: np.ndarray          # (M,) int
    frac: np.ndarray               # (C, C, J)
    class_names: tuple[str, ...] = ()

    @property
    def num_classes(self) -> int:
        return self.frac.shape[0]

    def useful(self) -> np.ndarray:
        """(C, C, J): both can share and together they beat time slicing (sum of fractions > 1)."""
        f = self.frac
        ft = f.transpose(1, 0, 2)
        return (f > 0) & (ft > 0) & (f + ft > 1 + USEFUL_EPS)

    def subset(self, jobs) -> PairTable:
        return replace(self, job_class=self.job_class[np.asarray(jobs, dtype=int)])

    def agnostic(self) -> PairTable:
        """Blind to worker types, not to packing: a useful pair keeps, on every column where it
        is useful, its mean fraction over those columns (same useful set, so the same layout)."""
        u = self.useful()
        cnt = u.sum(axis=2, keepdims=True)
        mean = np.where(u, self.frac, 0.0).sum(axis=2, keepdims=True) / np.maximum(cnt, 1)
        return replace(self, frac=np.where(u, np.broadcast_to(mean, self.frac.shape), self.frac))

    def validate(self, num_jobs: int, num_cols: int) -> None:
        f = self.frac
        if f.ndim != 3 or f.shape[0] != f.shape[1] or f.shape[2] != num_cols:
            raise InputError("pairs.frac", f.shape, "must be classes x classes x worker types")
        if self.job_class.shape != (num_jobs,):
            raise InputError("pairs.job_class", self.job_class.shape, "must give every job a class")
        if num_jobs and (self.job_class.min() < 0 or self.job_class.max() >= f.shape[0]):
            raise InputError("pairs.job_class", int(self.job_class.max()), "class index out of range")
        if not np.isfinite(f).all() or (f < 0).any():
            raise InputError("pairs.frac", float(f[~np.isfinite(f) | (f < 0)][0]), "must be finite and >= 0")

    @classmethod
    def from_table(cls, table, keys, columns) -> PairTable:
        """Classes = distinct (job type, scale factor) keys; fractions from the table's pair entries.

        `columns` are the problem's worker-type columns; a column without pair entries in
        the table (e.g. an `_unconsolidated` twin the table does not pair) gets none.
        """
        uniq = list(dict.fromkeys(keys))
        index = {k: i for i, k in enumerate(uniq)}
        C, J = len(uniq), len(columns)
        frac = np.zeros((C, C, J))
        for j, w in enumerate(columns):
            per = table.pairs.get(w, {})
            iso = table.isolated.get(w, {})
            mine = np.array([iso.get(k, 0.0) for k in uniq])
            for c, key in enumerate(uniq):
                for other, (a, b) in per.get(key, {}).items():
                    d = index.get(other)
                    if d is None or other[1] != key[1]:
                        continue
                    if mine[c] > 0:
                        frac[c, d, j] = a / mine[c]
                    if mine[d] > 0 and (other not in per or key not in per[other]):  # one side measured
                        frac[d, c, j] = b / mine[d]
        return cls(np.array([index[k] for k in keys], dtype=int), frac,
                   tuple(f"{k[0]} x{k[1]}" for k in uniq))


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
    row_key, prow = np.unique(pm * C + pd, return_inverse=True)
    prow = np.asarray(prow).ravel()
    p.members = np.r_[np.arange(M), row_key // C][:, None].astype(int)
    p.row_partner = np.r_[np.full(M, -1), row_key % C].astype(int)
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
    from .affine import Affine

    p.thr = Affine(p, sp.csr_matrix((coef, (owner, np.arange(n))), shape=(M, n)))

    # structural rows: class balance (equalities) and no self-pairing inside a class
    part = np.arange(ns, n)
    oc = cls[pm]
    w = cnt[pm]
    cross = oc != pd
    lo_c, hi_c = np.minimum(oc, pd), np.maximum(oc, pd)
    ckey = (lo_c * C + hi_c) * J + pj
    cross_block = np.full(len(pm), -1)
    ukeys, inv = np.unique(ckey[cross], return_inverse=True)
    cross_block[cross] = np.asarray(inv).ravel()
    side = (oc > pd).astype(int)
    B = len(ukeys)
    bal = sp.csr_matrix((np.where(side[cross] == 0, 1.0, -1.0) * w[cross], (cross_block[cross], part[cross])),
                        shape=(B, n))
    within = ~cross
    wkey = oc * J + pj
    within_block = np.full(len(pm), -1)
    wkeys, winv = np.unique(wkey[within], return_inverse=True)
    within_block[within] = np.asarray(winv).ravel()
    rows, cols, data = [], [], []
    widx = np.flatnonzero(within)
    order = widx[np.argsort(within_block[widx], kind="stable")]
    bounds = np.searchsorted(within_block[order], np.arange(len(wkeys) + 1))
    r0 = 0
    for b in range(len(wkeys)):
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
    p.packing = PackedLayout(part, pm, oc, pd, pj, w, cross_block, side, within_block, B, len(wkeys))


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
        key, inv = np.unique(lo * M + hi, return_inverse=True)
        pair_vals = np.zeros((len(key), J))
        np.add.at(pair_vals, (np.asarray(inv).ravel(), np.concatenate(pc)), np.concatenate(pt))
        values = np.vstack([values, np.clip(pair_vals, 0.0, 1.0)])
        labels += [(inp.job_ids[k // M], inp.job_ids[k % M]) for k in key.tolist()]
        scales += list(inp.scale_factors[key // M].astype(float))
    return Allocation(labels, list(inp.worker_types), values, np.asarray(scales), inp.capacity.astype(float),
                      inp.pools)
