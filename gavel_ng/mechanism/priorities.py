"""Priorities (Gavel §5): allocation divided by the fraction of each type's time received.

The fraction f[k, j] is row k's share of all time handed out on type j since the last
reset; an entry that should get time (X > 0) but got none yet ranks above all others.
"""

from __future__ import annotations

import numpy as np

EPS = 1e-9


def fractions(received: np.ndarray, totals: np.ndarray | None = None) -> np.ndarray:
    """f[k, j] = received[k, j] / total time handed out on type j (0 where none was)."""
    return _shares(received, received.sum(axis=0) if totals is None else totals)


def _shares(received: np.ndarray, total: np.ndarray) -> np.ndarray:
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(total > 0, received / np.where(total > 0, total, 1.0), 0.0)


def priorities(X: np.ndarray, received: np.ndarray, totals: np.ndarray | None = None,
               never_served_factor: float | None = None) -> tuple[np.ndarray, np.ndarray]:
    """(priority, never_served) per (row, type); priority 0 where X is 0.

    With `never_served_factor` (the prototype's 1e9) an unserved entry's priority is
    X * factor instead of ranking first outright.
    """
    return entry_priorities(X, received, received.sum(axis=0) if totals is None else totals, never_served_factor)


def entry_priorities(X: np.ndarray, received: np.ndarray, total: np.ndarray,
                     never_served_factor: float | None = None) -> tuple[np.ndarray, np.ndarray]:
    """priorities() of any set of entries, `total` being each one's type total (broadcast): the
    mechanism computes them for its eligible entries only, a flat subset of the (row, type) grid."""
    positive = X > EPS
    never = positive & (received <= 0)
    if never_served_factor is None and total.min(initial=1.0) > 0:
        # every type has handed out time (each round but the first few): the same values in half the
        # array passes
        with np.errstate(divide="ignore", invalid="ignore", over="ignore", under="ignore"):
            f = received / total
            return np.divide(X, f, out=np.zeros(np.broadcast(X, f).shape), where=positive & (f > 0)), never
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):  # decayed f may underflow
        f = np.where(total > 0, received / np.where(total > 0, total, 1.0), 0.0)   # _shares, in one errstate
        served = f > 0
        p = np.where(positive & served, X / np.where(served, f, 1.0), 0.0)
    if never_served_factor is not None:
        p = np.where(never, X * never_served_factor, p)
        never = np.zeros_like(never)
    return p, never


def deficits(X: np.ndarray, received: np.ndarray, totals: np.ndarray | None = None) -> np.ndarray:
    """Seconds a row is behind its share of each type's time handed out so far."""
    return X * (received.sum(axis=0) if totals is None else totals) - received


def global_order(X: np.ndarray, prio: np.ndarray, never: np.ndarray, eligible: np.ndarray) -> np.ndarray:
    """Flat (row * J + type) indices of eligible entries, best first (Algorithm 1).

    Never-served entries first (larger allocation first), then by priority, then by
    allocation; remaining ties go to the lower row then type, so the order is deterministic.
    """
    flat = np.flatnonzero(eligible.ravel())
    return flat[rank_entries(flat, X.ravel()[flat], prio.ravel()[flat], never.ravel()[flat])]


def rank_entries(flat: np.ndarray, X: np.ndarray, prio: np.ndarray, never: np.ndarray) -> np.ndarray:
    """global_order's permutation of the entries `flat` (ascending, as np.flatnonzero gives them)
    given their X, priority and never-served flag. lexsort is stable, so the last tie (the lower
    flat index first) needs no key of its own."""
    return np.lexsort((-X, -prio, ~never))


def eligible_rank(X: np.ndarray | None, neg_x: np.ndarray, received: np.ndarray, total: np.ndarray,
                  never_served_factor: float | None = None, positive: bool | None = None,
                  by_x: bool = False) -> np.ndarray:
    """rank_entries of entries all of whose X > EPS (the mechanism's eligible ones), from their time
    received and their type's total: the same permutation in fewer passes, -X / f being -(X / f)
    exactly and `received > 0` the negated never-served flag. The entries come in flat order, or
    (`by_x`) sorted by -X and then flat index, which lets one stable sort by priority rank them: -X
    is the next key anyway, and the flat index the last. `X` (None: -neg_x) is -neg_x. `positive`:
    every type's total is > 0, where the caller knows it from the (few) types' totals; either way
    of ranking gives the same permutation, so it only picks the faster one."""
    if positive is None:
        positive = total.min(initial=1.0) > 0
    if never_served_factor is None and positive:
        # One key where three would do (a sort per key, every round): a never-served entry (received 0,
        # so f 0) gets -X / 0 = -inf, ahead of every served one, whose -X / f is finite. Where that
        # could fail, an f that underflows (to 0 while received > 0) or an -X / f that overflows,
        # numpy raises and the three keys decide.
        try:
            key = _served_keys(neg_x, received, total)
        except FloatingPointError:
            pass
        else:
            return key.argsort(kind="stable") if by_x else np.lexsort((neg_x, key))
        with np.errstate(divide="ignore", invalid="ignore", over="ignore", under="ignore"):
            f = received / total
            neg_prio = np.divide(neg_x, f, out=np.zeros(len(f)), where=f > 0)
        return np.lexsort((neg_x, neg_prio, received > 0))
    prio, never = entry_priorities(-neg_x if X is None else X, received, total, never_served_factor)
    return np.lexsort((neg_x, -prio, ~never))


@np.errstate(divide="ignore", invalid="ignore", over="raise", under="raise")
def _served_keys(neg_x: np.ndarray, received: np.ndarray, total: np.ndarray) -> np.ndarray:
    """-X / f per entry, -inf where f is 0; raises where f underflows or the quotient overflows
    (the decorator's error state costs less than a `with` block's, every round)."""
    return neg_x / (received / total)


def per_type_order(X: np.ndarray, prio: np.ndarray, received: np.ndarray, totals: np.ndarray,
                   eligible: np.ndarray, type_order: list[int]) -> np.ndarray:
    """The prototype's order: type by type, each by (priority, deficit, allocation) descending."""
    J = X.shape[1]
    d = deficits(X, received, totals)
    rank = np.empty(J, dtype=np.int64)
    rank[np.asarray(type_order, dtype=np.int64)] = np.arange(J)
    flat = np.flatnonzero(eligible.ravel())
    col = flat % J
    keys = (flat, -X.ravel()[flat], -d.ravel()[flat], -prio.ravel()[flat], rank[col])
    return flat[np.lexsort(keys)]
