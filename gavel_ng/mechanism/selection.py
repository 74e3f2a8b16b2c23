"""Greedy selection of (row, type) entries for one round (Gavel Algorithm 1).

Walk the entries best first; take one if its type still has enough free GPUs and none of
its jobs is already running this round (a job appears in at most one taken row, also
inside combinations). Greedy is allowed to be sub-optimal in a round: priorities
correct it over the next rounds.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np


def greedy_select(order: np.ndarray, num_types: int, row_members: list[tuple[int, ...]], row_sf: list[int],
                  free: list[int], busy: set[int], row_single: list[int] | None = None,
                  col_pool: np.ndarray | None = None,
                  admit: Callable[[tuple[int, ...], int, int], bool] | None = None) -> list[tuple[int, int]]:
    """Taken (row, column) pairs in the order taken. `free` and `busy` are updated in place.

    `row_single[r]` is row r's job when it has one member, else -1 (a fast path: most
    rows are single jobs). `col_pool[j]` is the GPU pool (index into `free`) column j
    draws on (placement-sensitive allocations: `TYPE` and `TYPE_unconsolidated` share the
    type's GPUs); None: column j is pool j.
    `admit(members, pool, gpus)`, asked last for an entry that could otherwise be taken, may
    refuse it (entity quotas per round, gavel_ng.rules): the walk goes on to the next entries.
    """
    rows, cols = greedy_columns(order, num_types, row_members, row_sf, free, busy, row_single, col_pool, admit)
    return list(zip(rows, cols))


def greedy_columns(order: np.ndarray, num_types: int, row_members: list[tuple[int, ...]], row_sf: list[int],
                   free: list[int], busy: set[int], row_single: list[int] | None = None,
                   col_pool: np.ndarray | None = None, admit: Callable[[tuple[int, ...], int, int], bool] | None = None,
                   singles: bool | None = None, smallest: int | None = None,
                   limit=None) -> tuple[list[int], list[int]]:
    """greedy_select's choice as two lists, taken rows and their columns (what the mechanism builds its
    entries from). `singles` (every row one job) and `smallest` (min of row_sf) may be given by a
    caller that keeps them, instead of being found again from the lists each round. `limit`: a
    mechanism.limits.Tally of the policy's packing rows, checked like free GPUs (None: none)."""
    if row_single is None:
        row_single = [r[0] if len(r) == 1 else -1 for r in row_members]
    left = sum(free)
    if smallest is None:
        smallest = min(row_sf) if row_sf else 1
    rows = (order // num_types).tolist()
    cols = order % num_types
    types = cols.tolist()
    if singles is None:
        singles = min(row_single, default=0) >= 0
    if col_pool is None and admit is None and limit is None and singles:
        return _select_singles(rows, types, row_sf, row_single, free, busy, left, smallest)
    pools = types if col_pool is None else np.asarray(col_pool)[cols].tolist()
    taken_rows: list[int] = []
    taken_cols: list[int] = []
    for r, j, q in zip(rows, types, pools):
        s = row_sf[r]
        if free[q] < s:
            continue
        m = row_single[r]
        members = row_members[r]
        if m >= 0:
            if m in busy:
                continue
        elif any(x in busy for x in members):
            continue
        if limit is not None and not limit.fits(r, j):
            continue
        if admit is not None and not admit(members, q, s):
            continue
        if limit is not None:
            limit.take(r, j)
        busy.update(members)
        free[q] -= s
        left -= s
        taken_rows.append(r)
        taken_cols.append(j)
        if left < smallest:
            break
    return taken_rows, taken_cols


def _select_singles(rows: list[int], types: list[int], row_sf: list[int], row_single: list[int], free: list[int],
                    busy: set[int], left: int, smallest: int) -> tuple[list[int], list[int]]:
    """greedy_columns' loop when every row is one job and columns are the pools (the common case).
    A row is then its job, so `busy` is looked at once per row (`done`) and updated once at the
    end. It stops once every row in the order runs (with GPUs to spare, e.g. at low load, the rest
    of the order would only be skipped entry by entry)."""
    done = [m in busy for m in row_single] if busy else [False] * len(row_single)
    taken_rows: list[int] = []
    taken_cols: list[int] = []
    rows_left = len(set(rows)) - (sum(done[r] for r in set(rows)) if busy else 0)
    if rows_left <= 0:
        return taken_rows, taken_cols
    for r, j in zip(rows, types):
        if done[r]:
            continue
        s = row_sf[r]
        if free[j] < s:
            continue
        done[r] = True
        free[j] -= s
        left -= s
        taken_rows.append(r)
        taken_cols.append(j)
        rows_left -= 1
        if left < smallest or not rows_left:
            break
    busy.update(map(row_single.__getitem__, taken_rows))
    return taken_rows, taken_cols


def greedy_ones(rows: list[int], cols: list[int], free: list[int], num_rows: int,
                all_rows: int) -> tuple[list[int], list[int]]:
    """greedy_columns when every row is one job on one GPU and columns are the pools: `rows` and
    `cols` are the order's entries (rows below `all_rows`), `num_rows` the distinct rows among them.
    No `busy` set: a row is its job, and nothing else runs yet. `free` is updated in place."""
    done = [False] * all_rows
    taken_rows: list[int] = []
    taken_cols: list[int] = []
    last = min(sum(free), num_rows)   # entries it can take: one per GPU, one per row
    if last <= 0:
        return taken_rows, taken_cols
    take_row, take_col = taken_rows.append, taken_cols.append
    n = 0
    for r, j in zip(rows, cols):
        if done[r] or not free[j]:
            continue
        done[r] = True
        free[j] -= 1
        take_row(r)
        take_col(j)
        n += 1
        if n == last:
            break
    return taken_rows, taken_cols


def place_new_jobs(jobs: list[int], job_sf: list[int], preference: np.ndarray, free: list[int],
             busy: set[int], admit: Callable[[tuple[int, ...], int, int], bool] | None = None) -> list[tuple[int, int]]:
    """Free GPUs to jobs the allocation does not know yet (arrived after the last solve).

    Returns (position in `jobs`, type) pairs.

    Each job, in the given order, goes to the type it runs fastest on among those with
    room (and, with `admit`, that its quotas allow), so a new job never waits for the next
    solve while GPUs sit idle.
    """
    taken: list[tuple[int, int]] = []
    for i, job in enumerate(jobs):
        if job in busy:
            continue
        s = job_sf[i]
        fits = [(thr, j) for j, thr in enumerate(preference[i].tolist()) if free[j] >= s and thr > 0.0]
        fits.sort(key=lambda t: (-t[0], t[1]))   # fastest first, the lower type on ties
        best = next((j for _, j in fits if admit is None or admit((job,), j, s)), -1)
        if best >= 0:
            free[best] -= s
            busy.add(job)
            taken.append((i, best))
    return taken
