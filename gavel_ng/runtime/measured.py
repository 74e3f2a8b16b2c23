"""Throughputs the policy sees: the configured table corrected by real measurements.

A measured (job type, scale factor, worker type) entry replaces the table's value. The
types a job type has not run on yet are scaled by how far its measurements are from the
table on the types it did run on (geometric mean of measured/table), so that a model
table and real measurements never mix on different scales: the table keeps the relative
speeds of the types, the measurements set the absolute level.

Pairs (space sharing) work the same way one level up: a measured in-pair rate of a job
type next to a partner type replaces the table's fraction of its isolated rate.

A job class the table lacks (a user's own `job_type`) has a row of its own, never another
class's: on each worker type its measured rate where it ran; else the rate its job file
declared (`throughputs`), scaled by how far its measurements are from its declaration; else
an estimate from the reference jobs whose speeds across types are most like its own (the
estimator's isolated model, gavel_ng.estimator.IsolatedModel: Gavel §4's similar jobs, with
the measured and declared rates as the new job's profile). With nothing measured or declared,
the reference jobs of its scale factor stand in on average.

What a job reports about its speed is evidence, not truth: each (class, worker type) keeps one
rate per source (a user, or a job that names none), and believes their consensus (`consensus`):
the median of three or more sources; of two, the median of them and the table's rate (or the
declared one); a single source of a table class only within SINGLE_SOURCE_BAND of the table's
rate. So one source that lies, or is simply wrong, moves a table class at most 4x while it is
alone, and not at all once two others agree (docs/deploy.md, Security). The cost: a class the
table gets wrong by more than 4x is believed at 4x until a second user's job of it measured. A
class of a user's own is that user's word either way (they declared its rates too): its single
source is believed as measured.
"""

from __future__ import annotations

import logging
import math

import numpy as np

from ..pairs import PairTable
from ..throughputs import JobKey, ThroughputTable

log = logging.getLogger(__name__)
MIN_WEIGHT = 0.3     # weight of a new sample once a few are in (exponential moving average)
SINGLE_SOURCE_BAND = 4.0   # one source alone moves a class at most this factor from its table (or declared) rate
SOURCES_KEPT = 16          # sources kept per (class, worker type): the most recently heard
LEGACY_SOURCE = "stored"   # a state written before sources were kept: its rate counts as one source

Key4 = tuple[str, int, str, bool]     # (job type, scale factor, worker type, consolidated)


def sane(value) -> bool:
    """A rate the policy can use: a finite number > 0 (inf or NaN in the table stops every solve)."""
    return isinstance(value, (int, float)) and math.isfinite(value) and value > 0


