"""The policy's own constraints in the schedule that runs: kept per round where they can be, measured always.

A policy may add constraints to its allocation (`p.add_constraint`: a cost budget, a cap on one
type's GPUs, a quota). The allocator hands them to the mechanism as rows over the allocation's
entries, `a_r . y <= b_r`, where y[k * J + j] is the share of a round that row k runs on column j
(`Limits`, plain numpy and scipy: the mechanism knows nothing of how they were stated). A round's
schedule is a set of entries each holding its GPUs for part of the round, so its own `y` is 0 or 1
per entry at any instant.

* A *packing* row (every coefficient >= 0: a budget, a cap) bounds what running entries use up,
  like a capacity. Every step that hands out GPUs checks it as it checks free GPUs, with a
  `Tally` of what the entries holding GPUs at that moment use: the round's greedy selection,
  its backfill of jobs the allocation does not know yet, the refill after server rules, and
  mid-round backfill (in the simulator and on a cluster alike, gavel_ng.mechanism.backfill). So
  at every instant of every round, sum_e a_r[e] over the running entries e is at most b_r: the
  round keeps the row, and so does any average of rounds. A job the last solve did not see has
  no coefficients, so while a packing row applies it is not backfilled: it waits for the next
  solve (the simulator re-solves at every arrival unless `--min-solve-interval` says otherwise).
* Discrete GPUs: an entry whose own coefficient exceeds b_r (8 V100s under a budget below their
  price, a job under a cap on its throughput below what it does anywhere) cannot run in any round
  that keeps the row. Where its job can run elsewhere within the row, the LP gives it no time
  (policies.constraints.UserRows.alone_over). Where it cannot, the entry runs on credit: only
  as the row's sole user at that moment (the smallest excess running it can cause), and only
  while what earlier rounds left unused of the row (the meter's sum of b_r - a_r . y over the
  rounds the row applied to, and the time nothing ran: `Meter.idle`) covers its excess. The row
  then holds on average over the run, a round exceeds it by at most that entry's excess, and the
  report shows that excess.
* Any other row (a negative coefficient: a lower bound such as a job's minimum throughput, or a
  row that mixes signs) cannot hold in every round: a job that does not run this round has no
  throughput this round. The allocation keeps it, and the mechanism's priorities deliver the
  allocation over rounds; it is measured, not enforced.

`Meter` measures every row on the rounds as they ran (RoundMechanism.record): per round, the
round's `y` is each entry's seconds held over the round's length; the excess is `a_r . y - b_r`.
It keeps, per constraint name, the largest excess of any round and the largest time-averaged
excess of any row over the run (a row is followed across solves by its position within its
constraint, or by its job when it concerns one job only).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import numpy as np
import scipy.sparse as sp

TOL = 1e-9   # relative slack on a bound (rounding in sums of coefficients), times max(1, |b|)


@dataclass(frozen=True)
class Limits:
    """Rows `A y <= b` over an allocation's K x J entries (y row-major: entry (k, j) at k * J + j)."""

    A: sp.csr_matrix            # (R, K * J)
    b: np.ndarray               # (R,)
    names: tuple[str, ...]      # per row: the constraint it comes from
    keys: tuple                 # per row: what follows it across solves (Meter)
    packing: np.ndarray         # (R,) bool: every coefficient >= 0, kept per round
    J: int

    @classmethod
    def from_bounds(cls, C, lo: np.ndarray, hi: np.ndarray, names: list[str], rows: list[tuple[int, ...]],
                    J: int) -> Limits | None:
        """From `lo <= C y <= hi` (either side may be infinite; an equality gives both sides): one
        row per finite side, written as `<=`. `rows`: the allocation's rows (job ids), for the keys."""
        C = sp.csr_matrix(C, dtype=float)
        lo, hi = np.asarray(lo, dtype=float), np.asarray(hi, dtype=float)
        up, down = np.flatnonzero(np.isfinite(hi)), np.flatnonzero(np.isfinite(lo))
        if not len(up) and not len(down):
            return None
        if not len(down) and len(up) == C.shape[0]:   # (the common case: every row a bound above)
            A = C
        else:
            A = sp.vstack([C[up], -C[down]], format="csr")
        b = np.concatenate([hi[up], -lo[down]])
        origin = np.concatenate([up, down])
        row_of = np.repeat(np.arange(A.shape[0]), np.diff(A.indptr))
        negative = np.bincount(row_of, weights=A.data < 0, minlength=A.shape[0]) > 0
        # a row that concerns one job follows it; any other follows its position among its constraint's
        row_first = np.full(A.shape[0], -1)     # the allocation row of each row's first entry
        one_row = np.zeros(A.shape[0], bool)    # all its entries are of that allocation row
        filled = np.diff(A.indptr) > 0
        if filled.any():
            entry_row = A.indices // J
            starts = A.indptr[:-1][filled]
            row_first[filled] = entry_row[starts]
            one_row[filled] = np.minimum.reduceat(entry_row, starts) == np.maximum.reduceat(entry_row, starts)
        position: dict[tuple[str, str], int] = {}
        keys = []
        for r, i in enumerate(origin.tolist()):
            name, side = names[i], "<=" if r < len(up) else ">="
            if one_row[r] and len(rows[row_first[r]]) == 1:
                keys.append((name, side, "job", rows[row_first[r]][0]))
            else:
                keys.append((name, side, "row", position.setdefault((name, side), 0)))
                position[(name, side)] += 1
        return cls(A, b, tuple(names[i] for i in origin.tolist()), tuple(keys), ~negative, J)

    @cached_property
    def by_entry(self) -> tuple[list[int], list[int], list[float], list[float]]:
        """The packing rows entry by entry, for a Tally: per entry (row * J + column) the span of its rows
        in the next two lists (`ptr`), their indices among the packing rows and its coefficients; and
        each packing row's bound, with the slack TOL gives it."""
        P = np.flatnonzero(self.packing)
        cols = sp.csc_matrix(self.A[P])
        b = self.b[P]
        return (cols.indptr.tolist(), cols.indices.tolist(), cols.data.tolist(),
                (b + TOL * np.maximum(1.0, np.abs(b))).tolist())

    @property
    def keeps_per_round(self) -> bool:
        """Some row is packing: the mechanism checks entries against it."""
        return bool(self.packing.any())

    def tally(self, credit: np.ndarray | None = None) -> Tally | None:
        """A fresh instant's tally of the packing rows (None: there are none); `credit` (R,): what
        earlier rounds left unused of each row (Meter.credit; None: nothing)."""
        return Tally(self, credit) if self.keeps_per_round else None


