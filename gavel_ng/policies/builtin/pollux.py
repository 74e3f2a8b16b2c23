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
  (the job's own where its profile set measured one, else the simulator's, 30 s by default;
  option ``realloc_delay`` fixes it: `pollux_sia` assumes 30 s for every job, as the Pollux
  policy in Sia's artifact does). A pending job that starts pays the delay whatever
  the policy does, so it is not penalized.
* **Interference avoidance**: at most one distributed job (GPUs on more than one
  server) per server.
* **Blind to GPU type**: every allocation is valued with one type's goodput model
  (``model_type``: the type with most GPUs by default), as Pollux knows no types. The
  job then runs with the best batch for the GPUs it actually got (PolluxAgent tunes on
  its own GPUs). A job's GPUs are all of one type (Sia's setup for Pollux on mixed
  clusters); the type is not chosen for speed.
* **Mixed clusters as Sia ran Pollux** (``mixed_types="sia"``, registered as ``pollux_sia``;
  Sia §4.3): the search sees every server as virtual nodes of at most 4 GPUs (an 8-GPU
  server is two), gives a job at most 16 GPUs and may give it GPUs of several types; the
  chosen allocation then keeps, per job, only the GPUs of the type of which it got the most
  (a tie goes to the type with the higher peak tensor FLOP/s in the GPU catalog,
  `gavel_ng.profiles.get_gpu`); its other GPUs idle that round. The default
  (``"repair"``) confines each job to one type inside the search instead, so nothing idles.
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

import numpy as np

from ...errors import InputError
from ...profiles import get_gpu
from ..registry import ADAPTIVE, round_policy
from ..rounds import Entry, RoundContext
from ..rounds.configurations import STARVED
from .pollux_search import FitnessTable, Search

MIXED_TYPES = ("repair", "sia")   # one type per job inside the search; or Sia's majority type afterwards
SIA_NODE_GPUS = 4                 # Sia presents servers to Pollux as virtual nodes of this many GPUs
SIA_MAX_GPUS = 16                 # and caps a job at this many GPUs
SIA_POLLUX_DELAY = 30.0           # the restart Pollux assumes for every job in Sia's artifact (README, shared profiles)


def power_mean(speedups: np.ndarray, p: float) -> np.ndarray:
    """FITNESS_p over the last axis (Eq. 14); under p < 0 a speedup below `STARVED` counts as `STARVED`."""
    s = np.maximum(speedups, STARVED) if p < 0 else np.asarray(speedups, float)
    return np.mean(s ** p, axis=-1) ** (1.0 / p)


@round_policy("pollux", "maximize the power mean (p = -1) of speedups over allocation matrices (GPUs per job per "
              "server) by a population search, re-allocation penalty, one distributed job per server",
              jobs=ADAPTIVE, round_seconds=60.0, type_aware=False)
