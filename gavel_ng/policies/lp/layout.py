"""The LP layout of one scheduling problem: variables, validity rows, normalizers.

Rows are job combinations (single jobs, or pairs given as explicit Combinations);
only (row, column) entries that can run are variables, so the LP grows with useful rows.
With `inp.pairs` (space sharing by partner classes, packing.py) a job's rows are
itself alone and "with some job of class d"; the allocation decomposes those into
concrete (job, job) pairs. Columns of one capacity pool (`inp.pools`: a type and its
`_unconsolidated` twin) share that pool's GPUs.

`Layout` is what solving.py works on; `Problem` (problem.py) adds what a policy states
its objective with.
"""

from __future__ import annotations

from functools import cached_property

import numpy as np
import scipy.sparse as sp

from ...allocation import Allocation
from ...rules.limits import limit_rows
from ..input.scheduling_problem import SchedulingProblem
from . import packing
from .affine import Affine
from .constraints import EntryRows, UserRows, compile_constraints
from .csr import csr


def _csr(data, indices, row_counts, shape) -> sp.csr_matrix:
    # int32 indices where they fit, as scipy would choose (given so, it need not scan and copy them)
    dtype = np.int32 if max(shape[1], len(data)) < 2**31 - 1 else np.int64
    indptr = np.zeros(len(row_counts) + 1, dtype=dtype)
    np.cumsum(row_counts, out=indptr[1:])
    return csr(np.asarray(data, dtype=float), np.asarray(indices, dtype=dtype), indptr, shape)


def _incidence(members, Tk, var_row, var_col, M):
    """(job x variable) incidence and member throughputs, built directly in CSR order; single-job
    rows leave the incidence to `Layout.job_rows` (the throughputs' pattern, built when needed)."""
    n = len(var_row)
    if members.shape[1] == 1:  # single-job rows: variables already come grouped by job
        counts = np.bincount(members[var_row, 0], minlength=M)
        return None, _csr(Tk[var_row, var_col, 0], np.arange(n), counts, (M, n))
    mem_v = members[var_row]
    thr_v = Tk[var_row, var_col]
    keep = mem_v >= 0
    vidx = np.broadcast_to(np.arange(n)[:, None], mem_v.shape)
    rows, cols = mem_v[keep], vidx[keep]
    return (sp.csr_matrix((np.ones(len(rows)), (rows, cols)), shape=(M, n)),
            sp.csr_matrix((thr_v[keep], (rows, cols)), shape=(M, n)))