class MeasuredTable:
    def __init__(self, base: ThroughputTable, worker_types: list[str], enabled: bool = True):
        self.base = base
        self.worker_types = list(worker_types)
        self.enabled = enabled
        # (job type, sf, worker type, consolidated) -> (steps/s believed, samples): the sources' consensus
        self.values: dict[Key4, tuple[float, int]] = {}
        self.by_source: dict[Key4, dict[str, tuple[float, int]]] = {}  # ... -> source -> its own (rate, samples)
        self.evicted: dict[Key4, list[str]] = {}     # sources dropped (SOURCES_KEPT), for the store to forget
        # (job key, partner key, worker type) -> (steps/s of the job while sharing, samples)
        self.pairs: dict[tuple[JobKey, JobKey, str], tuple[float, int]] = {}
        self._pair_sources: dict[tuple[JobKey, JobKey, str], dict[str, tuple[float, int]]] = {}
        self._cache: dict[JobKey, np.ndarray] = {}
        self.refused = 0                 # samples that were not a sane rate (logged once, then counted)
        self.declared: dict[JobKey, dict[str, float]] = {}    # a new class's rates as its job file declared them
        self._known = set(base.job_keys)
        self._model = None               # the estimator's isolated model over the table (built when first needed)

    def known(self, key: JobKey) -> bool:
        """Whether the configured table has a row for this class (else it is a user's own)."""
        return key in self._known

    def declare(self, key: JobKey, rates: dict[str, float]) -> None:
        """A new class's declared steps/s per worker type (the first declaration of a class holds)."""
        if rates and key not in self._known and key not in self.declared:
            self.declared[key] = {w: float(v) for w, v in rates.items() if w in self.worker_types}
            self._cache.pop(key, None)

    def load(self, rows: list[tuple[str, int, str, bool, float, int]]) -> list[tuple[str, int, str, bool]]:
        """The stored measurements; returns the keys of those dropped as not sane (e.g. written by an old
        version), for the caller to delete."""
        bad = []
        for job_type, sf, w, cons, value, n in rows:
            if sane(value):
                key = (job_type, sf, w, cons)
                self.by_source[key] = {LEGACY_SOURCE: (float(value), n)}
                self.values[key] = self._consensus(key, self.by_source[key])
            else:
                bad.append((job_type, sf, w, cons))
        if bad:
            log.warning("dropped %d stored throughputs that were not finite rates > 0: %s", len(bad),
                        ", ".join(f"{t}|{sf}|{w}{'' if c else '|unconsolidated'}" for t, sf, w, c in bad))
        self._cache.clear()
        return bad

    def load_sources(self, rows: list[tuple[str, int, str, bool, str, float, int]]) -> None:
        """The stored rates by source (they replace load()'s stand-in for the keys they cover)."""
        fresh: dict[Key4, dict[str, tuple[float, int]]] = {}
        for job_type, sf, w, cons, source, value, n in rows:
            if sane(value):
                fresh.setdefault((job_type, sf, w, cons), {})[source] = (float(value), int(n))
        for key, srcs in fresh.items():
            self.by_source[key] = srcs
            self.values[key] = self._consensus(key, srcs)
        self._cache.clear()

    def refuse(self, what: str, value) -> None:
        self.refused += 1
        if self.refused == 1:
            log.warning("throughput sample %s=%r is not a finite rate > 0: not recorded (repeats are counted in "
                        "MeasuredTable.refused)", what, value)

    def record(self, job_type: str, sf: int, worker_type: str, consolidated: bool,
               steps_per_s: float, source: str = "") -> tuple[float, int] | None:
        """Fold in one measurement from `source` (a user, or a job); returns the class's new (value, samples)
        to persist (None: not a sane rate). The source's own (rate, samples) is by_source[key][source]."""
        if not sane(steps_per_s):
            self.refuse(f"{job_type}|{worker_type}", steps_per_s)
            return None
        key = (job_type, sf, worker_type, consolidated)
        srcs = self.by_source.setdefault(key, {})
        _add(srcs, source, steps_per_s, self.evicted.setdefault(key, []))
        self.values[key] = self._consensus(key, srcs)
        self._cache.pop((job_type, sf), None)
        return self.values[key]

    def record_pair(self, key: JobKey, partner: JobKey, worker_type: str,
                    steps_per_s: float, source: str = "") -> tuple[float, int] | None:
        """Fold in one in-pair rate of `key` while it shared a GPU with a job of `partner` (no table prior:
        the median of its sources, the geometric mean of two)."""
        if not sane(steps_per_s):
            self.refuse(f"{key[0]}|{worker_type}|with {partner[0]}", steps_per_s)
            return None
        k = (key, partner, worker_type)
        srcs = self._pair_sources.setdefault(k, {})
        _add(srcs, source, steps_per_s, [])
        self.pairs[k] = (consensus([v for v, _ in srcs.values()], None), sum(n for _, n in srcs.values()))
        return self.pairs[k]

    def prior(self, key: Key4) -> tuple[float | None, bool]:
        """What a class's rate on a worker type is believed to be before anyone measured it, and whether the
        operator vouches for it: the table's (yes), or for a class of a user's own the declared one (no: the
        user's word); None when neither says."""
        job_type, sf, w, cons = key
        if (job_type, sf) in self._known:
            v = (None if cons else self.base.get_unconsolidated((job_type, sf), w)) or self.base.get((job_type, sf), w)
            return (float(v), True) if sane(v) else (None, True)
        v = self.declared.get((job_type, sf), {}).get(w)
        return (float(v) if v is not None and sane(v) else None), False

    def _consensus(self, key: Key4, srcs: dict[str, tuple[float, int]]) -> tuple[float, int]:
        prior, vouched = self.prior(key)
        return consensus([v for v, _ in srcs.values()], prior, vouched), sum(n for _, n in srcs.values())

    def row(self, key: JobKey) -> np.ndarray:
        """Steps/s of one (job type, scale factor) on each worker type (consolidated)."""
        if key in self._cache:
            return self._cache[key]
        if key not in self._known:
            out = self._cache[key] = self._class_row(key)[0]
            return out
        base = np.array([self.base.get(key, w) for w in self.worker_types])
        out = base.copy()
        if self.enabled:
            measured = {j: self.values[(key[0], key[1], w, True)][0] for j, w in enumerate(self.worker_types)
                        if (key[0], key[1], w, True) in self.values}
            ratios = [math.log(v / base[j]) for j, v in measured.items() if base[j] > 0 and v > 0]
            if ratios:
                out = base * math.exp(sum(ratios) / len(ratios))
            for j, v in measured.items():
                if base[j] > 0:          # a type the table says cannot run the job stays so
                    out[j] = v
        self._cache[key] = out
        return out

    def sources(self, key: JobKey) -> dict[str, str]:
        """Where each worker type's rate of row(key) comes from: measured, table, declared or estimated."""
        measured = {w for w in self.worker_types if (key[0], key[1], w, True) in self.values}
        if key in self._known:
            return {w: "measured" if self.enabled and w in measured else "table" for w in self.worker_types}
        return self._class_row(key)[1]

    def _class_row(self, key: JobKey) -> tuple[np.ndarray, dict[str, str]]:
        """A new class's row and each entry's source (module docstring). Its measurements count even
        with `measured_throughputs` off: nothing else knows the class."""
        measured = {w: self.values[(key[0], key[1], w, True)][0] for w in self.worker_types
                    if (key[0], key[1], w, True) in self.values}
        declared = self.declared.get(key, {})
        both = [math.log(measured[w] / v) for w, v in declared.items() if w in measured and v > 0]
        level = math.exp(sum(both) / len(both)) if both else 1.0
        known = {**{w: v * level for w, v in declared.items()}, **measured}
        sources = {w: "measured" if w in measured else "declared" if w in declared else "estimated"
                   for w in self.worker_types}
        if all(w in known for w in self.worker_types):
            return np.array([known[w] for w in self.worker_types]), sources
        model = self._isolated_model()
        est = model.estimate(known, model.neighbors_from_ratios(known, key[1]))
        out = np.array([known[w] if w in known else float(est[model.windex[w]]) if w in model.windex else 0.0
                        for w in self.worker_types])
        return out, sources

    def _isolated_model(self):
        if self._model is None:
            from ..estimator import IsolatedModel, IsolatedReference

            self._model = IsolatedModel(IsolatedReference.from_table(self.base))
        return self._model

    def matrix(self, keys: list[JobKey]) -> np.ndarray:
        if not keys:
            return np.zeros((0, len(self.worker_types)))
        return np.vstack([self.row(k) for k in keys])

    def pair_table(self, keys: list[JobKey]) -> PairTable:
        """The table's pair fractions, with measured in-pair rates over this view's isolated rows."""
        pt = PairTable.from_table(self.base, keys, self.worker_types)
        if self.enabled and self.pairs:
            uniq = list(dict.fromkeys(keys))
            index = {k: i for i, k in enumerate(uniq)}
            for (key, partner, w), (v, _) in self.pairs.items():
                c, d = index.get(key), index.get(partner)
                if c is None or d is None or w not in self.worker_types:
                    continue
                j = self.worker_types.index(w)
                alone = self.row(key)[j]
                if alone > 0 and pt.frac[c, d, j] > 0:      # the table says whether the pair fits at all
                    pt.frac[c, d, j] = v / alone
        return pt

    def measured(self) -> dict[str, float]:
        """'job type|sf|worker type' -> steps/s (consolidated measurements; pairs add
        '|with PARTNER TYPE'), for status."""
        out = {f"{t}|{sf}|{w}": v for (t, sf, w, cons), (v, _) in sorted(self.values.items()) if cons}
        for (key, partner, w), (v, _) in sorted(self.pairs.items()):
            out[f"{key[0]}|{key[1]}|{w}|with {partner[0]}"] = v
        return out


