"""The `goodput` policy on a live cluster: adaptive jobs resized between rounds.

`RuntimeGoodput` is the SchedulerLoop's Allocator and Planner when the cluster's policy is
an elastic one (config.RUNTIME_ELASTIC). It is the simulator's per-round `goodput`
(gavel_ng.elastic.goodput_rounds: one whole (worker type, GPU count) per job, p-mean of
speedups, restart factor), fed by what the cluster knows instead of a simulated state:

* **Adaptive jobs** (a job spec with an ``adaptive`` block): goodput on K GPUs of a type is
  Pollux's best-batch search over the job's *reported* throughput model and noise scale
  once it reported (runtime.adaptive). Before that, and on a type it has not reported
  from, the family's modeled profile stands in, at the noise scale it reported (or the
  family's curve at the job's progress). The measured level carries over to other types:
  their modeled goodput is scaled by the job's reported-over-modeled goodput on one GPU
  of the type it ran on, so the model gives only how types and GPU counts compare.
* **Fixed jobs**: their scale factor on a type at the believed steps/s, as under every
  other policy (the measured table).
* **Restart factor**: a job's age is seconds since submission, its re-allocations its
  resizes; the delay is `realloc_delay_seconds` of the cluster config.

A job whose (type, GPU count) changes is not renewed at its lease end: it checkpoints and
the executor relaunches it on its new GPUs (a resize). Workers joining or leaving move
the policy onto the new GPUs, keeping the placements whose GPUs all remain.
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass

import numpy as np

from ..elastic.execution import DEFAULT_GPU_COUNTS, column_needs, to_speedups
from ..elastic.families import get_family
from ..elastic.goodput import DEFAULT_NETWORK_GBPS, best_batch_many, throughput_params
from ..elastic.goodput_rounds import GoodputRounds
from ..iterator.adaptive.fit import make_params
from ..mechanism import JobView, RoundPlan, make_plan
from .state import ClusterState

log = logging.getLogger(__name__)


@dataclass
class _Clock:
    """What a RoundPolicy reads of its executor: the time, the re-allocation delay, the network."""

    now: object
    delay: float
    network: float


class RuntimeGoodput(GoodputRounds):
    def __init__(self, state: ClusterState, name: str, realloc_delay: float, clock,
                 gpu_counts: tuple[int, ...] = DEFAULT_GPU_COUNTS, network_gbps: float = DEFAULT_NETWORK_GBPS):
        topo, self.gpu_map, self.version = state.topology()
        self.plan_map = self.gpu_map
        self.name = name
        super().__init__(state, topo, _Clock(clock, float(realloc_delay), network_gbps), 0,
                         agnostic=name.endswith("_agnostic"), gpu_counts=gpu_counts)

    # ----- what the cluster knows of its jobs --------------------------------------------------
    def entries(self, jobs: list[int]) -> tuple[np.ndarray, np.ndarray]:
        st, cols = self.state, self.columns
        J = len(self.names)
        need = column_needs(cols, len(jobs))
        S = np.zeros_like(need)
        with st.lock:
            T = st.believed_isolated(jobs)
            specs = [st.jobs[m].spec for m in jobs]
            for i, m in enumerate(jobs):
                if specs[i].adaptive is None:
                    S[i, :J] = T[i] * specs[i].scale_factor
                    need[i, :J] = specs[i].scale_factor
                    continue
                for t in range(J):
                    c = np.flatnonzero((cols.pool == t) & (cols.gpus > 0))
                    if len(c):
                        k = cols.gpus[c]
                        S[i, c] = self._goodput(st.jobs[m], t, k, -(-k // max(self.per_server[t], 1)))
        adaptive = np.array([s.adaptive is not None for s in specs], bool)
        sf = np.array([s.scale_factor for s in specs], np.int64)
        return to_speedups(S, need, cols, adaptive, sf), need

    def _goodput(self, job, t: int, k: np.ndarray, n: np.ndarray) -> np.ndarray:
        """The adaptive job's best goodput on k GPUs (n servers) of type t (module docstring)."""
        spec, rep = job.spec.adaptive, job.report
        fam = get_family(spec.family)
        phi = rep.phi if rep is not None and rep.phi is not None else \
            float((spec.phi or fam.phi)(min(job.steps_done / max(job.spec.steps, 1), 1.0)))
        worker = self.names[t]
        modeled = throughput_params(fam, worker, self.network)
        if rep is None or rep.params is None:
            return best_batch_many(modeled, spec, phi, k, n)
        fitted = make_params(rep.params, rep.max_local_batch, spec.family, rep.worker_type, rep.fit_error)
        if rep.worker_type == worker:
            return best_batch_many(fitted, spec, phi, k, n)
        there = throughput_params(fam, rep.worker_type, self.network)
        one = np.ones(1, np.int64)
        level = best_batch_many(fitted, spec, phi, one, one)[0] / max(best_batch_many(there, spec, phi, one, one)[0],
                                                                       1e-300)
        return best_batch_many(modeled, spec, phi, k, n) * (level if math.isfinite(level) else 1.0)

    def history(self, jobs: np.ndarray, now: float) -> tuple[np.ndarray, np.ndarray]:
        with self.state.lock:
            js = [self.state.jobs[int(m)] for m in jobs]
            return np.array([now - j.submitted for j in js]), np.array([j.resizes for j in js])

    def is_adaptive(self, job: int) -> bool:
        return self.state.jobs[job].spec.adaptive is not None

    # ----- Planner protocol on live workers ---------------------------------------------------
    def plan(self, new_jobs: JobView | None = None) -> RoundPlan:
        self._sync_topology()
        if not self.gpu_map:
            return make_plan([], [], [], [], [], [], [])
        self._keep_live()
        plan = super().plan(new_jobs)
        self.plan_map = self.gpu_map
        return plan

    def placement(self, plan: RoundPlan, entry: int) -> list[tuple[str, int]]:
        """(worker id, local GPU) of each GPU of a planned entry, in rank order."""
        return [self.plan_map[g] for g in np.asarray(plan.gpus[entry]).tolist()]

    def _keep_live(self) -> None:
        """Jobs running now (also after a scheduler restart) are where they run: the restart factor
        and the renewals follow their live placements."""
        index = {g: i for i, g in enumerate(self.gpu_map)}
        with self.state.lock:
            for m in self.active:
                live = self.state.jobs[m].live
                if live is not None and all(p in index for p in live.placement):
                    gpus = tuple(index[p] for p in live.placement)
                    self.last[m] = gpus
                    self.placer.last[(m,)] = (int(self.topo.gpu_type[gpus[0]]), gpus)

    def _sync_topology(self) -> None:
        topo, gpu_map, version = self.state.topology()
        if version == self.version:
            return
        index = {g: i for i, g in enumerate(gpu_map)}
        self.set_topology(topo, np.array([index.get(g, -1) for g in self.gpu_map], np.int64))
        self.gpu_map, self.version = gpu_map, version
        log.info("goodput: %d GPUs on %d workers", len(gpu_map), len({w for w, _ in gpu_map}))

    def restore(self) -> None:
        """After a restart: nothing to read back (reports and resizes are in the job state)."""
