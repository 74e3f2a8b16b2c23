"""What a real scheduler can know of an adaptive job's goodput: a model learned from the job's own
runs (`SimConfig.policy_model = "learned"`), which round policies then read instead of the exact one.

The exact model (`ArraysSource.goodput`'s default) is the simulator's truth: every job's
throughput on every configuration. A scheduler learns it as Sia does (SOSP'23 §3.1, and its
artifact's cluster.py; ../shared/profiles/sia-artifact/README.md):

* **Compute** (T_grad and the per-GPU memory bound) of every type is known from the moment a job
  arrives: Sia profiles each new job on one GPU of every type at several batch sizes (< 20
  GPU-seconds per type, not charged here).
* **Synchronization** is learned from the job's runs. After the job ran on K GPUs of a type (on one
  server or across servers) its sync time there is known; the learned T_sync of that type and
  locality is the line through the observed (K, T_sync) points (a constant with one point), the
  other locality's where only one was seen, the overlap (gamma) that of the type.
* **Bootstrapping** a type the job has not run on with several GPUs: Sia's rule ``throughput(N, A) =
  throughput(1, A) / throughput(1, B) x throughput(N, B)``, B a type it has (the one with the most
  observed GPU counts): B's learned sync scaled by the single-GPU time ratio of A to B at the job's
  M0 (the compute:communication ratio of A taken as B's). Before any multi-GPU run, "throughput for
  any GPU type will double": no sync time at all.
* **Scale-up limit**: a configuration of more than twice the most GPUs the job has run on (on any
  type: Sia's ``share_max_replicas``) has no estimate and is worth 0; a job that has not run is
  offered one GPU.
* **Noise scale**: the one the job reports now (at its progress, measured at the batch it ran at),
  used for every batch size; the learned goodput is the best-batch search's at that noise scale.

Policies see this through `ctx.goodput` / `ctx.rates` (the simulator's round source); the jobs still
run, and pick their batch, by the exact model. Fixed jobs are unaffected.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from ..elastic.goodput import ThroughputParams, best_batch_many, throughput_params
from ..elastic.profile_sets import batch_stats, phi_curve

SCALE_UP = 2   # Sia: a job may be offered at most this many times the most GPUs it has run on


class LearnedModels:
    """Per adaptive job, the sync times its runs showed and the most GPUs it ran on (module docstring)."""

    def __init__(self, jobs, worker_types: list[str], network_gbps: float):
        self.jobs = jobs
        self.types = list(worker_types)
        self.network = network_gbps
        self.seen: dict[int, dict[tuple[int, bool], dict[int, float]]] = {}   # job -> (type, spread) -> {K: T_sync}
        self.widest: dict[int, int] = {}
        self._params: dict[tuple[int, int], ThroughputParams] = {}   # (job, type) -> learned, until it runs again
        self._rows: dict = {}                                          # (params, spec, type, configs) -> {phi: row}

    def truth(self, job: int, t: int) -> ThroughputParams:
        spec = self.jobs.specs[job]
        return throughput_params(spec.family, self.types[t], self.network, profiles=spec.profiles)

    def observe(self, job: int, t: int, gpus: int, servers: int) -> None:
        """The job ran on `gpus` GPUs of type `t` over `servers` servers: its sync time there is now known."""
        self.widest[job] = max(self.widest.get(job, 0), int(gpus))
        if gpus > 1:
            key = (int(t), servers > 1)
            seen = self.seen.setdefault(job, {}).setdefault(key, {})
            if gpus not in seen:
                seen[int(gpus)] = float(self.truth(job, t).t_sync(gpus, servers))
                for u in range(len(self.types)):
                    self._params.pop((job, u), None)

    def _sync(self, job: int, t: int) -> tuple[float, float, float, float] | None:
        """(alpha, beta) local and node of type t learned from the job's own runs there; None: no multi-GPU run."""
        seen = self.seen.get(job, {})
        lines = {}
        for spread in (False, True):
            pts = seen.get((t, spread))
            if pts:
                k = np.array(sorted(pts), float)
                y = np.array([pts[int(v)] for v in k])
                if len(k) == 1:
                    lines[spread] = (float(y[0]), 0.0)
                else:
                    beta, alpha = np.polyfit(k - 2, y, 1)
                    lines[spread] = (max(float(alpha), 0.0), max(float(beta), 0.0))
        if not lines:
            return None
        local = lines.get(False, lines.get(True))
        node = lines.get(True, local)
        return (*local, *node)

    def params(self, job: int, t: int) -> ThroughputParams:
        """The learned model of the job on type t (module docstring)."""
        got = self._params.get((job, t))
        if got is not None:
            return got
        here = self.truth(job, t)
        sync = self._sync(job, t)
        gamma = here.gamma
        if sync is None:
            others = [(len(v), -u) for (u, _), v in self.seen.get(job, {}).items() if u != t]
            if others:
                b = -max(others)[1]
                there = self.truth(job, b)
                m0 = self.jobs.specs[job].init_batch
                c = float(here.t_grad(m0) / there.t_grad(m0))
                sync = tuple(v * c for v in self._sync(job, b))
                gamma = there.gamma
            else:
                sync = (0.0, 0.0, 0.0, 0.0)
        al, bl, an, bn = sync
        got = replace(here, alpha_local=al, beta_local=bl, kappa_local=0.0, alpha_node=an, beta_node=bn,
                      kappa_node=0.0, gamma=gamma)
        self._params[(job, t)] = got
        return got

    def phi(self, job: int) -> float:
        """The noise scale the job reports now: at its progress, measured at the batch it ran at."""
        ja = self.jobs
        spec = ja.specs[job]
        batch = ja.batch[job] if ja.batch[job] > 0 else spec.init_batch
        stats = batch_stats(spec)
        if stats is not None:
            return float(stats.phi(batch, ja.progress[job]))
        return float(phi_curve(spec)(ja.progress[job]))

    def goodput(self, jobs: np.ndarray, worker_type: str, gpus: np.ndarray, servers: np.ndarray) -> np.ndarray:
        """(len(jobs), len(gpus)) learned best goodput of each adaptive job (0 beyond its scale-up limit).
        Jobs with the same learned model search together; a (model, noise scale) row is kept until asked
        no more (most waiting jobs ask the same one round after round)."""
        ja = self.jobs
        t = self.types.index(worker_type)
        k = np.asarray(gpus, np.int64).ravel()
        n = np.asarray(servers, np.int64).ravel()
        out = np.zeros((len(jobs), len(k)))
        limit = np.zeros(len(jobs))
        configs = (t, k.tobytes(), n.tobytes())
        if len(self._rows) > 4096:
            self._rows.clear()
        need: dict = {}
        for i, m in enumerate(np.asarray(jobs, np.int64).tolist()):
            if not ja.adaptive[m]:
                continue
            limit[i] = SCALE_UP * self.widest[m] if m in self.widest else 1
            key = (self.params(m, t), ja.specs[m], configs)
            phi = self.phi(m)
            row = self._rows.setdefault(key, {}).get(phi)
            if row is None:
                need.setdefault(key, []).append((i, phi))
            else:
                out[i] = row
        for key, items in need.items():
            params, spec, _ = key
            phis = np.array(sorted({phi for _, phi in items}))
            g = best_batch_many(params, spec, np.repeat(phis, len(k)), np.tile(k, len(phis)),
                                np.tile(n, len(phis))).reshape(len(phis), len(k))
            rows = self._rows[key]
            if len(rows) > 256:
                rows.clear()
            rows.update(zip(phis.tolist(), g))
            for i, phi in items:
                out[i] = rows[phi]
        return np.where(k[None, :] <= limit[:, None], out, 0.0)
