"""PolluxSched's population search (`gavel_ng.policies.builtin.pollux`) on small integer arrays.

A population is a (matrices, jobs, nodes) array of GPU counts. The search runs 40 generations
a round, each a handful of numpy passes over the whole population, so its cost is the number
of passes and the bytes each one moves: counts are kept in the smallest integer type that
holds every sum the search takes, and a repair step touches only the rows or columns that break its
rule (a row within the job's cap and a column within the node's capacity are left as they
are by a running-sum cut, so skipping them changes nothing). The fitness reads one
precomputed table per round, indexed by (row changed, distributed, job, GPUs), in which the
per-job term of the power mean is already evaluated. Every random draw is the one the plain
formulation makes, in the same order, so a seed gives the same allocations.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..rounds.configurations import STARVED


def count_dtype(largest: int) -> np.dtype:
    """Smallest signed integer type that holds every count up to `largest`."""
    for dt in (np.int8, np.int16, np.int32):
        if largest <= np.iinfo(dt).max:
            return np.dtype(dt)
    return np.dtype(np.int64)


@dataclass
class Search:
    """The genetic operators over populations of allocation matrices (module docstring). Populations
    are C-contiguous arrays of `dtype`, which holds every sum the operators take (a row's GPUs, a
    node's GPUs over all jobs, a node's distributed jobs), so that sums need no wider type."""

    rng: np.random.Generator
    node_cap: np.ndarray     # (N,) int64 GPUs of each node
    node_type: np.ndarray    # (N,) int64 worker type of each node
    onehot: np.ndarray       # (N, types) int64
    kmax: np.ndarray         # (J,) int64 each job's GPU cap
    one_type: bool           # confine each job to one type (Pollux's "repair"), else any mix (Sia's setup)
    avoid: bool              # at most one distributed job per node

    def __post_init__(self) -> None:
        J, N = len(self.kmax), len(self.node_cap)
        cap = int(self.node_cap.max(initial=0))
        self.dtype = count_dtype(max(int(self.node_cap.sum()), J * cap, J, N, int(self.kmax.max(initial=0))))
        self.cap = self.node_cap.astype(self.dtype)
        self.kmax_d = self.kmax.astype(self.dtype)
        self.cap_hi = self.node_cap + 1
        self.rows = np.arange(J, dtype=np.int64)

    def count(self, mask: np.ndarray, subscripts: str) -> np.ndarray:
        """Sum of a boolean array in `dtype` (einsum: the fastest reduction over short axes)."""
        m = mask.view(np.int8) if self.dtype.itemsize == 1 else mask.astype(self.dtype)
        return np.einsum(subscripts, m)

    # ----- operators ----------------------------------------------------------------------------
    def children(self, pop: np.ndarray, fit: np.ndarray) -> np.ndarray:
        """One generation's children: crossover, mutation, repair. Only mutated rows can break their
        job's cap (the others are rows of repaired parents), so only those are checked for it."""
        kids = self.crossover(pop, fit)
        return self.repair(kids, self.mutate(kids))

    def crossover(self, pop: np.ndarray, fit: np.ndarray) -> np.ndarray:
        """Children of tournament-selected parents, each job's row from one parent or the other."""
        P, J, N = pop.shape
        ab = self.rng.integers(0, P, (2, P))
        f = fit[ab]
        p1 = np.where(f[0] >= f[1], ab[0], ab[1])
        ab = self.rng.integers(0, P, (2, P))
        f = fit[ab]
        p2 = np.where(f[0] >= f[1], ab[0], ab[1])
        pick = self.rng.random((P, J, 1)) < 0.5
        src = np.where(pick[:, :, 0], p1[:, None], p2[:, None]) * J + self.rows    # parent row of each job row
        return pop.reshape(P * J, N).take(src.ravel(), axis=0).reshape(P, J, N)

    def mutate(self, pop: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """About one job in J per matrix: one node's GPU count redrawn (0..its capacity), in place.
        Returns the (matrix, job) rows it drew."""
        P, J, N = pop.shape
        hit = self.rng.random((P, J)) < 1.0 / max(J, 1)
        hit[np.arange(P), self.rng.integers(0, J, P)] = True
        pi, ji = np.nonzero(hit)
        ni = self.rng.integers(0, N, len(pi))
        pop[pi, ji, ni] = self.rng.integers(0, self.cap_hi[ni])
        return pi, ji

    def repair(self, A: np.ndarray, rows: tuple[np.ndarray, np.ndarray] | None = None) -> np.ndarray:
        """One type per job (if `one_type`), at most its GPU cap, node capacity, one distributed job per
        node; in place. Each cut is a running sum in a random order, as the plain formulation's; a row
        or column within its bound is left as the cut would leave it, untouched. `rows`: the only
        (matrix, job) rows that may exceed their job's cap (None: any)."""
        P, J, N = A.shape
        if self.one_type:
            per_type = A @ self.onehot                                      # (P, J, types) int64
            keep = np.argmax(per_type + self.rng.random(per_type.shape) * 0.5, axis=2)
            A[self.node_type[None, None, :] != keep[:, :, None]] = 0
            rows = None                                                      # any row may have lost GPUs: check all
        order_n = self.rng.permutation(N)
        order_j = self.rng.permutation(J)
        order_d = self.rng.permutation(J) if self.avoid else None
        flat = A.reshape(-1)                                                 # cell (p, j, n) at (p J + j) N + n
        pi, ji = np.nonzero(np.einsum("ijk->ij", A) > self.kmax_d) if rows is None else rows
        if len(pi):                                                          # rows that may exceed the job's cap
            at = ((pi * J + ji) * N)[:, None] + order_n                      # (H, N) in the cut's order
            flat[at] = _cut(flat[at], self.kmax_d[ji][:, None])
        pi, ni = np.nonzero(np.einsum("ijk->ik", A) > self.cap)             # nodes above capacity
        if len(pi):
            at = (pi * (J * N) + ni)[:, None] + order_j * N                  # (V, J) in the cut's order
            flat[at] = _cut(flat[at], self.cap[ni][:, None])
        if self.avoid:
            on = A > 0
            dist = on & (self.count(on, "ijk->ij") > 1)[:, :, None]
            pi, ni = np.nonzero(self.count(dist, "ijk->ik") > 1)           # nodes with >= 2 distributed jobs
            if len(pi):
                at = (pi * (J * N) + ni)[:, None] + order_d * N              # (V, J) in the order
                extra = dist.reshape(-1)[at]
                extra[np.arange(len(pi)), extra.argmax(axis=1)] = False     # the first keeps its GPUs
                flat[at[extra]] = 0
        return A


def _cut(B, cap):
    left = cap - (np.add.accumulate(B, axis=1, dtype=B.dtype) - B)
    return np.minimum(B, np.maximum(left, 0, out=left), out=left)


class FitnessTable:
    """FITNESS_p of allocation matrices from one table per round (module docstring).

    ``term[c, d, j, k]`` is job j's term of the power mean at k GPUs, on one node (d = 0) or
    several (d = 1), its row unchanged (c = 0) or changed (c = 1, the re-allocation factor
    applied): the same floating-point operations as evaluating the speedups of a matrix, done
    once per (job, GPUs) instead of once per matrix."""

    def __init__(self, search: Search, local: np.ndarray, dist: np.ndarray, base: np.ndarray,
                 factor: np.ndarray, p: float, A0: np.ndarray):
        J, width = local.shape
        speed = np.stack([local, dist]) / base[None, :, None]               # (2, J, K + 1)
        speed = np.stack([speed, speed * factor[None, :, None]])             # (2, 2, J, K + 1)
        s = np.maximum(speed, STARVED) if p < 0 else speed
        self.term = np.ascontiguousarray(s ** p).ravel()
        self.inv_p = 1.0 / p
        self.A0 = A0.astype(search.dtype)
        self.count = search.count
        self.offset = np.arange(J, dtype=np.int64) * width                  # (J,)
        self.stride_d = J * width
        self.stride_c = 2 * J * width

    def __call__(self, A: np.ndarray) -> np.ndarray:
        idx = self.offset + np.einsum("ijk->ij", A)                         # (P, J) int64: GPUs
        idx += (self.count(A > 0, "ijk->ij") > 1) * self.stride_d           # on more than one node
        idx += (self.count(A != self.A0, "ijk->ij") > 0) * self.stride_c    # row changed
        return (np.add.reduce(self.term.take(idx), axis=-1) / idx.shape[-1]) ** self.inv_p   # np.mean's operations
