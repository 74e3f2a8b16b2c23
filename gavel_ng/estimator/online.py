"""The online throughput estimator: what the policy should believe about each job now.

Per job it keeps a fingerprint (from profiling against reference jobs), smoothed
measurements of its isolated and pair throughputs, and answers with the best it has:
a measurement where one exists, an estimate from similar jobs otherwise.

Measurements are smoothed as a duration-weighted median of the last `window` samples
in log space: a round with a stall or a straggler is one vote, so a single bad sample
cannot move an estimate that has two good ones behind it. Garbage (NaN, infinite,
negative or zero steps, zero duration, unknown jobs or worker types) is rejected with
a logged reason and changes nothing.
"""

from __future__ import annotations

import logging
import math
from collections import deque
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass, field

import numpy as np

from ..errors import InputError
from ..throughputs import UNCONSOLIDATED, JobKey, ThroughputTable
from .fingerprint import SOURCES, Fingerprint, PairModel
from .isolated import IsolatedModel, Neighbors
from .profiling import Profile, ProfilePlan, plan_profile, profile_to_row
from .reference import MINE, THEIRS, IsolatedReference, ReferenceSet

log = logging.getLogger(__name__)
JobId = Hashable


@dataclass(frozen=True)
class EstimatorConfig:
    profile_fraction: float = 0.25     # share of (worker type, reference job) cells profiled
    profile_isolated: bool = True      # profiling also runs the job alone on the types it touches
    profile_seconds: float = 60.0      # weight of a profiled sample against online ones
    rank: int | None = None            # None: chosen by validation
    ridge: float | None = None
    source: str = "completion"         # or "reference": copy the nearest reference job (Gavel)
    window: int = 5                    # measurements kept per (job, worker[, partner])
    neighbors: int = 3                 # similar jobs used for isolated estimates
    seed: int = 0

    def __post_init__(self) -> None:
        if not 0.0 <= self.profile_fraction <= 1.0:
            raise InputError("profile_fraction", self.profile_fraction, "must be between 0 and 1")
        if self.source not in SOURCES:
            raise InputError("source", self.source, f"must be one of {', '.join(SOURCES)}")
        if self.window < 1 or self.neighbors < 1:
            raise InputError("window/neighbors", (self.window, self.neighbors), "must be >= 1")


@dataclass(frozen=True)
class Measurement:
    """Job `job` ran on `worker_type` for `seconds` and did `steps` steps; alone, or
    sharing the GPU with `partner`, which did `partner_steps` meanwhile (None: the
    partner's side was not observed over the same interval, only `job`'s side is learned)."""

    job: JobId
    worker_type: str
    seconds: float
    steps: float
    partner: JobId | None = None
    partner_steps: float | None = None


class Smoothed:
    """Duration-weighted median of the last `window` log throughputs."""

    def __init__(self, window: int):
        self.samples: deque[tuple[float, float]] = deque(maxlen=window)

    def add(self, value: float, weight: float) -> None:
        self.samples.append((math.log(value), weight))

    def value(self) -> float:
        v, w = np.array(self.samples).T
        order = np.argsort(v)
        cum = np.cumsum(w[order])
        return float(np.exp(v[order][np.searchsorted(cum, 0.5 * cum[-1])]))


@dataclass
class _Job:
    scale_factor: int
    known: JobKey | None
    values: np.ndarray | None = None       # profiled feature row (pair model of its sf)
    observed: np.ndarray | None = None
    measured: np.ndarray | None = None     # (W, R) cells measured
    feasible: np.ndarray | None = None
    iso: dict[str, Smoothed] = field(default_factory=dict)
    pairs: dict[tuple[str, JobId], Smoothed] = field(default_factory=dict)
    print_: Fingerprint | None = None       # cached; None = recompute
    iso_cache: np.ndarray | None = None