class Vars:
    """The allocation's variables: each one's row, column, pool, GPUs and (single-job rows) job.
    This is all that finishing a solve reads (solving.repair, fill_leftover, spread_over_types,
    `allocation`): a `Layout` derives it from the problem along with the LP's rows; a warm solve
    whose rows are kept per job builds just this (session.JobGrid)."""

    input: SchedulingProblem
    members: np.ndarray      # (rows, max members) job indices of each row, -1 padded
    row_partner: np.ndarray  # (rows,) partner class of a row (packing.py), -1: none
    row_scale: np.ndarray    # (rows,) GPUs each row uses
    capacity: np.ndarray     # (pools,) GPUs
    var_row: np.ndarray
    var_col: np.ndarray
    var_pool: np.ndarray
    var_gpus: np.ndarray
    var_job: np.ndarray | None   # None: rows of several jobs
    num_vars: int
    constraints: tuple | list = ()   # the policy's own (a Layout's list)
    constraint_names: tuple | list = ()   # each one's name (add_constraint's, else "constraint i")
    limit_block = None               # quota rows (a Layout's, with input.limits)
    packing = None                   # partner classes (a Layout's, with input.pairs)

    def job_time(self, x: np.ndarray) -> np.ndarray:
        """`job_rows @ x`: each job's time share. Summed in variable order, as the matrix
        product does, so the two agree to the bit; without building a matrix product."""
        if self.var_job is None:
            return self.job_rows @ x
        return np.bincount(self.var_job, weights=x, minlength=self.num_jobs)

    def pool_use(self, x: np.ndarray) -> np.ndarray:
        """`capacity_rows @ x`: GPUs used of each pool, summed in variable order (bit for bit)."""
        return np.bincount(self.var_pool, weights=self.var_gpus * x, minlength=len(self.capacity))

    @property
    def single_var(self) -> np.ndarray:
        """Mask of the variables whose row is one job running alone."""
        if self.members.shape[1] > 1:
            return (self.members[self.var_row, 1:] < 0).all(axis=1)
        return self.row_partner[self.var_row] < 0

    @property
    def num_jobs(self) -> int:
        return self.input.num_jobs

    def fill_gains(self) -> np.ndarray:
        """Per variable: its job's throughput there relative to the job's fastest type (the order
        of solving.fill_leftover)."""
        raise NotImplementedError

    def allocation(self, x: np.ndarray) -> Allocation:
        if self.packing is not None:
            return packing.decompose(self, x)
        inp = self.input
        rows_used = self.members.shape[0]
        values = np.zeros((rows_used, len(inp.worker_types)))
        values[self.var_row, self.var_col] = np.minimum(np.maximum(x, 0.0), 1.0)
        if inp.combinations is None:   # one row per job, in job order
            labels = list(zip(inp.job_ids))
        else:
            labels = [tuple(inp.job_ids[m] for m in row if m >= 0) for row in self.members]
        return Allocation(labels, list(inp.worker_types), values, self.row_scale.astype(float),
                          inp.capacity.astype(float), inp.pools)


