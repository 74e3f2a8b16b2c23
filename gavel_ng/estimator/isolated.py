"""Isolated throughputs on worker types a job has not run on yet, from similar jobs.

A job's speed-up from one GPU generation to another depends mostly on what the model
is (compute- vs memory-bound, batch size), not on its absolute speed. So where a job
was measured on type s, its steps/s on type w is estimated as

    log T(w) = log T(s) + mean over similar reference jobs n of (log T_n(w) - log T_n(s)),

averaged over every measured s. "Similar" is, in order of preference: the nearest
reference jobs of its pair fingerprint; the reference jobs whose speed ratios over the
types it has run on are closest; all reference jobs of its scale factor. With no
measurement at all, the similar jobs' own steps/s are the estimate. A type on which
most similar jobs cannot run at all (steps/s 0: out of memory) is predicted 0.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..throughputs import JobKey
from .reference import IsolatedReference


@dataclass(frozen=True)
class Neighbors:
    """Reference keys (indices into IsolatedReference.keys) and their weights."""

    index: np.ndarray
    weight: np.ndarray


class IsolatedModel:
    def __init__(self, ref: IsolatedReference, neighbors: int = 3):
        self.ref = ref
        self.k = neighbors
        self.windex = {w: i for i, w in enumerate(ref.workers)}
        self._by_key = {k: i for i, k in enumerate(ref.keys)}

    def key_index(self, key: JobKey) -> int | None:
        return self._by_key.get(key)

    def neighbors_from_types(self, job_types: list[str], distances: np.ndarray, scale_factor: int) -> Neighbors:
        """The k closest pair-fingerprint references, mapped to keys of this scale factor."""
        order = np.argsort(distances, kind="stable")
        idx, wts = [], []
        for r in order:
            i = self._by_key.get((job_types[r], scale_factor))
            if i is not None and np.isfinite(distances[r]):
                idx.append(i)
                wts.append(1.0 / (distances[r] + 1e-3))
            if len(idx) == self.k:
                break
        return Neighbors(np.array(idx, np.int64), np.array(wts))

    def neighbors_from_ratios(self, measured: dict[str, float], scale_factor: int) -> Neighbors:
        """Closest speed ratios over the measured types (2+ needed), else all of this sf."""
        pool = np.array([i for i, k in enumerate(self.ref.keys) if k[1] == scale_factor]
                        or range(len(self.ref.keys)), np.int64)
        cols = [self.windex[w] for w, v in measured.items() if w in self.windex and v > 0]
        if len(cols) < 2:
            return Neighbors(pool, np.ones(len(pool)))
        mine = np.log([measured[self.ref.workers[c]] for c in cols])
        theirs = self.ref.log_iso[np.ix_(pool, cols)]
        diff = (theirs - theirs.mean(axis=1, keepdims=True)) - (mine - mine.mean())
        dist = np.sqrt(np.mean(diff ** 2, axis=1))
        ok = np.isfinite(dist)
        pool, dist = pool[ok], dist[ok]
        top = np.argsort(dist, kind="stable")[: self.k]
        return Neighbors(pool[top], 1.0 / (dist[top] + 1e-3))

    def estimate(self, measured: dict[str, float], neighbors: Neighbors) -> np.ndarray:
        """(W,) steps/s on every worker of the reference (measured ones returned as is)."""
        L = self.ref.log_iso[neighbors.index]                           # (n, W)
        wts = neighbors.weight
        runnable = np.isfinite(L)
        share_ok = (wts[:, None] * runnable).sum(axis=0) / max(wts.sum(), 1e-12)
        meas = {self.windex[w]: np.log(v) for w, v in measured.items() if w in self.windex and v > 0}
        if meas:
            preds = []
            for s, log_t in meas.items():
                delta = L - L[:, [s]]                                   # (n, W), NaN where unknown
                preds.append(log_t + _weighted_nanmean(delta, wts))
            log_est = _weighted_nanmean(np.array(preds), np.ones(len(preds)))
        else:
            log_est = _weighted_nanmean(L, wts)
        out = np.where(np.isfinite(log_est) & (share_ok >= 0.5), np.exp(np.nan_to_num(log_est)), 0.0)
        for s in meas:
            out[s] = np.exp(meas[s])
        for w, v in measured.items():               # measured zero: cannot run there
            if w in self.windex and v == 0:
                out[self.windex[w]] = 0.0
        return out


def _weighted_nanmean(values: np.ndarray, weights: np.ndarray) -> np.ndarray:
    ok = np.isfinite(values)
    w = weights[:, None] * ok
    total = w.sum(axis=0)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(total > 0, (np.where(ok, values, 0.0) * w).sum(axis=0) / total, np.nan)


def fill_column(ref: IsolatedReference, worker: str, neighbors: int = 3) -> dict[JobKey, float]:
    """Steps/s on `worker` for every key of `ref` that has none there, estimated from the keys that do
    (a GPU type a table covers only in part: a few reference jobs measured on it). Each missing key
    is compared, by its speed ratios over the types both know, with the keys measured on `worker`
    (IsolatedModel's "similar jobs"); 0 where they cannot say (no common type)."""
    w = ref.workers.index(worker)
    has = np.isfinite(ref.log_iso[:, w])
    if not has.any() or has.all():
        return {}
    sub = IsolatedReference(tuple(k for k, h in zip(ref.keys, has) if h), ref.workers, ref.log_iso[has])
    model = IsolatedModel(sub, neighbors)
    out = {}
    for i in np.flatnonzero(~has).tolist():
        key = ref.keys[i]
        known = {ref.workers[j]: float(np.exp(v)) for j, v in enumerate(ref.log_iso[i]) if np.isfinite(v)}
        if not known:
            continue
        est = model.estimate(known, model.neighbors_from_ratios(known, key[1]))
        out[key] = float(est[w])
    return out
