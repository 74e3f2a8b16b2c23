"""`sia`: Sia's scheduler (SOSP'23 §3.1-3.3) as a round policy, to compare `goodput` with.

Every round (60 s, Sia's) it chooses at most one *configuration* per job from a small set
per GPU type, built from the type's server size R (`sia_gpu_counts`): 1, 2, 4, ... R GPUs
on one server, and whole servers (2R, 3R, ... up to the type's servers). A server whose
size is not a power of two is split into power-of-two virtual nodes (6 = 4 + 2, as the
paper suggests); R is a type's largest virtual node, and only virtual nodes of size R
make up the multi-server configurations. The set is declared to the planner
(`round_policy(gpu_counts=...)`), so `ctx.columns` are exactly these configurations.

The 0/1 program, over the goodput matrix G (job x configuration):

* G is the job's goodput on each configuration at its progress now (`ctx.rates`; a fixed
  job: its throughput times its GPU count on each type), divided by the row's smallest
  non-zero value and multiplied by the job's minimum GPU count (a fixed job's count; an
  adaptive job's smallest configuration that runs), so rows compare across jobs;
* a running job's configurations other than its current one are multiplied by the restart
  factor r = (T - N S) / (T + S) (age T, N restarts, S the re-allocation delay);
* with p < 0 (default -0.5) it minimizes ``sum A G^p + lambda (1 - |A_i|)``, i.e. maximizes
  ``sum A (lambda - G^p)``; with p > 0 it maximizes ``sum A (G^p + lambda)``. lambda = 1.1 is
  worth more than any job's least useful configuration (G^p <= 1), so no job waits while
  GPUs it could use are free;
* at most one configuration per job, GPUs of each type within capacity (`ctx.assign`);
* scale-up: an adaptive job starts at its minimum (1 GPU) and grows by at most `scale_up`
  (2x) per round from the GPUs it holds; it may shrink freely. A job that did not run last
  round (new or preempted) starts again at its minimum (the paper's rule read literally; Sia's
  artifact learns a job's limit on one type and applies it to every type).

Placement follows Sia's placer (`place_configurations`): a configuration of fewer GPUs than
a node stays on one (virtual) node, a whole-node one takes whole free nodes; a job whose
configuration stays keeps its GPUs. When that fails (fragmentation), the type is packed
again from scratch, largest first, each job preferring its old GPUs; with power-of-two node
sizes of one R per type that always succeeds (every node's used GPUs stay a multiple of the
next, smaller, size). A job that still fits nowhere waits the round (Sia evicts and retries).

Ties and restarts, as Sia's artifact: G^p is rounded to 2 decimals (`decimals`), and among the
options that rounding makes equal a running job keeps its own (a tenth of the last digit added
to its current configuration's value): HiGHS would otherwise return another optimal vertex each
round, and identical jobs would take turns on the GPUs, each turn a restart. A job still paying
a restart keeps its configuration (`RoundContext.pinned`, through `ctx.assign`).

Where ours differs from Sia's implementation: Sia bootstraps a job's goodput on types it has
not run on from single-GPU profiles and learns its scale-up limit on one type for all; here
the policy reads the simulator's (or the cluster's) goodput model, the truth, unless the
simulator is told to give it a learned one (`SimConfig.policy_model`, simulator.learned). Sia
solves with CBC through cvxpy; we use HiGHS. The restart factor is applied to running jobs only
(a job that has not started would otherwise get r = 0 at age 0 and never start).
"""

from __future__ import annotations

import logging
import math

import numpy as np

from ...errors import InputError
from ...topology import Topology
from ..registry import BOTH, round_policy
from ..rounds import Entry, RoundContext

log = logging.getLogger(__name__)

DEFAULT_P = -0.5      # Sia's evaluation (§4.3)
DEFAULT_LAMBDA = 1.1  # the penalty for a job given no configuration


def _power_two_parts(n: int) -> list[int]:
    """n as a sum of distinct powers of two, largest first (6 -> [4, 2])."""
    return [1 << b for b in range(int(n).bit_length() - 1, -1, -1) if n >> b & 1]


def virtual_nodes(topology: Topology) -> list[list[np.ndarray]]:
    """Per type, its (virtual) nodes as arrays of GPU ids: each server split into power-of-two parts."""
    out = []
    for servers in topology.type_servers:
        nodes = []
        for s in servers.tolist():
            ids, start = topology.server_gpus[s], 0
            for size in _power_two_parts(len(ids)):
                nodes.append(ids[start:start + size])
                start += size
        out.append(nodes)
    return out


def node_sizes(nodes: list[list[np.ndarray]]) -> np.ndarray:
    """R per type: its largest virtual node (0 for a type without GPUs)."""
    return np.array([max((len(n) for n in ns), default=0) for ns in nodes], np.int64)