class Layout(Vars):
    """Variables and validity constraints for one scheduling problem."""

    def __init__(self, inp: SchedulingProblem):
        self.input = inp
        T = inp.throughputs
        M, J = T.shape
        cap = inp.capacity
        if inp.pools is None:
            self.col_pool = np.arange(J)
            self.capacity = cap.astype(float)
        else:
            self.col_pool = np.asarray(inp.pools, dtype=int)
            self.capacity = np.zeros(self.col_pool.max() + 1 if J else 0)
            self.capacity[self.col_pool] = cap
        self.extra_rows: list = []   # structural (A, lo, hi) rows, e.g. pair balance
        self.packing = None
        self.constraints: list = []
        self.constraint_names: list[str] = []
        self._user_rows: UserRows | None = None
        self._cvx_variable = None
        if inp.pairs is not None:
            packing.build(self, inp)
            self._finish_layout(T, cap)
            return
        if inp.combinations is None:   # one row per job (the simulator's case: kept to few numpy calls)
            self.members = np.arange(M)[:, None]
            self.row_partner = np.full(M, -1)
            sf = inp.scale_factors
            self.row_scale = sf.copy()
            usable = (T > 0) & (sf[:, None] <= cap[None, :])
            self.var_row, self.var_col = np.nonzero(usable)
            n = self.num_vars = len(self.var_row)
            self.var_share = np.ones(n)
            self.row_gpus = self.row_scale * (1.0 if inp.counts is None else inp.counts)
            thr = _csr(T[self.var_row, self.var_col], np.arange(n), np.bincount(self.var_row, minlength=M), (M, n))
            self.thr = Affine(self, thr)
            self._finish_layout(T, cap, usable)
            return
        width = max(len(m) for m in inp.combinations.members)
        members = np.full((len(inp.combinations.members), width), -1)
        for k, mem in enumerate(inp.combinations.members):
            members[k, :len(mem)] = mem
        Tk = inp.combinations.throughputs
        present = members >= 0
        self.members = members
        self.row_partner = np.full(len(members), -1)
        self.row_scale = inp.scale_factors[members[:, 0]]
        usable = np.where(present[:, None, :], Tk > 0, True).all(axis=2)   # every member can run there
        usable &= self.row_scale[:, None] <= cap[None, :]
        self.var_row, self.var_col = np.nonzero(usable)
        n = len(self.var_row)
        self.num_vars = n
        self.var_share = np.ones(n)
        self.row_gpus = self.row_scale * (1.0 if inp.counts is None else inp.counts[members[:, 0]])
        job_rows, thr = _incidence(members, Tk, self.var_row, self.var_col, M)
        if job_rows is not None:
            self.job_rows = job_rows
        self.thr = Affine(self, thr)
        self._finish_layout(T, cap)

    def _finish_layout(self, T: np.ndarray, cap: np.ndarray, runnable: np.ndarray | None = None) -> None:
        # a class row (see SchedulingProblem.job_classes) uses its GPUs once per member job;
        # a partner variable (packing.py) pays for half of its pair's GPUs
        self.var_pool = self.col_pool[self.var_col]
        self.var_gpus = self.row_gpus[self.var_row] * self.var_share
        # the one job each variable's time counts for (None: rows of several jobs, Combinations)
        self.var_job = self.members[self.var_row, 0] if self.members.shape[1] == 1 else None
        self._normalizers(T, cap, runnable)
        # quotas and labelled servers (gavel_ng.rules): rows of every LP built on this layout
        self.limit_block = limit_rows(self) if self.input.limits is not None else None
        if self.limit_block is not None:
            self.extra_rows.append(self.limit_block)

    def fill_gains(self) -> np.ndarray:
        job = self.members[self.var_row, 0]
        A = self.thr.A   # column sums (a single row's coefficient is its job's throughput there), in A's row order
        T = np.bincount(A.indices, weights=A.data, minlength=self.num_vars)
        return T / np.maximum(self.thr_fastest[job], 1e-300)

    @cached_property
    def job_rows(self) -> sp.csr_matrix:
        """(job x variable) incidence, for single-job rows: `thr`'s pattern (one entry per variable,
        in its job's row). Other layouts set it when built; the warm path never needs it."""
        A = self.thr.A
        return csr(np.ones(A.nnz), A.indices, A.indptr, A.shape)

    @cached_property
    def capacity_rows(self) -> sp.csr_matrix:
        """(pool x variable): the GPUs of its pool each variable uses, in variable order."""
        by_pool = np.argsort(self.var_pool, kind="stable")
        P = len(self.capacity)
        return _csr(self.var_gpus[by_pool], by_pool, np.bincount(self.var_pool, minlength=P), (P, self.num_vars))

    # ----- normalizers (Gavel §3.1) ----------------------------------------------
    def _normalizers(self, T: np.ndarray, cap: np.ndarray, runnable: np.ndarray | None = None) -> None:
        """thr_equal and thr_fastest; `runnable`: the (job, column) mask where the caller has it."""
        inp = self.input
        M = inp.total_jobs
        if runnable is None:
            runnable = (T > 0) & (inp.scale_factors[:, None] <= cap[None, :])
        if self.input.pools is None:   # every column its own pool: every row of x_equal is the same
            self._iso_usable = runnable
            eq = cap / M if len(T) else cap * 0.0
            x_equal = eq / max(eq.sum(), 1e-12)
        else:   # one column per capacity pool counts: the job's fastest column of the pool
            primary = self._pool_primary(T)
            self._iso_usable = runnable & primary
            x_equal = np.zeros((0, len(cap)))
            if len(T):
                eq = np.where(primary, cap[None, :] / M, 0.0)
                x_equal = eq / max(eq.sum(axis=1).max(), 1e-12)
        self.thr_equal = (T * x_equal).sum(axis=1)
        self.thr_fastest = np.where(runnable, T, 0.0).max(axis=1, initial=0.0)

    @cached_property
    def x_isolated(self) -> np.ndarray:
        """(M, J) X_isolated: 1/n of every type a job can run on (what sharing incentive compares to)."""
        inp = self.input
        cap = inp.capacity
        if inp.num_jobs == 0:
            return np.zeros((0, len(cap)))
        return isolated_shares(self._iso_usable, inp.scale_factors, cap, inp.total_jobs)

    @cached_property
    def thr_isolated(self) -> np.ndarray:
        """Each job's throughput under X_isolated."""
        return (self.input.throughputs * self.x_isolated).sum(axis=1)

    def _pool_primary(self, T: np.ndarray) -> np.ndarray:
        """(M, J): True at each job's fastest column within every pool (first on ties)."""
        prim = np.zeros(T.shape, bool)
        for pool in np.unique(self.col_pool):
            cols = np.flatnonzero(self.col_pool == pool)
            prim[np.arange(len(T)), cols[np.argmax(T[:, cols], axis=1)]] = True
        return prim

    @property
    def cvx_variable(self):
        if self._cvx_variable is None:
            import cvxpy as cp

            self._cvx_variable = cp.Variable(self.num_vars, name="X")
        return self._cvx_variable

    def add_constraint(self, constraint, name: str | None = None) -> None:
        """A linear constraint built from `p.thr` etc., or any cvxpy constraint; `name` is what reports
        call it (the simulator's summary: "constraint i" unless named).

        Whatever is added holds in the returned allocation on every solver path: a
        constraint affine in the allocation becomes LP rows (HiGHS, the leftover fill and
        the second phase see it), any other sends the problem to cvxpy (constraints.py).
        Its rows also bound the schedule that runs (constraints.entry_rows)."""
        self.constraint_names.append(str(name) if name is not None else f"constraint {len(self.constraints)}")
        self.constraints.append(constraint)
        self._user_rows = None

    @property
    def user_rows(self) -> UserRows:
        """The policy's constraints compiled to LP rows, plus those that are not linear."""
        if self._user_rows is None:   # a cvxpy constraint over x exists only if x was created
            self._user_rows = compile_constraints(self.constraints, self._cvx_variable, self.num_vars, self.var_row)
        return self._user_rows

    def validity_rows(self, user: bool = True) -> tuple[sp.csr_matrix, np.ndarray, np.ndarray]:
        """Rows of `lo <= A x <= hi`: validity, structural extra rows and (with `user`) the
        policy's linear constraints."""
        rows = list(self.extra_rows)
        if user and self.constraints:
            u = self.user_rows
            rows.append((u.A, u.lo, u.hi))
            if u.alone_over is not None:   # entries no round that keeps a packing side can run: no time
                rows.append((sp.csr_matrix(u.alone_over[None, :].astype(float)), np.full(1, -np.inf), np.zeros(1)))
        blocks = [self.job_rows, self.capacity_rows] + [a for a, _, _ in rows]
        lo = [np.full(self.num_jobs, -np.inf), np.full(len(self.capacity), -np.inf)] + [b for _, b, _ in rows]
        hi = [np.ones(self.num_jobs), self.capacity.astype(float)] + [b for _, _, b in rows]
        return sp.vstack(blocks, format="csr"), np.concatenate(lo), np.concatenate(hi)

    def entry_rows(self, allocation) -> EntryRows | None:
        """The policy's linear rows over `allocation`'s entries (its rows and columns), or None when it
        added none. A single job's entry has its variable's coefficients; a concrete pair of jobs (space
        sharing by partner classes, packing.py) has the sum of its two members' partner variables, each
        of which the pair's time counts in. Constraints that are not linear have no rows here."""
        if not self.constraints:
            return None
        rows = self.user_rows
        if not rows.num_rows:
            return None
        J = len(self.input.worker_types)
        K = len(allocation.rows)
        if self.packing is None:   # allocation rows are the LP's rows, in order
            cell = self.var_row * J + self.var_col
            C = sp.csr_matrix((rows.A.data, cell[rows.A.indices], rows.A.indptr), shape=(rows.num_rows, K * J))
        else:
            C = rows.A @ self._pair_map(allocation, K, J)
        C = sp.csr_matrix(C)
        C.sum_duplicates()
        names = self.constraint_names
        return EntryRows(C, rows.lo.copy(), rows.hi.copy(), [names[i] for i in rows.origin])

    def _pair_map(self, allocation, K: int, J: int) -> sp.csr_matrix:
        """(variables x entries): 1 where an entry's time counts in a variable (a single job's own, or
        each member's partner variable of a concrete pair)."""
        codes = var_codes(self)
        order = np.argsort(codes)
        index = {j: m for m, j in enumerate(self.input.job_ids)}
        cls = self.input.pairs.job_class
        C1 = self.input.pairs.num_classes + 1
        var, entry = [], []
        for k, row in enumerate(allocation.rows):
            members = [index[j] for j in row]
            if len(members) == 1:
                own = [(members[0], -1)]
            else:
                a, b = members
                own = [(a, int(cls[b])), (b, int(cls[a]))]
            for m, partner in own:
                want = (m * C1 + partner + 1) * J + np.arange(J)
                pos = np.clip(np.searchsorted(codes[order], want), 0, max(len(codes) - 1, 0))
                hit = codes[order][pos] == want if len(codes) else np.zeros(J, bool)
                var.extend(order[pos[hit]].tolist())
                entry.extend((k * J + np.flatnonzero(hit)).tolist())
        return sp.csr_matrix((np.ones(len(var)), (var, entry)), shape=(self.num_vars, K * J))

    def fallback_x(self) -> np.ndarray:
        """The isolated allocation (1/n of every type): always valid."""
        x = np.zeros(self.num_vars)
        is_single = self.single_var
        jobs = self.members[self.var_row[is_single], 0]
        x[is_single] = self.x_isolated[jobs, self.var_col[is_single]]
        return x


