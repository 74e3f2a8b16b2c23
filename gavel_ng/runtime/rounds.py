"""A round policy on a live cluster: what the cluster knows of its jobs, and the planner on live workers.

Any registered round policy (policies.rounds: `goodput`, `tiresias`, a user's plugin) runs on a
cluster through the same `RoundPlanner` as in the simulator; `ClusterRounds` moves it onto the
live workers (runtime.planner.LivePlanner) and `ClusterSource` answers its `RoundSource`
questions from the `ClusterState` instead of a simulated one:

* **Adaptive jobs** (a job spec with an ``adaptive`` block, under a policy that runs jobs
  adaptively): goodput on K GPUs of a type is Pollux's best-batch search over the job's
  *reported* throughput model and noise scale once it reported (runtime.adaptive). Before that,
  and on a type it has not reported from, the family's modeled profile stands in, at the noise
  scale it reported (or the family's curve at the job's progress). The measured level carries
  over to other types: their modeled goodput is scaled by the job's reported-over-modeled
  goodput on one GPU of the type it ran on, so the model gives only how types and GPU counts compare.
* **Fixed jobs** (and every job under a policy declared `jobs=FIXED`): their steps/s on each
  type as the policy should believe them (the measured table, the estimator), as under every
  allocation policy.
* **History**: a job's arrival is its submission time. An adaptive job's re-allocations are its
  launches (its attempts: the first start, every resize and every relaunch after a round it did not
  run), as the simulator counts them (a fresh start pays the restart delay and counts); Pollux's
  restart factor reads them. Before issue 41 they were its resizes alone, one or more fewer than the
  simulator's count of the same run, so a job moved more readily on a cluster.
* **Rules**: a job's `allowed_types` make its rates 0 elsewhere, so no policy picks them; server
  rules and quotas are the placer's (gavel_ng.rules.placement).

A job whose (type, GPU count) changes is not renewed at its lease end: it checkpoints and the
executor relaunches it on its new GPUs (a resize). Jobs running now, also after a scheduler
restart, are where they run: the planner's history and renewals follow their live placements.

**Durable**: after each round that ran something, the planner's history (GPU-seconds and
seconds each job ran, when it last stopped), the policy's own state (`history()`) and the
random stream go to the Store; each new decision (job -> type x GPUs) too, for status. A
restarted scheduler takes both back (`restore`), so that e.g. tiresias keeps its queues instead
of putting every job back in Q0. The round that was running when the scheduler stopped is not
counted (it was never recorded).
"""

from __future__ import annotations

import logging
import math

import numpy as np

from ..elastic.families import get_family
from ..elastic.goodput import DEFAULT_NETWORK_GBPS, best_batch_many, make_params, throughput_params
from ..elastic.profile_sets import phi_curve
from ..mechanism import RoundPlan
from ..policies.rounds import RoundJobs
from ..round_planner import RoundPlanner
from .jobs import FINISHED
from .planner import LivePlanner
from .records import RoundDecisionRecord, RoundHistoryRecord
from .state import ClusterState
from .store import StoreError

log = logging.getLogger(__name__)