class Pollux:
    """PolluxSched's allocation search (module docstring). `mixed_types`: "repair" (one type per job
    inside the search) or "sia" (Sia's setup: virtual 4-GPU nodes, 16 GPUs at most, majority type kept);
    None: the registered policy's default."""

    default_mixed = "repair"

    def __init__(self, p: float = -1.0, population: int = 32, generations: int = 40, model_type: str | None = None,
                 realloc_delay: float | None = None, interference_avoidance: bool = True,
                 mixed_types: str | None = None):
        mixed_types = self.default_mixed if mixed_types is None else mixed_types
        if mixed_types not in MIXED_TYPES:
            raise InputError("pollux.mixed_types", mixed_types, f"must be one of {', '.join(MIXED_TYPES)}")
        self.sia = mixed_types == "sia"
        if not (math.isfinite(p) and p != 0):
            raise InputError("pollux.p", p, "must be a finite non-zero number (p = -1 in the paper)")
        for name, v, lo in (("population", population, 2), ("generations", generations, 0)):
            if not (isinstance(v, int) and v >= lo):
                raise InputError(f"pollux.{name}", v, f"must be an integer >= {lo}")
        self.p = float(p)
        self.pop, self.gens = population, generations
        self.model_type = model_type
        self.delay = realloc_delay
        self.avoid = interference_avoidance

    def _setup(self, ctx: RoundContext) -> None:
        """What the search derives from the cluster (it may change between rounds on a live one)."""
        topo = ctx.topology
        names = list(topo.worker_types)
        model = self.model_type if self.model_type is not None else names[int(np.argmax(topo.capacity))]
        if model not in names:
            raise InputError("pollux.model_type", model, f"not a worker type of the cluster ({', '.join(names)})")
        self.model = model
        self.topo = topo
        self.rng = ctx.rng
        # the nodes the search sees: the servers, or (Sia's setup) virtual nodes of at most 4 GPUs
        self.node_gpus = []
        for ids in topo.server_gpus:
            step = SIA_NODE_GPUS if self.sia else max(len(ids), 1)
            self.node_gpus += [ids[i:i + step] for i in range(0, len(ids), step)]
        self.gpu_node = np.zeros(topo.num_gpus, np.int64)
        for n, ids in enumerate(self.node_gpus):
            self.gpu_node[ids] = n
        self.node_type = topo.gpu_type[[ids[0] for ids in self.node_gpus]].astype(np.int64)
        self.node_cap = np.array([len(g) for g in self.node_gpus], np.int64)
        self.onehot = np.eye(len(names), dtype=np.int64)[self.node_type]     # (N, types)
        # one type per job, or (Sia) any mix of types up to 16 GPUs
        self.kmax_cluster = min(SIA_MAX_GPUS, topo.num_gpus) if self.sia else int(topo.capacity.max())
        self.power = type_power(names)
        self.held = ctx.held

    def decide(self, ctx: RoundContext) -> list[Entry]:
        self._setup(ctx)
        jobs = ctx.jobs
        J = len(jobs)
        good_local, good_dist, kmax = self._goodput_tables(ctx)
        base = self._fair_goodput(good_local, good_dist, J)
        A0 = self._current(J)
        running = A0.sum(axis=1) > 0
        factor = np.where(running, ctx.restart_factor(None if self.delay is None else float(self.delay)), 1.0)
        search = Search(self.rng, self.node_cap, self.node_type, self.onehot, kmax, one_type=not self.sia,
                        avoid=self.avoid)
        A0 = A0.astype(search.dtype)
        fitness = FitnessTable(search, good_local, good_dist, base, factor, self.p, A0)
        pop = search.repair(self._seed_population(search, A0, running))
        fit = fitness(pop)
        for _ in range(self.gens):
            kids = search.children(pop, fit)
            both = np.concatenate([pop, kids])
            both_fit = np.concatenate([fit, fitness(kids)])
            keep = np.argsort(-both_fit, kind="stable")[: self.pop]
            pop, fit = both[keep], both_fit[keep]
        best = pop[int(np.argmax(fit))].astype(np.int64)
        if self.sia:
            best = majority_type(best, self.node_type, self.power)
        return self._entries(jobs, best)

    def _goodput_tables(self, ctx: RoundContext) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Best goodput of each job at 0..K GPUs of the model type, on one server and spread; its GPU cap
        (the most GPUs at which it runs at all: its batch limit, memory and declared maximum)."""
        K = self.kmax_cluster
        ks = np.arange(1, K + 1)
        rows = np.arange(len(ctx.jobs))
        local = np.zeros((len(rows), K + 1))
        dist = np.zeros((len(rows), K + 1))
        both = ctx.goodput(rows, self.model, np.concatenate([ks, ks]), np.repeat([1, 2], K)).reshape(len(rows), 2 * K)
        local[:, 1:], dist[:, 1:] = both[:, :K], both[:, K:]
        runs = (local[:, 1:] > 0) | (dist[:, 1:] > 0)
        kmax = np.where(runs.any(axis=1), K - np.argmax(runs[:, ::-1], axis=1), 0).astype(np.int64)
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

    def _current(self, J: int) -> np.ndarray:
        """Last round's allocation matrix of the jobs."""
        A = np.zeros((J, len(self.node_cap)), np.int64)
        for i, g in enumerate(self.held):
            if g:
                np.add.at(A[i], self.gpu_node[list(g)], 1)
        return A

    def _seed_population(self, search: Search, A0: np.ndarray, running: np.ndarray) -> np.ndarray:
        greedy = A0.copy()
        free = self.node_cap - A0.sum(axis=0)
        for i in np.flatnonzero(~running):   # every pending job a GPU where one is free
            n = np.flatnonzero(free > 0)
            if not len(n):
                break
            greedy[i, n[0]] += 1
            free[n[0]] -= 1
        half = self.pop // 2
        mutants = np.repeat(A0[None], half - 1, axis=0)
        search.mutate(mutants)
        mutants_g = np.repeat(greedy[None], self.pop - half - 1, axis=0)
        search.mutate(mutants_g)
        return np.concatenate([A0[None], greedy[None], mutants, mutants_g])

    def _entries(self, jobs: np.ndarray, A: np.ndarray) -> list[Entry]:
        """GPU ids for the chosen matrix: kept GPUs first, then free ones of each server."""
        topo = self.topo
        taken = np.zeros(topo.num_gpus, bool)
        gpus: dict[int, list[int]] = {}
        want = {}
        for i, m in enumerate(jobs.tolist()):
            for n in np.flatnonzero(A[i]).tolist():
                mine = [g for g in self.held[i] if self.gpu_node[g] == n][: int(A[i, n])]
                taken[mine] = True
                gpus.setdefault(m, []).extend(mine)
                want[(m, n)] = int(A[i, n]) - len(mine)
        for (m, n), k in want.items():
            if k:
                ids = self.node_gpus[n]
                new = ids[~taken[ids]][:k].tolist()
                taken[new] = True
                gpus[m].extend(new)
        return [Entry(m, int(topo.gpu_type[g[0]]), tuple(sorted(g))) for m, g in gpus.items()]