def sia_gpu_counts(topology: Topology) -> list[tuple[int, ...]]:
    """Sia's configuration set per type (§3.2): 1, 2, 4, ... R on one node; 2R, 3R, ... on whole nodes."""
    nodes = virtual_nodes(topology)
    out = []
    for ns, R in zip(nodes, node_sizes(nodes).tolist()):
        whole = sum(len(n) == R for n in ns)
        single = [1 << b for b in range(R.bit_length())] if R else []
        out.append(tuple(single + [m * R for m in range(2, whole + 1)]))
    return out


@round_policy("sia", "Sia (SOSP'23): one configuration per job from powers of two within a server and whole "
              "servers, goodput row-normalized, power p = -0.5, penalty lambda = 1.1 for no configuration, "
              "restart factor, 2x scale-up per round (0/1 program)",
              jobs=BOTH, round_seconds=60.0, gpu_counts=sia_gpu_counts)
class Sia:
    """The `sia` policy (module docstring). Options: `p`, `lam` (lambda), `restart_factor`, `scale_up`
    (the most a job's GPU count may grow in a round; None: no limit), `decimals` (G^p rounded to this many,
    a running job keeping its configuration among the ties; None: neither)."""

    def __init__(self, p: float = DEFAULT_P, lam: float = DEFAULT_LAMBDA, restart_factor: bool = True,
                 scale_up: float | None = 2.0, decimals: int | None = 2):
        if not (isinstance(p, (int, float)) and math.isfinite(p) and p != 0):
            raise InputError("sia.p", p, "must be a finite non-zero number (Sia: -0.5)")
        if not (isinstance(lam, (int, float)) and math.isfinite(lam) and lam >= 0):
            raise InputError("sia.lam", lam, "must be a finite number >= 0 (Sia: 1.1)")
        if not isinstance(restart_factor, bool):
            raise InputError("sia.restart_factor", restart_factor, "must be true or false")
        if scale_up is not None and not (isinstance(scale_up, (int, float)) and scale_up >= 1):
            raise InputError("sia.scale_up", scale_up, "must be a number >= 1, or null for no limit (Sia: 2)")
        self.p, self.lam = float(p), float(lam)
        self.restart = restart_factor
        self.scale_up = None if scale_up is None else float(scale_up)
        ok = decimals is None or (isinstance(decimals, int) and not isinstance(decimals, bool) and decimals >= 0)
        if not ok:
            raise InputError("sia.decimals", decimals, "must be an integer >= 0, or null for no rounding (Sia: 2)")
        self.decimals = decimals

    def decide(self, ctx: RoundContext) -> list[Entry]:
        G = self.goodput_matrix(ctx)
        with np.errstate(divide="ignore"):
            Gp = np.where(G > 0, G, 1.0) ** self.p
        if self.decimals is not None:   # Sia's artifact rounds G^p (sia.py): near-equal options tie
            Gp = np.round(Gp, self.decimals)
        V = np.where(G > 0, self.lam - Gp if self.p < 0 else Gp + self.lam, 0.0)
        if self.decimals is not None:   # among options the rounding made equal, a running job keeps its own
            rows = np.flatnonzero(ctx.current >= 0)
            V[rows, ctx.current[rows]] += 0.1 * 10.0 ** -self.decimals
        choice = ctx.assign(V, self.allowed(ctx))
        rows = np.flatnonzero(choice >= 0)
        cols = ctx.columns
        return place_configurations(ctx.topology, ctx.jobs[rows].tolist(), cols.pool[choice[rows]].tolist(),
                                    ctx.need[rows, choice[rows]].astype(np.int64).tolist(),
                                    [ctx.held[i] for i in rows.tolist()])

    def goodput_matrix(self, ctx: RoundContext) -> np.ndarray:
        """G: goodput per (job, configuration), row-normalized to the job's minimum GPU count, with the
        restart factor on a running job's other configurations."""
        G = ctx.min_speedups
        return ctx.with_restart_factor(G) if self.restart else G

    def allowed(self, ctx: RoundContext) -> np.ndarray:
        """(jobs, columns) Sia's configurations, and for adaptive jobs at most `scale_up` x the GPUs
        held now (a job not running: its smallest configuration that runs)."""
        cols = ctx.columns
        counts = sia_gpu_counts(ctx.topology)
        ok = np.array([g == 0 or g in counts[t] for t, g in zip(cols.pool.tolist(), cols.gpus.tolist())], bool)
        keep = np.broadcast_to(ok, (len(ctx.jobs), cols.num)).copy()
        if self.scale_up is not None:
            held = np.array([len(h) for h in ctx.held], float)
            start = np.where(ctx.rates > 0, ctx.need, np.inf).min(axis=1, initial=np.inf)
            limit = np.where(held > 0, held * self.scale_up, start)
            keep &= ~ctx.adaptive[:, None] | (cols.gpus[None, :] <= limit[:, None])
        return keep


