"""Profiling a new job against reference jobs.

A profile is what dedicated profiling workers measure when a job arrives: the job
alone on some worker types, and sharing a GPU with a few reference jobs. Which
(worker type, reference job) cells to measure is a random `fraction` of all of them,
so the cost stays a fixed share of the full matrix; the rest is completed.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from ..errors import InputError
from ..throughputs import JobKey, ThroughputTable
from .reference import MINE, THEIRS, ReferenceSet


@dataclass(frozen=True)
class PairSample:
    """Measured steps/s of the new job (`mine`) and of reference job `partner` (`theirs`)
    sharing one GPU of `worker_type`; (0, 0) when they could not share it."""

    worker_type: str
    partner: JobKey
    mine: float
    theirs: float


@dataclass(frozen=True)
class Profile:
    isolated: dict[str, float] = field(default_factory=dict)   # worker type -> steps/s alone
    pairs: tuple[PairSample, ...] = ()


@dataclass(frozen=True)
class ProfilePlan:
    """The cells to measure: (worker type, reference key) pairs, and isolated runs."""

    pairs: tuple[tuple[str, JobKey], ...]
    isolated: tuple[str, ...]


def sample_cells(ref: ReferenceSet, fraction: float, rng: np.random.Generator) -> np.ndarray:
    """(W, R) bool: a random `fraction` of the cells (at least one when there are any)."""
    if not 0.0 <= fraction <= 1.0:
        raise InputError("profile_fraction", fraction, "must be between 0 and 1")
    W, R = len(ref.worker_types), ref.size
    n = min(W * R, max(1, math.ceil(fraction * W * R))) if fraction > 0 and W * R else 0
    flat = np.zeros(W * R, bool)
    flat[rng.choice(W * R, size=n, replace=False)] = True
    return flat.reshape(W, R)


def cells_to_feature_mask(ref: ReferenceSet, cells: np.ndarray) -> np.ndarray:
    """A measured cell reveals both its 'mine' and its 'theirs' feature."""
    return np.repeat(cells[:, None, :], 2, axis=1).reshape(-1)


def plan_profile(ref: ReferenceSet, fraction: float, rng: np.random.Generator,
                 isolated: bool = True) -> ProfilePlan:
    cells = sample_cells(ref, fraction, rng)
    ws, rs = np.nonzero(cells)
    pairs = tuple((ref.worker_types[w], ref.keys[r]) for w, r in zip(ws, rs))
    alone = tuple(dict.fromkeys(w for w, _ in pairs)) if isolated else ()
    return ProfilePlan(pairs, alone)


def profile_from_table(table: ThroughputTable, key: JobKey, plan: ProfilePlan) -> Profile:
    """Run a plan against a full table: the simulator's (and the report's) profiler."""
    iso = {w: table.get(key, w) for w in plan.isolated}
    samples = []
    for w, partner in plan.pairs:
        pair = table.get_pair(key, partner, w) or (0.0, 0.0)
        samples.append(PairSample(w, partner, float(pair[0]), float(pair[1])))
    return Profile(iso, tuple(samples))


def profile_to_row(ref: ReferenceSet, profile: Profile, isolated: dict[str, float]
                   ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Feature values, observed mask, measured-cell mask (W, R) and feasibility (W, R).

    `isolated` gives the new job's steps/s alone per worker type, needed to normalize
    its side of a pair; samples on worker types without one are skipped.
    """
    W, R = len(ref.worker_types), ref.size
    row = np.zeros((W, 2, R))
    obs = np.zeros((W, 2, R), bool)
    measured = np.zeros((W, R), bool)
    feas = np.zeros((W, R), bool)
    windex = {w: i for i, w in enumerate(ref.worker_types)}
    rindex = {k: i for i, k in enumerate(ref.keys)}
    for s in profile.pairs:
        w, r = windex.get(s.worker_type), rindex.get(s.partner)
        alone = isolated.get(s.worker_type, 0.0)
        if w is None or r is None or not (alone > 0 and ref.isolated[r, w] > 0):
            continue
        if not (math.isfinite(s.mine) and math.isfinite(s.theirs)) or s.mine < 0 or s.theirs < 0:
            continue
        measured[w, r] = True
        if s.mine > 0 and s.theirs > 0:
            feas[w, r] = True
            row[w, MINE, r] = math.log(min(s.mine / alone, 1.0))
            row[w, THEIRS, r] = math.log(min(s.theirs / ref.isolated[r, w], 1.0))
            obs[w, :, r] = True
    return row.reshape(-1), obs.reshape(-1), measured, feas