@round_policy("pollux_sia", "pollux as Sia ran it on mixed clusters: virtual 4-GPU nodes, at most 16 GPUs per "
              "job, GPUs of several types allowed in the search, then only the majority type's kept (the rest idle)",
              jobs=ADAPTIVE, round_seconds=60.0, type_aware=False)
class PolluxSia(Pollux):
    """`pollux` with `mixed_types="sia"` and a 30 s restart assumed for every job by default (module
    docstring)."""

    default_mixed = "sia"

    def __init__(self, p: float = -1.0, population: int = 32, generations: int = 40, model_type: str | None = None,
                 realloc_delay: float | None = SIA_POLLUX_DELAY, interference_avoidance: bool = True,
                 mixed_types: str | None = None):
        super().__init__(p, population, generations, model_type, realloc_delay, interference_avoidance, mixed_types)


def type_power(worker_types: list[str]) -> np.ndarray:
    """Each type's peak tensor FLOP/s from the GPU catalog (-1 for a type it does not list): Sia's
    tie-break between types, by a declared figure."""
    out = []
    for w in worker_types:
        try:
            out.append(get_gpu(w).tensor_flops)
        except KeyError:
            out.append(-1.0)
    return np.array(out, float)


def majority_type(A: np.ndarray, node_type: np.ndarray, power: np.ndarray) -> np.ndarray:
    """A (jobs x nodes) with each job's GPUs outside the type of which it has the most set to 0; a
    tie goes to the more powerful type (`power`), then to the lower type index."""
    T = len(power)
    counts = np.zeros((len(A), T), np.int64)
    for t in range(T):
        counts[:, t] = A[:, node_type == t].sum(axis=1)
    rank = np.empty(T, np.int64)
    rank[np.lexsort((-np.arange(T), power))] = np.arange(T)       # 0: least powerful
    keep = np.argmax(counts * T + rank[None, :], axis=1)
    return np.where(node_type[None, :] == keep[:, None], A, 0)