class ClusterSource:
    """The `RoundSource` of a round policy on a cluster (module docstring). `adapts=False`: every job
    runs at its scale factor (a policy declared `jobs=FIXED`)."""

    def __init__(self, state: ClusterState, adapts: bool = True, network_gbps: float = DEFAULT_NETWORK_GBPS):
        self.state = state
        self.adapts = adapts
        self.network = network_gbps

    def _allowed(self, job) -> np.ndarray:
        """(types,) whether the job's rules let it run on each worker type."""
        return self.state.allowed([job.job_id])[0]

    def round_jobs(self, jobs: list[int]) -> RoundJobs:
        st = self.state
        with st.lock:
            js = [st.jobs[m] for m in jobs]
            T = np.asarray(st.believed_isolated(jobs), float).reshape(len(jobs), len(st.worker_types))
            allowed = st.allowed(jobs)
            adaptive = np.array([self.adapts and j.spec.adaptive is not None for j in js], bool)
            return RoundJobs(adaptive, np.array([j.spec.scale_factor for j in js], np.int64), np.where(allowed, T, 0.0),
                             np.array([j.submitted for j in js], float),
                             np.array([j.attempts if a else j.resizes for j, a in zip(js, adaptive)], np.int64))

    def goodput(self, jobs: list[int], worker_type: str, gpus: np.ndarray, servers: np.ndarray) -> np.ndarray:
        k = np.asarray(gpus, np.int64).ravel()
        n = np.broadcast_to(np.asarray(servers, np.int64), k.shape)
        out = np.zeros((len(jobs), len(k)))
        t = list(self.state.worker_types).index(worker_type)
        with self.state.lock:
            for i, m in enumerate(jobs):
                job = self.state.jobs[m]
                if self.adapts and job.spec.adaptive is not None and self._allowed(job)[t] and len(k):
                    out[i] = self._goodput(job, worker_type, k, n)
        return out

    def _goodput(self, job, worker: str, k: np.ndarray, n: np.ndarray) -> np.ndarray:
        """The adaptive job's best goodput on k GPUs (n servers) of a type (module docstring)."""
        spec, rep = job.spec.adaptive, job.report
        fam = get_family(spec.family)
        phi = rep.phi if rep is not None and rep.phi is not None else \
            float(phi_curve(spec)(min(job.steps_done / max(job.spec.steps, 1), 1.0)))
        modeled = throughput_params(fam, worker, self.network, profiles=spec.profiles)
        if rep is None or rep.params is None:
            return best_batch_many(modeled, spec, phi, k, n)
        fitted = make_params(rep.params, rep.max_local_batch, spec.family, rep.worker_type, rep.fit_error)
        if rep.worker_type == worker:
            return best_batch_many(fitted, spec, phi, k, n)
        there = throughput_params(fam, rep.worker_type, self.network, profiles=spec.profiles)
        one = np.ones(1, np.int64)
        level = best_batch_many(fitted, spec, phi, one, one)[0] / max(best_batch_many(there, spec, phi, one, one)[0],
                                                                       1e-300)
        return best_batch_many(modeled, spec, phi, k, n) * (level if math.isfinite(level) else 1.0)


class ClusterRounds(LivePlanner):
    """The SchedulerLoop's planner for a round policy on a cluster: its RoundPlanner (over a ClusterSource,
    as gavel_ng.assembly builds it) on the live workers, its history durable."""

    def __init__(self, state: ClusterState, inner: RoundPlanner, gpu_map: list[tuple[str, int]], version: int):
        super().__init__(state, inner, gpu_map, version)
        self.rounds = inner
        self.placer = inner.placer
        state.decision = []          # a round policy: status shows its decision, not an allocation

    # ----- durable history (module docstring) ----------------------------------------------------
    def restore(self) -> None:
        """After a restart (ClusterState already restored): the last decision, for status, and the
        history of the jobs still unfinished. The policy's own state only if it is the same policy."""
        st = self.state
        decision = st.store.load_round_decision()
        if decision is not None:
            st.decision = [e for e in decision.entries if e[0] in st.jobs and st.jobs[e[0]].status not in FINISHED]
        rec = st.store.load_round_history()
        if rec is None:
            return
        jobs = [r for r in rec.jobs if r[0] in st.jobs and st.jobs[r[0]].status not in FINISHED]
        same = rec.policy == self.rounds.name
        if not same:
            log.warning("round history in the store is of policy %s, not %s: only the service jobs attained is kept",
                        rec.policy, self.rounds.name)
        self.rounds.restore_history(jobs, rec.policy_state if same else None, rec.rng)
        log.info("restored the round history of %d jobs (round %d)", len(jobs), rec.round)

    def plan(self, now: float) -> RoundPlan:
        plan = super().plan(now)
        types = self.rounds.topo.worker_types
        entries = [(int(k[0]), types[int(t)], len(g)) for k, t, g in zip(plan.keys, plan.types.tolist(), plan.gpus)]
        st = self.state
        if entries != st.decision:      # an idle loop plans about every second: store only a change
            st.decision = entries
            try:
                st.store.save_round_decision(RoundDecisionRecord(st.round_no, entries))
            except StoreError:          # shown by `status --state` only; saved again with the next decision
                pass
        return plan

    def record(self, plan: RoundPlan, occupied: np.ndarray) -> None:
        if plan.num_entries:
            super().record(plan, occupied)
            jobs, policy_state, rng = self.rounds.history()
            try:
                self.state.store.save_round_history(RoundHistoryRecord(self.state.round_no, self.rounds.name,
                                                                       jobs, policy_state, rng))
            except StoreError:          # kept in memory, saved again next round
                pass

    def _before_plan(self) -> None:
        """Jobs running now (also after a scheduler restart) are where they run: the restart factor
        and the renewals follow their live placements."""
        index, rounds = self.gpu_index(), self.rounds
        with self.state.lock:
            for m in rounds.active:
                live = self.state.jobs[m].live
                if live is not None and all(p in index for p in live.placement):
                    gpus = tuple(index[p] for p in live.placement)
                    rounds.last[m] = gpus
                    rounds.placer.last[(m,)] = (int(rounds.topo.gpu_type[gpus[0]]), gpus)