class Tally:
    """What the entries holding GPUs at one instant use of each packing row, and whether one more fits.

    `fits(row, col)` and `take(row, col)` for an allocation entry; a job the allocation does not
    know (row -1) has no coefficients and never fits. An entry over a row's bound by itself fits
    only on credit (module docstring)."""

    def __init__(self, limits: Limits, credit: np.ndarray | None = None):
        self.J = limits.J
        self._ptr, self._rows, self._coef, self.bound = limits.by_entry   # (shared, never written)
        self.left = list(self.bound)              # what is still free of each row
        self.credit = [0.0] * len(self.bound) if credit is None \
            else np.asarray(credit, dtype=float)[limits.packing].tolist()

    def fits(self, row: int, col: int) -> bool:
        if row < 0:
            return False
        cell = row * self.J + col
        left, rows, coef = self.left, self._rows, self._coef
        for i in range(self._ptr[cell], self._ptr[cell + 1]):
            r, c = rows[i], coef[i]
            if c > left[r] and not (c > self.bound[r] and left[r] >= self.bound[r]
                                    and c - self.bound[r] <= self.credit[r]):
                return False   # (over by itself: fits only with the row unused and enough credit)
        return True

    def take(self, row: int, col: int) -> None:
        cell = row * self.J + col
        left, rows, coef = self.left, self._rows, self._coef
        for i in range(self._ptr[cell], self._ptr[cell + 1]):
            r, c = rows[i], coef[i]
            if c > self.bound[r]:
                self.credit[r] -= c - self.bound[r]
            left[r] -= c

    def admit(self, row: int, col: int) -> bool:
        """fits, then take: for a step that checks nothing else after this."""
        if not self.fits(row, col):
            return False
        self.take(row, col)
        return True


@dataclass
class ConstraintReport:
    """One constraint as measured: the largest excess of any of its rows in any round, and the largest
    excess of a row's average over the rounds it applied to (both in the constraint's own units, e.g.
    $/h for a budget over `p.cost_per_hour`; 0 or less: kept)."""

    per_round: bool            # every row of it was kept round by round (packing)
    rounds: int = 0            # rounds measured while it applied
    max_round_excess: float = -np.inf
    run_excess: float = -np.inf

    def as_dict(self) -> dict:
        return {"enforced": "every round" if self.per_round else "on average", "rounds": self.rounds,
                "max_round_excess": _clean(self.max_round_excess), "run_excess": _clean(self.run_excess)}


