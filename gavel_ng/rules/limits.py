"""GPU limits on groups of jobs, as LP rows: entity quotas and labelled servers.

A `Limits` says, for group g of jobs and capacity pool q (a worker type, with its
`_unconsolidated` twin), that the group's jobs hold at most `cap[g, q]` of the pool's
GPUs: `sum_{m in g} sf_m x[m, q] <= cap[g, q]`. The problem builder (policies.lp.layout)
adds these rows to every LP it builds, so every optimizing policy sees them; `enforce`
scales a group's time down where an allocation still exceeds one (heuristic policies,
type-blind spreading), so that no policy's allocation ever breaks a limit. Only numpy here:
the policies package imports this module.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np
import scipy.sparse as sp

LIMIT_TOL = 1e-9


@dataclass(frozen=True)
class Limits:
    """`members[g, m]`: job m belongs to group g; `cap[g, q]`: its GPUs of pool q (inf: none)."""

    members: np.ndarray        # (G, M) bool
    cap: np.ndarray            # (G, P) GPUs
    names: tuple[str, ...]     # per group, for messages ("quota of entity 'a'", "servers labelled nvlink")

    def subset(self, idx) -> Limits:
        return replace(self, members=self.members[:, np.asarray(idx, dtype=int)])

    def scaled(self, share: float) -> Limits:
        return replace(self, cap=self.cap * share)


def limit_rows(p) -> tuple[sp.csr_matrix, np.ndarray, np.ndarray] | None:
    """(A, lo, hi) over a Layout's variables, one row per (group, pool) with a finite cap."""
    lim = p.input.limits
    if lim is None or not len(lim.names):
        return None
    members = p.members[p.var_row]                       # (n, width), -1 where absent
    present = members >= 0
    rows, cols, data, hi = [], [], [], []
    r = 0
    for g in range(len(lim.names)):
        inside = (np.where(present, lim.members[g][np.where(present, members, 0)], False)).any(axis=1)
        for q in np.flatnonzero(np.isfinite(lim.cap[g])):
            v = np.flatnonzero(inside & (p.var_pool == q))
            rows.append(np.full(len(v), r))
            cols.append(v)
            data.append(p.var_gpus[v])
            hi.append(lim.cap[g, q])
            r += 1
    if r == 0:
        return None
    A = sp.csr_matrix((np.concatenate(data), (np.concatenate(rows), np.concatenate(cols))), shape=(r, p.num_vars))
    return A, np.full(r, -np.inf), np.asarray(hi, dtype=float)


def enforce(p, x: np.ndarray) -> np.ndarray:
    """x with each group's time on a pool scaled down to its cap where it exceeds it (only lowers)."""
    if p.limit_block is None:
        return x
    A, _, hi = p.limit_block
    x = x.copy()
    # one pass: scaling a row down only lowers the other rows, so a row once settled stays settled
    for r in np.flatnonzero(A @ x > hi * (1 + LIMIT_TOL) + LIMIT_TOL):
        lo, end = A.indptr[r], A.indptr[r + 1]
        v = A.indices[lo:end]
        u = float(A.data[lo:end] @ x[v])
        if u > hi[r]:
            x[v] *= hi[r] / u
    return x


def limit_violations(p, x: np.ndarray, tol: float = 1e-6) -> list[str]:
    """One line per (group, pool) whose cap x exceeds by more than `tol` GPUs."""
    lim = p.input.limits
    if p.limit_block is None:
        return []
    A, _, hi = p.limit_block
    use = A @ x
    out = []
    pairs = [(g, q) for g in range(len(lim.names)) for q in np.flatnonzero(np.isfinite(lim.cap[g]))]
    for r in np.flatnonzero(use > hi + tol):
        g, q = pairs[r]
        out.append(f"{lim.names[g]}: {use[r]:.4g} GPUs of pool {q} > {hi[r]:.4g}")
    return out