def consensus(rates: list[float], prior: float | None, vouched: bool = True) -> float:
    """The rate believed from the sources' `rates` (each one source's own average) and the `prior` (the
    table's, `vouched` for by the operator, or a user's declaration): the median of three or more; of two,
    the median of them and the prior (their geometric mean without one); one alone, within
    SINGLE_SOURCE_BAND of a vouched prior (as measured otherwise). An even count's median is the geometric
    mean of the middle two."""
    values = sorted(rates)
    if len(values) == 1:
        if prior is None or not vouched:
            return values[0]
        return min(max(values[0], prior / SINGLE_SOURCE_BAND), prior * SINGLE_SOURCE_BAND)
    if len(values) == 2 and prior is not None:
        values = sorted(values + [prior])
    n = len(values)
    return values[n // 2] if n % 2 else math.sqrt(values[n // 2 - 1] * values[n // 2])


def _add(srcs: dict[str, tuple[float, int]], source: str, rate: float, evicted: list[str]) -> None:
    """Fold `rate` into `source`'s own average; keep the SOURCES_KEPT most recently heard sources."""
    old = srcs.pop(source, None)
    srcs[source] = _fold(old, rate)          # (re)inserted last: dict order is recency
    while len(srcs) > SOURCES_KEPT:
        gone = next(iter(srcs))
        del srcs[gone]
        evicted.append(gone)


def _fold(old: tuple[float, int] | None, sample: float) -> tuple[float, int]:
    """Exponential moving average that starts as a plain mean."""
    value, n = old or (0.0, 0)
    weight = max(MIN_WEIGHT, 1.0 / (n + 1))
    return (sample if n == 0 else (1 - weight) * value + weight * sample), n + 1