class Meter:
    """The rows measured on every round as it ran (module docstring)."""

    def __init__(self):
        self.reports: dict[str, ConstraintReport] = {}   # constraint name -> its report
        self._slot: dict = {}                            # row key -> its slot in the two arrays below
        self._rounds = np.zeros(0)                       # per slot: rounds measured
        self._excess = np.zeros(0)                       # per slot: sum of (a . y - b) over those rounds
        self._seen: tuple | None = None                  # (limits, slots, names, their index per row)

    def observe(self, limits: Limits, y: np.ndarray) -> None:
        """One round, `y` its share of the round on each entry (`round_shares`)."""
        over = limits.A @ y - limits.b
        small = over <= TOL * np.maximum(1.0, np.abs(limits.b))   # rounding in the sums: kept
        over[small] = np.minimum(over[small], 0.0)
        slots, names, name_of = self._rows(limits)
        np.add.at(self._rounds, slots, 1.0)
        np.add.at(self._excess, slots, over)
        worst = np.full(len(names), -np.inf)
        np.maximum.at(worst, name_of, over)
        for name, w in zip(names, worst.tolist()):
            rep = self.reports[name]
            rep.rounds += 1
            rep.max_round_excess = max(rep.max_round_excess, w)

    def idle(self, limits: Limits, rounds: float) -> None:
        """Nothing ran for `rounds` of a round while the rows applied (jobs waited): what the rows allow
        goes unused, and counts in the run's averages and the credit, not as rounds measured."""
        slots, _, _ = self._rows(limits)
        np.add.at(self._rounds, slots, rounds)
        np.add.at(self._excess, slots, -limits.b * rounds)

    def _rows(self, limits: Limits) -> tuple[np.ndarray, list[str], np.ndarray]:
        if self._seen is None or self._seen[0] is not limits:
            self._seen = (limits, *self._index(limits))
        return self._seen[1:]

    def _index(self, limits: Limits) -> tuple[np.ndarray, list[str], np.ndarray]:
        """Slots of a new allocation's rows (a row key seen before keeps its slot), and its constraints."""
        for key in limits.keys:
            self._slot.setdefault(key, len(self._slot))
        grow = len(self._slot) - len(self._rounds)
        if grow > 0:
            self._rounds = np.concatenate([self._rounds, np.zeros(grow)])
            self._excess = np.concatenate([self._excess, np.zeros(grow)])
        names = list(dict.fromkeys(limits.names))
        index = {n: i for i, n in enumerate(names)}
        name_of = np.fromiter((index[n] for n in limits.names), np.int64, len(limits.names))
        for i, name in enumerate(names):
            rep = self.reports.setdefault(name, ConstraintReport(per_round=True))
            rep.per_round &= bool(limits.packing[name_of == i].all())
        return np.fromiter((self._slot[k] for k in limits.keys), np.int64, len(limits.keys)), names, name_of

    def credit(self, limits: Limits) -> np.ndarray:
        """(R,) per row of `limits`: what the rounds measured so far left unused of it (0 at least)."""
        slots = self._rows(limits)[0]   # (first: it may grow the arrays)
        return np.maximum(-self._excess[slots], 0.0)

    def report(self) -> dict[str, dict]:
        """Per constraint name, what ConstraintReport.as_dict says (empty: the policy added none)."""
        for key, slot in self._slot.items():   # (a key's first item is its constraint's name)
            if self._rounds[slot]:
                rep = self.reports[key[0]]
                rep.run_excess = max(rep.run_excess, float(self._excess[slot] / self._rounds[slot]))
        return {name: rep.as_dict() for name, rep in self.reports.items()}


def round_shares(limits: Limits, cells: np.ndarray, held: np.ndarray, round_seconds: float) -> np.ndarray:
    """A round's y: entries at `cells` (row * J + column; -1: a job the allocation does not know, in
    no row) held their GPUs `held` seconds of a round of `round_seconds`."""
    mine = cells >= 0
    y = np.zeros(limits.A.shape[1])
    np.add.at(y, cells[mine], held[mine] / round_seconds)
    return y


def _clean(v: float) -> float:
    """An excess for a report: 0 where it was kept (no round went over), else rounded to 6 digits."""
    return 0.0 if not np.isfinite(v) or v <= 0 else float(f"{v:.6g}")
