"""`pollux`: PolluxSched (OSDI'21 §4.2), blind to GPU type as in the paper.

What it decides, every round, for adaptive jobs: an allocation matrix A (jobs x
servers, A[j, n] = GPUs of server n that job j gets) maximizing

    FITNESS_p(A) = ( 1/J sum_j SPEEDUP_j(A_j)^p )^(1/p),   p = -1 by default (Eq. 14)
    SPEEDUP_j(A_j) = max_{m,s} GOODPUT_j(A_j, m, s) / max_{m,s} GOODPUT_j(a_f, m, s)   (Eq. 15)

over all J active jobs (running and pending). The goodput is `best_goodput_many` at the
job's current progress (the agent reports its noise scale), with K = sum_n A[j, n] GPUs,
local synchronization when they are on one server and network synchronization
otherwise. ``a_f``, the fair share, is an exclusive 1/J of the cluster: ``floor(G/J)``
GPUs packed, or ``G/J`` of one GPU's goodput when ``G/J < 1``. With p < 0 a job without
GPUs (speedup 0) would make every fitness 0; its speedup is taken as ``1e-3``, so that
the search first gives as many jobs GPUs as it can and then maximizes the mean.

* **Re-allocation penalty**: a running job whose row changes has its speedup times
  ``REALLOC_FACTOR = max(0, (T_j - R_j delta) / (T_j + delta))``, T_j its age, R_j its
  re-allocations so far (first start included), delta the re-allocation delay
  (the simulator's, 30 s by default). A pending job that starts pays the delay whatever
  the policy does, so it is not penalized.
* **Interference avoidance**: at most one distributed job (GPUs on more than one
  server) per server.
* **Blind to GPU type**: every allocation is valued with one type's goodput model
  (``model_type``: the type with most GPUs by default), as Pollux knows no types. The
  job then runs with the best batch for the GPUs it actually got (PolluxAgent tunes on
  its own GPUs). A job's GPUs are all of one type (Sia's setup for Pollux on mixed
  clusters); the type is not chosen for speed.
* **Search** (population-based, as PolluxSched): ``population`` allocation matrices,
  seeded with the current one, mutants of it and one that gives every pending job a
  GPU; each of ``generations`` rounds makes as many children by tournament selection,
  uniform crossover of job rows and mutation (one server's GPU count of about one job
  in J redrawn), repairs them (one type per job, the job's GPU range, server capacity,
  interference avoidance) and keeps the best of parents and children. The best matrix
  is applied; a job keeps the GPUs it had on a server where it keeps some.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import numpy as np

from gavel_ng.errors import InputError
from gavel_ng.topology import Topology

from .goodput import best_goodput_many, throughput_params
from .policy import STARVED
from .rounds import Entry, RoundPolicy

if TYPE_CHECKING:
    from .execution import ElasticExecutor, ElasticState



def power_mean(speedups: np.ndarray, p: float) -> np.ndarray:
    """FITNESS_p over the last axis (Eq. 14); under p < 0 a speedup below `STARVED` counts as `STARVED`."""
    s = np.maximum(speedups, STARVED) if p < 0 else np.asarray(speedups, float)
    return np.mean(s ** p, axis=-1) ** (1.0 / p)


def realloc_factor(age: np.ndarray, reallocations: np.ndarray, delta: float) -> np.ndarray:
    """Pollux's REALLOC_FACTOR (T - R delta) / (T + delta), clipped to [0, 1]."""
    age = np.asarray(age, float)
    den = age + delta
    with np.errstate(divide="ignore", invalid="ignore"):
        f = (age - np.asarray(reallocations, float) * delta) / den
    return np.where(den > 0, np.clip(f, 0.0, 1.0), 1.0)   # no delay: no penalty