class ThroughputEstimator:
    """Estimated throughputs for the jobs of a cluster, refined as they run.

    For a simulator: `add_job` on arrival (with a profile from `plan_profile` +
    `profile_from_table`), `isolated_matrix` / `pair_matrix` (or `as_table`) for the
    policy's view, `record` after each round, `remove_job` on completion.
    """

    def __init__(self, reference: ThroughputTable, config: EstimatorConfig | None = None,
                 exclude_types: tuple[str, ...] = ()):
        self.table = reference
        self.config = config or EstimatorConfig()
        self.exclude = tuple(exclude_types)
        self.iso_ref = IsolatedReference.from_table(reference, self.exclude)
        self.iso_model = IsolatedModel(self.iso_ref, self.config.neighbors)
        self.workers = list(self.iso_ref.workers)
        self._models: dict[int, PairModel] = {}
        self.jobs: dict[JobId, _Job] = {}
        self.rng = np.random.default_rng(self.config.seed)
        self.rejected = 0

    # ----- reference models ---------------------------------------------------------
    def pair_model(self, scale_factor: int) -> PairModel:
        if scale_factor not in self._models:
            ref = ReferenceSet.from_table(self.table, scale_factor, exclude_types=self.exclude)
            c = self.config
            self._models[scale_factor] = PairModel(ref, c.profile_fraction, c.rank, c.ridge, c.seed)
        return self._models[scale_factor]

    def plan_profile(self, scale_factor: int) -> ProfilePlan:
        pm = self.pair_model(scale_factor)
        if pm.trivial:   # no reference pair can share a GPU at this scale factor
            return ProfilePlan((), ())
        return plan_profile(pm.ref, self.config.profile_fraction, self.rng, self.config.profile_isolated)

    # ----- jobs ----------------------------------------------------------------------
    def add_job(self, job: JobId, scale_factor: int, profile: Profile | None = None,
                known_key: JobKey | None = None) -> None:
        """Register a job; `known_key` marks it as (a copy of) a reference job."""
        if job in self.jobs:
            raise InputError("job", job, "already registered with the estimator")
        known = known_key if known_key is not None and self.iso_model.key_index(known_key) is not None else None
        if known_key is not None and known is None:
            log.info("job %s: %s is not a reference job; estimating it like a new one", job, known_key)
        state = _Job(int(scale_factor), known)
        self.jobs[job] = state
        if profile is not None:
            for w, v in profile.isolated.items():
                if w in self.workers and math.isfinite(v) and v >= 0:
                    if v > 0:
                        state.iso.setdefault(w, Smoothed(self.config.window)).add(v, self.config.profile_seconds)
                    else:
                        log.info("job %s cannot run alone on %s (profiled 0 steps/s)", job, w)
            pm = self.pair_model(state.scale_factor)
            if not pm.trivial:
                alone = {w: s.value() for w, s in state.iso.items()}   # unmeasured: cannot normalize
                state.values, state.observed, state.measured, state.feasible = profile_to_row(
                    pm.ref, profile, alone)
                state.print_, state.iso_cache = None, None      # neighbors now come from the fingerprint

    def remove_job(self, job: JobId) -> None:
        self.jobs.pop(job, None)
        for state in self.jobs.values():
            for key in [k for k in state.pairs if k[1] == job]:
                del state.pairs[key]

    def fingerprint(self, job: JobId) -> Fingerprint | None:
        """None for jobs whose scale factor has no shareable reference pairs."""
        state = self.jobs[job]
        pm = self.pair_model(state.scale_factor)
        if pm.trivial:
            return None
        if state.print_ is None:
            if state.known is not None and state.known in pm.ref.keys:
                state.print_ = pm.reference_fingerprint(state.known)
            elif state.values is not None:
                state.print_ = pm.fingerprint(state.values, state.observed, state.measured, state.feasible)
            else:
                state.print_ = pm.prior()
        return state.print_

    def nearest_reference(self, job: JobId) -> JobKey | None:
        fp = self.fingerprint(job)
        return None if fp is None else self.pair_model(self.jobs[job].scale_factor).ref.keys[fp.nearest]

    # ----- isolated -------------------------------------------------------------------
    def _isolated(self, job: JobId) -> np.ndarray:
        state = self.jobs[job]
        if state.iso_cache is None:
            measured = {w: s.value() for w, s in state.iso.items()}
            state.iso_cache = self.iso_model.estimate(measured, self._neighbors(job, measured))
        return state.iso_cache

    def _neighbors(self, job: JobId, measured: dict[str, float]) -> Neighbors:
        state = self.jobs[job]
        if state.known is not None:
            return Neighbors(np.array([self.iso_model.key_index(state.known)]), np.ones(1))
        fp = self.fingerprint(job) if state.values is not None else None
        if fp is not None:
            types = [k[0] for k in self.pair_model(state.scale_factor).ref.keys]
            nb = self.iso_model.neighbors_from_types(types, fp.distances, state.scale_factor)
            if len(nb.index):
                return nb
        return self.iso_model.neighbors_from_ratios(measured, state.scale_factor)

    def isolated(self, job: JobId, worker_type: str) -> float:
        """Estimated (or measured) steps/s of `job` alone on `worker_type`; 0 = cannot run."""
        if worker_type not in self.workers:
            raise InputError("worker_type", worker_type, f"unknown (known: {', '.join(self.workers)})")
        return float(self._isolated(job)[self.workers.index(worker_type)])

    def isolated_matrix(self, jobs: Sequence[JobId], worker_types: Sequence[str]) -> np.ndarray:
        cols = [self.workers.index(w) for w in worker_types]
        return np.array([self._isolated(j)[cols] for j in jobs]).reshape(len(jobs), len(cols))

    # ----- pairs ----------------------------------------------------------------------
    def pair_matrix(self, jobs: Sequence[JobId], worker_type: str) -> np.ndarray:
        """(n, n, 2): [i, j] = (i's, j's) steps/s sharing a GPU of `worker_type`; (0, 0) = cannot
        (different scale factors, memory, or the diagonal)."""
        n = len(jobs)
        out = np.zeros((n, n, 2))
        base = worker_type.removesuffix(UNCONSOLIDATED)
        sfs = np.array([self.jobs[j].scale_factor for j in jobs])
        for sf in np.unique(sfs):
            idx = np.nonzero(sfs == sf)[0]
            pm = self.pair_model(int(sf))
            if pm.trivial or base not in pm.ref.worker_types or len(idx) < 2:
                continue
            group = [jobs[i] for i in idx]
            w = pm.ref.worker_types.index(base)
            log_norm, ok = pm.pair_log_norm([self.fingerprint(j) for j in group], w, self.config.source)
            alone = self.isolated_matrix(group, [base])[:, 0]
            mine = np.exp(np.minimum(log_norm, 0.0)) * alone[:, None]
            mine = np.where(ok & (alone[:, None] > 0) & (alone[None, :] > 0), mine, 0.0)
            for a, ja in enumerate(group):             # measurements replace estimates
                for (wk, partner), s in self.jobs[ja].pairs.items():
                    if wk == base and partner in group:
                        mine[a, group.index(partner)] = s.value()
            np.fill_diagonal(mine, 0.0)
            both = (mine > 0) & (mine.T > 0)
            sub = np.stack([np.where(both, mine, 0.0), np.where(both, mine.T, 0.0)], axis=-1)
            out[np.ix_(idx, idx)] = sub
        return out

    def pair(self, a: JobId, b: JobId, worker_type: str) -> tuple[float, float]:
        m = self.pair_matrix([a, b], worker_type)
        return float(m[0, 1, 0]), float(m[0, 1, 1])

    def as_table(self, jobs: Sequence[JobId], key: Callable[[JobId], JobKey] | None = None) -> ThroughputTable:
        """The policy's view as a ThroughputTable, one key per job (default (str(job), sf))."""
        key = key or (lambda j: (str(j), self.jobs[j].scale_factor))
        keys = [key(j) for j in jobs]
        iso = self.isolated_matrix(jobs, self.workers)
        table = ThroughputTable()
        for c, w in enumerate(self.workers):
            table.isolated[w] = {k: float(v) for k, v in zip(keys, iso[:, c])}
        for w in dict.fromkeys(w.removesuffix(UNCONSOLIDATED) for w in self.workers):
            m = self.pair_matrix(jobs, w)
            same = np.array([[self.jobs[a].scale_factor == self.jobs[b].scale_factor for b in jobs] for a in jobs])
            per = table.pairs.setdefault(w, {})
            for a, b in zip(*np.nonzero(same)):
                per.setdefault(keys[a], {})[keys[b]] = (float(m[a, b, 0]), float(m[a, b, 1]))
        return table

    # ----- measurements -------------------------------------------------------------
    def record(self, m: Measurement) -> bool:
        """Fold one measurement in; False (and a logged reason) if it was rejected."""
        reason = self._invalid(m)
        if reason:
            self.rejected += 1
            log.warning("rejected measurement %s: %s; keeping the previous estimate", m, reason)
            return False
        state = self.jobs[m.job]
        if m.partner is None:
            state.iso.setdefault(m.worker_type, Smoothed(self.config.window)).add(m.steps / m.seconds, m.seconds)
            state.iso_cache = None
            return True
        base = m.worker_type.removesuffix(UNCONSOLIDATED)
        other = self.jobs[m.partner]
        state.pairs.setdefault((base, m.partner), Smoothed(self.config.window)).add(m.steps / m.seconds, m.seconds)
        if m.partner_steps is not None:
            other.pairs.setdefault((base, m.job), Smoothed(self.config.window)).add(m.partner_steps / m.seconds,
                                                                                     m.seconds)
        self._learn_cell(m.job, m.partner, base)
        self._learn_cell(m.partner, m.job, base)
        return True

    def _learn_cell(self, job: JobId, partner: JobId, base: str) -> None:
        """A measured pair with a known reference job is a new profiled cell: re-fingerprint."""
        state, other = self.jobs[job], self.jobs[partner]
        pm = self.pair_model(state.scale_factor)
        if pm.trivial or other.known not in pm.ref.keys or state.known is not None or base not in pm.ref.worker_types:
            return
        if (base, partner) not in state.pairs or (base, job) not in other.pairs:
            return                     # one side observed so far: nothing to normalize against
        w, r = pm.ref.worker_types.index(base), pm.ref.index(other.known)
        alone = self.isolated(job, base)
        if alone <= 0 or pm.ref.isolated[r, w] <= 0:
            return
        if state.values is None:
            F, cells = pm.ref.num_features, (len(pm.ref.worker_types), pm.ref.size)
            state.values, state.observed = np.zeros(F), np.zeros(F, bool)
            state.measured, state.feasible = np.zeros(cells, bool), np.zeros(cells, bool)
        mine = state.pairs[(base, partner)].value() / alone
        theirs = other.pairs[(base, job)].value() / pm.ref.isolated[r, w]
        for side, v in ((MINE, mine), (THEIRS, theirs)):
            c = pm.ref.column(w, side, r)
            state.values[c], state.observed[c] = math.log(min(v, 1.0)), True
        state.measured[w, r] = state.feasible[w, r] = True
        state.print_ = None
        state.iso_cache = None

    def _invalid(self, m: Measurement) -> str:
        if m.job not in self.jobs:
            return f"unknown job {m.job!r}"
        if m.worker_type not in self.workers:
            return f"unknown worker type {m.worker_type!r}"
        for name, v in (("seconds", m.seconds), ("steps", m.steps)):
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
                return f"{name}={v!r} is not a finite number"
            if v <= 0:
                return f"{name}={v!r} must be positive" + (" (zero duration)" if name == "seconds" else "")
        if m.partner is not None:
            if m.partner not in self.jobs or m.partner == m.job:
                return f"unknown or self partner {m.partner!r}"
            p = m.partner_steps
            bad = isinstance(p, bool) or not isinstance(p, (int, float)) or not math.isfinite(p) or p <= 0
            if p is not None and bad:
                return f"partner_steps={p!r} must be a positive finite number"
            if self.jobs[m.partner].scale_factor != self.jobs[m.job].scale_factor:
                return "partners must have equal scale factors"
        return ""
