"""Adaptive jobs in the simulator: their goodput models, the round source a round policy reads,
and the execution of one adaptive entry.

A job's progress model belongs to the job (`JobArrays.adaptive`): a fixed job runs its
steps at the table's steps/s, an adaptive one (Pollux's model, gavel_ng.elastic) runs
on whatever (type, GPU count) it is given at the best (per-GPU batch, accumulation)
for its progress when the round starts (the PolluxAgent's choice), and its progress
within the round is exact at that batch and throughput (the noise scale grows as it
trains). Every change of configuration (first start and restart after a paused round
included) costs the re-allocation delay; a delay longer than a round is owed in the
next rounds on the same configuration.

Where the job's profile set measured its restart delay (`AdaptiveModels.restart`, the `sia`
set: per application), the job pays that instead, on every start and every change of
placement as the Sia artifact's simulator counts one (`restarts.RestartLedger`: type or GPUs per
server); a job without one keeps the flat delay and its rule (a change of type or GPU count),
so that runs on the modeled set are what they were. Where the set's noise scale
depends on the batch (`grad_stats`), a job picks its batch with the statistics of the batch it
ran at last round (`JobArrays.batch`) and progresses with those of the batch it picked.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..elastic.goodput import best_goodput_many
from ..elastic.running import advance, curve_batch, pick
from ..elastic.workload import POLLUX_NETWORK_GBPS
from ..policies.rounds import RoundJobs

NETWORK_GBPS = POLLUX_NETWORK_GBPS


@dataclass(frozen=True)
class AdaptiveModels:
    """Per trace job: the goodput model it runs under when adaptive, and its work (M0-equivalent
    examples). `adaptive[m]` is what the run decided (the policy's declared `jobs`)."""

    specs: list
    work: np.ndarray
    adaptive: np.ndarray
    restart: np.ndarray | None = None   # per trace job: its set's restart seconds (nan: the run's flat delays)

    @property
    def any(self) -> bool:
        return bool(self.adaptive.any())


class ArraysSource:
    """The RoundSource (policies.rounds) over the simulator's job arrays. A job's `allowed_types`
    (gavel_ng.rules) make its rates 0 on the other types, so that no policy picks them."""

    def __init__(self, jobs, worker_types: list[str], network_gbps: float = NETWORK_GBPS, learned=None,
                 restarts=None):
        self.jobs = jobs
        self.types = list(worker_types)
        self.network = network_gbps
        self.learned = learned  # a LearnedModels (simulator.learned): policies see the learned model, not the exact
        self.restarts = restarts  # the RestartLedger: which jobs are still paying a measured restart
        self._rows: dict = {}   # (model, type, configurations) -> {(progress, batch): best goodput row}: `goodput`

    def _allowed(self, idx: np.ndarray) -> np.ndarray:
        """(jobs, types) whether each job may run on each type."""
        rules = [self.jobs.rules_of(int(m)) for m in idx.tolist()]
        return np.array([r.allows(self.types) if r is not None else [True] * len(self.types) for r in rules],
                        bool).reshape(len(idx), len(self.types))

    def round_jobs(self, jobs: list[int]) -> RoundJobs:
        ja = self.jobs
        idx = np.asarray(jobs, np.int64)
        T = ja.T[ja.key[idx]]
        if ja.rules:
            T = np.where(self._allowed(idx), T, 0.0)
        owing = None if self.restarts is None else np.array([m in self.restarts.owed for m in idx.tolist()], bool)
        return RoundJobs(ja.adaptive[idx], ja.sf[idx], T, ja.arrival[idx], ja.reallocations[idx], ja.restart[idx],
                         owing)

    def goodput(self, jobs: list[int], worker_type: str, gpus: np.ndarray, servers: np.ndarray) -> np.ndarray:
        """One vectorized best-batch search per goodput model over its jobs x configurations.

        A job's row depends only on its model and progress, and most jobs wait with the same
        progress round after round (every job not yet started at 0): rows are searched once per
        distinct progress and kept until the next ask on the same (model, type, configurations).
        With `learned` set, the rows are its learned ones instead."""
        ja = self.jobs
        idx = np.asarray(jobs, np.int64)
        if self.learned is not None:
            out = self.learned.goodput(idx, worker_type, gpus, servers)
            if ja.rules:
                out[~self._allowed(idx)[:, self.types.index(worker_type)]] = 0.0
            return out
        k = np.asarray(gpus, np.int64).reshape(1, -1)
        n = np.asarray(servers, np.int64).reshape(1, -1)
        out = np.zeros((len(idx), k.shape[1]))
        by_spec: dict = {}
        for i in np.flatnonzero(ja.adaptive[idx]).tolist():
            by_spec.setdefault(ja.specs[idx[i]], []).append(i)
        for spec, rows in by_spec.items():
            rows = np.asarray(rows)
            key = (spec, worker_type, k.tobytes(), n.tobytes())
            before = self._rows.get(key, {})
            state = list(zip(ja.progress[idx[rows]].tolist(), ja.batch[idx[rows]].tolist()))
            new = sorted(set(state).difference(before))
            known = {p: before[p] for p in set(state).intersection(before)}
            if new:
                at = np.array(new)
                g, _, _ = best_goodput_many(spec, worker_type, k, n, at[:, :1], self.network,
                                            batch=np.where(at[:, 1:] > 0, at[:, 1:], spec.init_batch))
                known.update(zip(new, g))
            self._rows[key] = known
            out[rows] = np.array([known[p] for p in state]).reshape(len(rows), -1)
        if ja.rules:
            out[~self._allowed(idx)[:, self.types.index(worker_type)]] = 0.0
        return out

class AdaptiveRunner:
    """Start-up and progress of adaptive entries, round after round (module docstring)."""

    def __init__(self, jobs, topology, worker_types: list[str], round_seconds: float, realloc_delay: float,
                 network_gbps: float = NETWORK_GBPS, *, ledger=None, learned=None):
        self.jobs = jobs
        self.topo = topology
        self.names = list(worker_types)
        self.L = float(round_seconds)
        self.delay = float(realloc_delay)
        self.network = network_gbps
        self.last_config: dict[int, tuple[int, int]] = {}   # job -> (type, GPUs) of the previous round
        self.owed: dict[int, float] = {}                    # job -> start-up seconds still to pay
        self.learned = learned                              # a LearnedModels told what each job ran on
        self.ledger = ledger                                # a RestartLedger: measured delays (executor's)

    def run(self, plan, entries: np.ndarray, now: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Run the adaptive `entries` of a one-job-per-entry plan: (start-up, seconds held, finished)."""
        L = self.L
        n = len(entries)
        start = np.zeros(n)
        jobs = np.zeros(n, np.int64)
        types = np.zeros(n, np.int64)
        ks = np.zeros(n, np.int64)
        servers = np.ones(n, np.int64)
        configs = {}
        for i, e in enumerate(entries.tolist()):
            m = int(plan.member_job[e])
            t, k = int(plan.types[e]), int(plan.sfs[e])
            gpus = np.asarray(plan.gpus[e], np.int64)
            if len(gpus):
                servers[i] = len(np.unique(self.topo.gpu_server[gpus]))
            configs[m] = (t, k)
            measured = self.jobs.restart[m]
            if measured == measured and self.ledger is not None:   # the set's own delay (restarts.py)
                delay = float(measured)
                start[i], fresh = self.ledger.start(m, self.ledger.shape(t, gpus), delay)
            else:
                delay, fresh = self.delay, self.last_config.get(m) != (t, k)
                start[i] = self._start_up(m, fresh, delay)
            self.jobs.reallocations[m] += fresh and delay > 0
            jobs[i], types[i], ks[i] = m, t, k
        self.last_config = configs
        if self.learned is not None:
            for m, t, k, n in zip(jobs[start < L].tolist(), types[start < L].tolist(), ks[start < L].tolist(),
                                  servers[start < L].tolist()):
                self.learned.observe(m, t, k, n)
        ran, done = self._progress(jobs, types, ks, servers, L - start)
        return start, start + ran, done

    def idle(self) -> None:
        """A round in which no adaptive job ran: the next start of each is a fresh one."""
        self.last_config = {}

    def _start_up(self, m: int, fresh: bool, delay: float) -> float:
        """Seconds of this round job m spends starting: a fresh start owes the delay; what a round
        cannot hold is owed in the next one on the same configuration."""
        owed = delay if fresh else self.owed.pop(m, 0.0)
        self.owed.pop(m, None)
        start = min(owed, self.L)
        if owed > start:
            self.owed[m] = owed - start
        return start

    def _progress(self, jobs: np.ndarray, types: np.ndarray, ks: np.ndarray, servers: np.ndarray,
                  seconds: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Run each job for its `seconds` at its best batch on its configuration: (seconds used, finished).

        Vectorized per goodput model: one best-batch search per (model, type) and one progress
        inversion per model over the entries that share it; each entry's figures are those of a
        search and an inversion of its own (every step is elementwise)."""
        ja = self.jobs
        n = len(jobs)
        used = np.maximum(seconds, 0.0)
        done = np.zeros(n, bool)
        if n == 0:
            return used, done
        if len(np.unique(jobs)) < n:   # a job on two entries: its second run starts where the first ended
            out = [self._progress(jobs[i:i + 1], types[i:i + 1], ks[i:i + 1], servers[i:i + 1], seconds[i:i + 1])
                   for i in range(n)]
            return np.concatenate([o[0] for o in out]), np.concatenate([o[1] for o in out])
        p = ja.progress[jobs].astype(float)
        g = np.zeros(n)
        batch = np.zeros(n)
        x = np.zeros(n)
        groups: dict = {}
        for i, (m, t) in enumerate(zip(jobs.tolist(), types.tolist())):
            groups.setdefault((ja.specs[m], t), []).append(i)
        for (spec, t), rows in groups.items():
            rows = np.asarray(rows)
            picked = pick(spec, self.names[t], ks[rows], servers[rows], p[rows], self.network, ja.batch[jobs[rows]])
            g[rows], batch[rows], x[rows] = picked.goodput, picked.batch, picked.throughput
        runs = (g > 0) & (seconds > 0)
        ja.batch[jobs[runs]] = batch[runs]
        by_curve: dict = {}   # one progress inversion per noise-scale curve: per model, or per (model, batch)
        for i in np.flatnonzero(runs).tolist():
            spec = ja.specs[int(jobs[i])]
            by_curve.setdefault((spec, curve_batch(spec, batch[i])), []).append(i)
        for (spec, _), rows in by_curve.items():
            rows = np.asarray(rows)
            m = jobs[rows]
            ja.progress[m], used[rows], done[rows] = advance(spec, batch[rows], x[rows], ja.work[m].astype(float),
                                                             p[rows], seconds[rows])
        return used, done
