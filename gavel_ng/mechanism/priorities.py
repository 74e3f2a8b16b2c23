"""Priorities (Gavel §5): allocation divided by the fraction of each type's time received.

The fraction f[k, j] is row k's share of all time handed out on type j since the last
reset; an entry that should get time (X > 0) but got none yet ranks above all others.
"""

from __future__ import annotations

import numpy as np

EPS = 1e-9


def fractions(received: np.ndarray, totals: np.ndarray | None = None) -> np.ndarray:
    """f[k, j] = received[k, j] / total time handed out on type j (0 where none was)."""
    total = received.sum(axis=0) if totals is None else totals
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(total > 0, received / np.where(total > 0, total, 1.0), 0.0)


def priorities(X: np.ndarray, received: np.ndarray, totals: np.ndarray | None = None,
               never_served_factor: float | None = None) -> tuple[np.ndarray, np.ndarray]:
    """(priority, never_served) per (row, type); priority 0 where X is 0.

    With `never_served_factor` (the prototype's 1e9) an unserved entry's priority is
    X * factor instead of ranking first outright.
    """
    f = fractions(received, totals)
    positive = X > EPS
    never = positive & (received <= 0)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):  # decayed f may underflow
        p = np.where(positive & (f > 0), X / np.where(f > 0, f, 1.0), 0.0)
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
    keys = (flat, -X.ravel()[flat], -prio.ravel()[flat], ~never.ravel()[flat])
    return flat[np.lexsort(keys)]


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