def place_configurations(topo: Topology, jobs: list[int], types: list[int], ks: list[int],
                         held: list[tuple[int, ...]]) -> list[Entry]:
    """Entries for the chosen (job, type, K GPUs) by Sia's placer rules (module docstring): a job that
    keeps its configuration keeps its GPUs; otherwise, per type, packed again largest first."""
    nodes = virtual_nodes(topo)
    R = node_sizes(nodes)
    out: list[Entry] = []
    for t in sorted(set(types)):
        mine = [i for i, u in enumerate(types) if u == t]
        items = [(ks[i], tuple(held[i]) if held[i] and (topo.gpu_type[list(held[i])] == t).all() else ())
                 for i in mine]
        got = _pack(topo, nodes[t], int(R[t]), items, keep=True)
        if any(g is None for g in got):
            got = _pack(topo, nodes[t], int(R[t]), items, keep=False)
            lost = sum(g is None for g in got)
            if lost:
                log.debug("sia placement: %d job(s) of type %d fit no node this round and wait", lost, t)
        out += [Entry(jobs[i], t, tuple(sorted(g))) for i, g in zip(mine, got) if g is not None]
    return out


def _pack(topo: Topology, nodes: list[np.ndarray], R: int, items: list[tuple[int, tuple[int, ...]]],
          keep: bool) -> list[tuple[int, ...] | None]:
    """GPUs for each (K, held GPUs) on one type's nodes, or None where it does not fit. `keep`: jobs whose
    held GPUs have the configuration's shape keep them first; else all are placed largest first, each
    on its held GPUs when they are still free."""
    node_of = np.full(topo.num_gpus, -1, np.int64)
    for n, ids in enumerate(nodes):
        node_of[ids] = n
    size = np.array([len(ids) for ids in nodes], np.int64)
    free = np.zeros(topo.num_gpus, bool)
    for ids in nodes:
        free[ids] = True
    claimed = np.zeros(topo.num_gpus, np.int64)   # how many jobs of this round held each GPU last round
    for _, h in items:
        claimed[list(h)] += 1

    def shaped(k: int, h: tuple[int, ...]) -> bool:
        """Held GPUs that are exactly a placement of K GPUs by the rules (and free now)."""
        if len(h) != k or not free[list(h)].all() or (node_of[list(h)] < 0).any():
            return False
        used = np.unique(node_of[list(h)])
        if k < R:
            return len(used) == 1
        whole, rest = divmod(k, R)
        full = [n for n in used.tolist() if size[n] == R and free[nodes[n]].all() and set(nodes[n].tolist()) <= set(h)]
        return len(full) == whole and len(used) == whole + (rest > 0)

    got: list[tuple[int, ...] | None] = [None] * len(items)
    order = sorted(range(len(items)), key=lambda i: -items[i][0])
    if keep:
        for i in order:
            k, h = items[i]
            if h and shaped(k, h):
                got[i] = h
                free[list(h)] = False
    for i in order:
        if got[i] is not None:
            continue
        k, h = items[i]
        if not keep and h and shaped(k, h):
            got[i] = h
            free[list(h)] = False
            continue
        own = np.zeros(topo.num_gpus, bool)
        own[list(h)] = True
        others = (claimed - own) > 0
        whole, rest = divmod(k, R) if k >= R else (0, k)
        taken: list[int] = []
        if whole:
            empty = [n for n, ids in enumerate(nodes) if size[n] == R and free[ids].all()]
            # own nodes first, then those where the fewest GPUs other jobs held are taken from them
            empty.sort(key=lambda n: (-int(own[nodes[n]].any()), int(others[nodes[n]].sum()), n))
            if len(empty) < whole:
                continue
            for n in empty[:whole]:
                taken += nodes[n].tolist()
            free[taken] = False
        if rest:
            room = np.array([int(free[ids].sum()) for ids in nodes])
            clean = np.array([int((free[ids] & ~others[ids]).sum()) for ids in nodes])
            fits = np.flatnonzero(room >= rest)
            if not len(fits):
                free[taken] = True
                continue
            # a node where the job displaces nobody, then best fit (the fullest node that fits)
            n = int(fits[np.lexsort((fits, room[fits], clean[fits] < rest))[0]])
            ids = nodes[n][free[nodes[n]]]
            ids = ids[np.argsort(others[ids] & ~own[ids], kind="stable")][:rest]
            taken += ids.tolist()
            free[ids] = False
        got[i] = tuple(taken)
    return got