def isolated_shares(usable: np.ndarray, scale_factors: np.ndarray, capacity: np.ndarray,
                    total_jobs: int | None = None) -> np.ndarray:
    """(M, J) the isolated allocation: each job 1/n of every type it can use (`usable`), n = `total_jobs` (default
    M), its row scaled down to at most all of its time. Always valid, whatever the policy: what sharing incentive
    compares to (Layout.x_isolated), and the one fallback of a solve that failed (Layout.fallback_x) or raised
    (allocator.PolicyAllocator)."""
    n = len(scale_factors) if total_jobs is None else total_jobs
    if n == 0:
        return np.zeros((len(scale_factors), len(capacity)))
    iso = np.where(usable, capacity[None, :] / (n * np.asarray(scale_factors, dtype=float)[:, None]), 0.0)
    return iso / np.maximum(iso.sum(axis=1, keepdims=True), 1.0)


def var_codes(p: Layout, job_map: np.ndarray | None = None) -> np.ndarray:
    """One integer per variable naming (job, partner class or none, column), so that the
    variables of two problems over the same columns and pair classes can be matched."""
    C = 0 if p.input.pairs is None else p.input.pairs.num_classes
    J = len(p.input.worker_types)
    job = p.members[p.var_row, 0]
    if job_map is not None:
        job = job_map[job]
    return (job.astype(np.int64) * (C + 1) + p.row_partner[p.var_row] + 1) * J + p.var_col


def map_x(src: Layout, x: np.ndarray, dst: Layout, dst_to_src_job: np.ndarray | None = None,
          out: np.ndarray | None = None) -> np.ndarray:
    """Copy x from src's variables onto dst's matching ones (by job, partner class, column)."""
    src_codes = var_codes(src)
    order = np.argsort(src_codes)
    dst_codes = var_codes(dst, dst_to_src_job)
    pos = np.clip(np.searchsorted(src_codes[order], dst_codes), 0, max(len(src_codes) - 1, 0))
    hit = (src_codes[order][pos] == dst_codes) if len(src_codes) else np.zeros(len(dst_codes), bool)
    out = np.zeros(dst.num_vars) if out is None else out
    out[hit] = x[order[pos[hit]]]
    return out
