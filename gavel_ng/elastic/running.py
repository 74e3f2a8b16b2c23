"""An adaptive job running on a configuration: the batch it picks there and the progress it makes.

One implementation for every executor that runs adaptive jobs by the model: the simulator
(`gavel_ng.simulator.adaptive.AdaptiveRunner`, every entry of a round) and the paced job
(`gavel_ng.worker.paced_job`, a real process under a real worker that stands for a job on a GPU).
Both pick, when the job starts on a configuration and at each round start after, the (per-GPU
batch, accumulation) of best goodput at the job's progress (the PolluxAgent's choice,
`best_goodput_many`), keep it for the round, and progress at that batch and throughput exactly
(`seconds_to_progress` / `progress_after`: the noise scale grows as it trains). Progress is the
fraction of the job's `work` (M0-equivalent examples) done; one optimizer step takes
``batch / throughput`` seconds.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .efficiency import AdaptiveSpec, progress_after, seconds_to_progress
from .goodput import best_goodput_many, throughput_params
from .profile_sets import batch_stats, phi_curve


@dataclass(frozen=True)
class Picked:
    """What a job picks on each configuration (arrays): goodput (M0-equivalent examples/s), total
    batch M (0: no allowed batch there), per-GPU batch, accumulation steps, throughput (examples/s)."""

    goodput: np.ndarray
    batch: np.ndarray
    local_batch: np.ndarray
    accumulation: np.ndarray
    throughput: np.ndarray

    @property
    def step_seconds(self) -> np.ndarray:
        """Seconds of one optimizer step (inf where nothing runs)."""
        with np.errstate(divide="ignore", invalid="ignore"):
            return np.where((self.batch > 0) & (self.throughput > 0), self.batch / self.throughput, np.inf)


def pick(spec: AdaptiveSpec, worker_type: str, gpus: np.ndarray, servers: np.ndarray, progress: np.ndarray,
         network_gbps: float, batch: np.ndarray | None = None) -> Picked:
    """The best batch of each job of `spec` on `gpus` GPUs of `worker_type` over `servers` servers at its
    `progress` (arrays, broadcast); `batch`: the total batch each ran at last (0: none yet), whose
    statistics pick the next where the noise scale depends on the batch (`best_goodput_many`)."""
    k = np.atleast_1d(np.asarray(gpus, np.int64))
    n = np.atleast_1d(np.asarray(servers, np.int64))
    now = None if batch is None else np.where(np.asarray(batch) > 0, batch, spec.init_batch)
    g, m, s = best_goodput_many(spec, worker_type, k, n, progress, network_gbps, batch=now)
    params = throughput_params(spec.family, worker_type, network_gbps, profiles=spec.profiles)
    return Picked(np.atleast_1d(g), np.atleast_1d(k * m * (s + 1)), np.atleast_1d(m), np.atleast_1d(s),
                  np.atleast_1d(params.throughput(m, s, k, n)))


def curve_batch(spec: AdaptiveSpec, batch: float) -> float | None:
    """The batch whose noise-scale curve a job at total `batch` follows (None: the spec's one curve)."""
    return float(batch) if batch_stats(spec) is not None else None


def advance(spec: AdaptiveSpec, batch: np.ndarray, throughput: np.ndarray, work: np.ndarray,
            progress: np.ndarray, seconds: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Run jobs of `spec` for `seconds` at (total batch, throughput): (progress after, seconds used,
    finished). Every job given shares one noise-scale curve (`curve_batch` of its batch: group by it)."""
    batch = np.atleast_1d(np.asarray(batch, float))
    x, w, p, sec = (np.broadcast_to(np.asarray(v, float), batch.shape) for v in (throughput, work, progress, seconds))
    curve = phi_curve(spec, curve_batch(spec, batch[0]))
    need = np.atleast_1d(seconds_to_progress(curve, spec.init_batch, batch, x, w, p, 1.0))
    done = need <= sec
    used = np.where(done, need, np.maximum(sec, 0.0))
    after = np.ones(len(batch))
    rest = ~done
    if rest.any():
        after[rest] = np.atleast_1d(progress_after(curve, spec.init_batch, batch[rest], x[rest], w[rest], p[rest],
                                                   sec[rest]))
    return after, used, done