class PolluxPolicy(RoundPolicy):
    """PolluxSched's allocation search (module docstring)."""

    def __init__(self, state: ElasticState, topology: Topology, executor: ElasticExecutor, seed: int = 0,
                 p: float = -1.0, population: int = 32, generations: int = 40, model_type: str | None = None,
                 realloc_delay: float | None = None, interference_avoidance: bool = True):
        super().__init__(state, topology, executor, seed)
        if not (math.isfinite(p) and p != 0):
            raise InputError("pollux.p", p, "must be a finite non-zero number (p = -1 in the paper)")
        for name, v, lo in (("population", population, 2), ("generations", generations, 0)):
            if not (isinstance(v, int) and v >= lo):
                raise InputError(f"pollux.{name}", v, f"must be an integer >= {lo}")
        if not state.adaptive.all():
            raise InputError("adaptive", int((~state.adaptive).sum()), "pollux runs adaptive jobs only")
        names = list(topology.worker_types)
        if model_type is None:
            model_type = names[int(np.argmax(topology.capacity))]
        if model_type not in names:
            raise InputError("pollux.model_type", model_type, f"not a worker type of the cluster ({', '.join(names)})")
        self.p = float(p)
        self.pop, self.gens = population, generations
        self.model_type = model_type
        self.delta = executor.delay if realloc_delay is None else float(realloc_delay)
        self.avoid = interference_avoidance
        self.node_type = topology.server_type
        self.node_cap = np.array([len(g) for g in topology.server_gpus], np.int64)
        types = len(names)
        self.onehot = np.eye(types, dtype=np.int64)[self.node_type]          # (N, types)
        self.kmax_cluster = int(topology.capacity.max())                     # one type per job
        self.network = executor.network

    # ----- the search ---------------------------------------------------------------------------
    def decide(self, now: float) -> list[Entry]:
        st = self.state
        jobs = np.fromiter(self.active, np.int64, len(self.active))
        J = len(jobs)
        good_local, good_dist, kmax = self._goodput_tables(jobs)
        base = self._fair_goodput(good_local, good_dist, J)
        A0 = self._current(jobs)
        running = A0.sum(axis=1) > 0
        factor = np.where(running, realloc_factor(now - st.arrival[jobs], st.reallocations[jobs], self.delta), 1.0)

        def fitness(A: np.ndarray) -> np.ndarray:
            K = A.sum(axis=2)
            spread = (A > 0).sum(axis=2)
            rows = np.arange(J)[None, :]
            g = np.where(spread > 1, good_dist[rows, K], good_local[rows, K])
            speed = g / base[None, :]
            changed = (A != A0[None]).any(axis=2)
            return power_mean(np.where(changed, speed * factor[None, :], speed), self.p)

        pop = self._repair(self._seed_population(A0, running), kmax)
        fit = fitness(pop)
        for _ in range(self.gens):
            kids = self._repair(self._mutate(self._crossover(pop, fit)), kmax)
            both = np.concatenate([pop, kids])
            both_fit = np.concatenate([fit, fitness(kids)])
            keep = np.argsort(-both_fit, kind="stable")[: self.pop]
            pop, fit = both[keep], both_fit[keep]
        return self._entries(jobs, pop[int(np.argmax(fit))])

    def _goodput_tables(self, jobs: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Best goodput of each job at 0..K GPUs of the model type, on one server and spread; its GPU cap."""
        st = self.state
        K = self.kmax_cluster
        ks = np.arange(1, K + 1)
        local = np.zeros((len(jobs), K + 1))
        dist = np.zeros((len(jobs), K + 1))
        kmax = np.zeros(len(jobs), np.int64)
        by_spec: dict = {}
        for i, m in enumerate(jobs.tolist()):
            by_spec.setdefault(st.etrace.specs[m], []).append(i)
        for spec, rows in by_spec.items():
            rows = np.asarray(rows)
            prog = st.progress[jobs[rows]][:, None]
            g, _, _ = best_goodput_many(spec, self.model_type, ks[None, :], np.ones_like(ks)[None, :], prog,
                                        self.network)
            local[rows, 1:] = g
            g, _, _ = best_goodput_many(spec, self.model_type, ks[None, :], np.full_like(ks, 2)[None, :], prog,
                                        self.network)
            dist[rows, 1:] = g
            cap = spec.batch_limit // max(spec.min_local_batch, 1)
            params = throughput_params(spec.family, self.model_type, self.network)
            if params.max_local_batch < spec.min_local_batch:
                cap = 0
            if spec.max_gpus is not None:
                cap = min(cap, spec.max_gpus)
            kmax[rows] = min(cap, K)
        return local, dist, kmax

    def _fair_goodput(self, local: np.ndarray, dist: np.ndarray, J: int) -> np.ndarray:
        """Goodput at a_f, an exclusive 1/J of the cluster (module docstring); 0 made tiny."""
        share = float(self.topo.capacity.sum()) / J
        if share < 1:
            g = share * local[:, 1]
        else:
            k = min(int(share), local.shape[1] - 1)
            g = local[:, k] if k <= int(self.node_cap.max()) else dist[:, k]
            g = np.where(g > 0, g, local.max(axis=1))
        return np.where(g > 0, g, 1e-12)

    def _current(self, jobs: np.ndarray) -> np.ndarray:
        """Last round's allocation matrix of these jobs."""
        A = np.zeros((len(jobs), len(self.node_cap)), np.int64)
        server = self.topo.gpu_server
        for i, m in enumerate(jobs.tolist()):
            g = self.last.get(m)
            if g:
                np.add.at(A[i], server[list(g)], 1)
        return A

    def _seed_population(self, A0: np.ndarray, running: np.ndarray) -> np.ndarray:
        greedy = A0.copy()
        free = self.node_cap - A0.sum(axis=0)
        for i in np.flatnonzero(~running):   # every pending job a GPU where one is free
            n = np.flatnonzero(free > 0)
            if not len(n):
                break
            greedy[i, n[0]] += 1
            free[n[0]] -= 1
        half = self.pop // 2
        mutants = self._mutate(np.repeat(A0[None], half - 1, axis=0))
        mutants_g = self._mutate(np.repeat(greedy[None], self.pop - half - 1, axis=0))
        return np.concatenate([A0[None], greedy[None], mutants, mutants_g])

    def _crossover(self, pop: np.ndarray, fit: np.ndarray) -> np.ndarray:
        """Children of tournament-selected parents, each job's row from one parent or the other."""
        P, J, _ = pop.shape

        def tournament() -> np.ndarray:
            a, b = self.rng.integers(0, P, (2, P))
            return np.where(fit[a] >= fit[b], a, b)

        p1, p2 = tournament(), tournament()
        pick = self.rng.random((P, J, 1)) < 0.5
        return np.where(pick, pop[p1], pop[p2])

    def _mutate(self, pop: np.ndarray) -> np.ndarray:
        """About one job in J per matrix: one server's GPU count redrawn (0..its capacity)."""
        P, J, N = pop.shape
        out = pop.copy()
        hit = self.rng.random((P, J)) < 1.0 / max(J, 1)
        hit[np.arange(P), self.rng.integers(0, J, P)] = True
        pi, ji = np.nonzero(hit)
        ni = self.rng.integers(0, N, len(pi))
        out[pi, ji, ni] = self.rng.integers(0, self.node_cap[ni] + 1)
        return out

    def _repair(self, A: np.ndarray, kmax: np.ndarray) -> np.ndarray:
        """One type per job, at most its GPU cap, server capacity, one distributed job per server."""
        A = A.copy()
        per_type = A @ self.onehot                                          # (P, J, types)
        keep = np.argmax(per_type + self.rng.random(per_type.shape) * 0.5, axis=2)
        A[self.node_type[None, None, :] != keep[:, :, None]] = 0
        A = _cap_cumulative(A, kmax[None, :, None], axis=2, order=self.rng.permutation(A.shape[2]))
        A = _cap_cumulative(A, self.node_cap[None, None, :], axis=1, order=self.rng.permutation(A.shape[1]))
        if self.avoid:
            order = self.rng.permutation(A.shape[1])
            dist = ((A > 0).sum(axis=2) > 1)[:, :, None] & (A > 0)
            seen = np.cumsum(dist[:, order], axis=1)
            extra = np.empty_like(dist)
            extra[:, order] = dist[:, order] & (seen > 1)
            A[extra] = 0
        return A

    def _entries(self, jobs: np.ndarray, A: np.ndarray) -> list[Entry]:
        """GPU ids for the chosen matrix: kept GPUs first, then free ones of each server."""
        topo = self.topo
        taken = np.zeros(topo.num_gpus, bool)
        gpus: dict[int, list[int]] = {}
        want = {}
        for i, m in enumerate(jobs.tolist()):
            for n in np.flatnonzero(A[i]).tolist():
                mine = [g for g in self.last.get(m, ()) if topo.gpu_server[g] == n][: int(A[i, n])]
                taken[mine] = True
                gpus.setdefault(m, []).extend(mine)
                want[(m, n)] = int(A[i, n]) - len(mine)
        for (m, n), k in want.items():
            if k:
                ids = topo.server_gpus[n]
                new = ids[~taken[ids]][:k].tolist()
                taken[new] = True
                gpus[m].extend(new)
        return [Entry(m, int(topo.gpu_type[g[0]]), tuple(sorted(g))) for m, g in gpus.items()]


def _cap_cumulative(A: np.ndarray, cap: np.ndarray, axis: int, order: np.ndarray) -> np.ndarray:
    """Cut A along `axis`, taken in `order`, so that its running sum stays within `cap`."""
    B = np.take(A, order, axis=axis)
    before = np.cumsum(B, axis=axis) - B
    B = np.clip(cap - before, 0, B)
    out = np.empty_like(A)
    idx = [slice(None)] * A.ndim
    idx[axis] = order
    out[tuple(idx)] = B
    return out
