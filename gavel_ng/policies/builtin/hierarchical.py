"""Hierarchical policies by water filling (Gavel §4.3).

Weighted fairness across entities; inside an entity, fairness (jobs share the
entity's weight by their own weights) or FIFO (earliest jobs first). Each round
raises every unfrozen unit's normalized throughput at a rate proportional to its
weight, freezes the units whose constraint is binding (positive dual: they cannot
grow without another unit shrinking) and hands their weight to the rest.

A FIFO entity is one unit (its entity policy is `pooled`, entities.py): its jobs'
summed normalized throughput rises with the entity's weight, and a second LP per round
pushes that share to its earliest jobs (the entity policy's `priority`) without raising it:
the unit's total stays at its level, so spare capacity goes on through the rounds by weight
(uncapped, the priority LP gave FIFO entities all of it: 0.8 of a V100 at weight 0.1).
One round per water level instead of one per job (the prototype needs a MILP per round to
find bottlenecks; the duals give them for free).

Speed (space sharing, 2,048 jobs, solver_bench/bench_space_sharing.py): identical jobs of a
fairness entity are one LP row with a count (they rise together; half the LP); the priority LP
is a second HiGHS model re-solved by warm dual simplex (only bounds change); a round that raised
nothing beyond noise skips its priority LP. Most rounds end with one unit at its cap (its best
throughput per unit of time: 60 of 61 rounds at 2,048 jobs, seed 1), so the priority LP at the level
where the next unit reaches its cap is tried first: if it holds, that is the round's level and
the round's own LP is skipped; else the round's LP (primal simplex from the priority LP's last
optimum; from the slack basis in round 1, where x = 0 is feasible) finds the level. Both LPs run
unscaled (half the time per iteration), the priority LP's dual simplex without cost perturbation
(half the iterations).
"""

from __future__ import annotations

import logging
import time

import highspy
import numpy as np
import scipy.sparse as sp

from ..input.entities import Entity, entity_policy, get_entity_policy
from ..lp.highs import LinearProgram
from ..lp.layout import map_x
from ..lp.problem import Problem
from ..lp.solving import finish
from ..registry import policy
from .common import ranks

log = logging.getLogger(__name__)
DUAL_TOL = 1e-9
GROWTH_TOL = 1e-7   # relative: a round that raises no unit by more is noise (of the 1e-9 slack)


def _earliest_first(inp, jobs: np.ndarray) -> np.ndarray:
    """1 for the job that arrived first, down to 1/n for the last."""
    return (len(jobs) - ranks(-inp.time_since_arrival[jobs])) / len(jobs)


entity_policy("fairness", "jobs share the entity's weight by their own weights")
entity_policy("fifo", "the entity's share goes to its earliest jobs first", pooled=True, priority=_earliest_first)


def _units(p: Problem):
    """Units of the water filling: (job indices, entity name, pooled: the entity's jobs rise as one)."""
    inp = p.input
    specs = dict(inp.entity_specs)
    ents = [e if e is not None else "default" for e in inp.entities]
    specs.setdefault("default", Entity())
    units = []
    for name in dict.fromkeys(ents):
        jobs = np.flatnonzero(np.array(ents) == name)
        if get_entity_policy(specs[name].policy).pooled:
            units.append((jobs, name, True))
        else:
            units.extend((np.array([m]), name, False) for m in jobs)
    return units, specs


@policy("hierarchical", "water filling: weighted max-min across entities, fairness or FIFO inside each",
        aliases=("max_min_fairness_water_filling_perf",), agnostic_aliases=("max_min_fairness_water_filling",),
        evaluate=lambda p, x: min_entity_share(p, x), entities=True)
def hierarchical(p: Problem):
    start = time.perf_counter()
    if p.num_jobs == 0:
        return finish(p, None, np.zeros(p.num_vars), "none", "optimal", start)
    classes = _job_classes(p)
    if classes is None:
        x, status = _water_fill(p)
    else:   # identical jobs of a fairness entity rise together: one row each (half the LP at 2,048 jobs)
        cp, inverse = classes
        x, status = _water_fill(cp)
        x = None if x is None else map_x(cp, x, p, inverse)
    return finish(p, None, x, "highs-simplex (water filling)", status, start)


def _job_classes(p: Problem):
    """(the problem with identical jobs of one non-pooled entity as one row, each job's row), or None
    when no two jobs collapse. Jobs of a pooled entity stay apart: their priorities tell them apart."""
    inp = p.input
    if inp.counts is not None or inp.combinations is not None:
        return None
    _, entity = np.unique([e if e is not None else "default" for e in inp.entities], return_inverse=True)
    own = np.full(p.num_jobs, -1)
    for jobs, _, pooled in _units(p)[0]:
        if pooled:
            own[jobs] = jobs
    classes, inverse = inp.job_classes(np.column_stack([entity, own]))
    return None if classes.num_jobs == inp.num_jobs else (Problem(classes), inverse)


def _water_fill(p: Problem) -> tuple[np.ndarray | None, str]:
    """The water filling's allocation on p (None and HiGHS's status if an LP failed)."""
    inp = p.input
    M, n = p.num_jobs, p.num_vars
    counts = np.ones(M) if inp.counts is None else inp.counts
    units, specs = _units(p)
    U = len(units)
    N = p.normalized_thr
    pooled_jobs = np.concatenate([jobs for jobs, _, f in units if f] or [np.zeros(0, int)])
    F = len(pooled_jobs)
    # rows: validity | one per unit (water level) | one per job of a pooled unit (never lose throughput);
    # a fairness unit's row is its job's own monotonic constraint
    A, lo, hi = p.validity_rows()
    sizes = [len(jobs) for jobs, _, _ in units]
    members = np.concatenate([jobs for jobs, _, _ in units])
    # a pooled unit's level sums its jobs' (a row of a class counts once per job); a fairness unit's is its job's
    scale = np.concatenate([counts[jobs] if f else np.ones(len(jobs)) for jobs, _, f in units])
    member = sp.csr_matrix((scale, (np.repeat(np.arange(U), sizes), members)), shape=(U, M))
    unit_A = (member @ N.A).tocsr()
    base = A.shape[0]
    unit_rows = np.arange(base, base + U)
    job_rows = np.arange(base + U, base + U + F)
    mat = sp.vstack([sp.hstack([A, sp.csr_matrix((A.shape[0], 1))]),
                     sp.hstack([unit_A, sp.csr_matrix((U, 1))]),
                     sp.hstack([N.A[pooled_jobs], sp.csr_matrix((F, 1))])], format="csc")
    c = np.zeros(n + 1)
    c[-1] = 1.0
    def build(cost, t_max):
        return LinearProgram(cost, mat, np.concatenate([lo, np.zeros(U + F)]),
                             np.concatenate([hi, np.full(U + F, np.inf)]), np.r_[np.zeros(n), 0.0],
                             np.r_[np.ones(n), t_max], maximize=True, devex=False)
    lp = build(c, np.inf)
    priority_cost = np.zeros(n + 1)
    pooled = np.array([f for _, _, f in units])
    if len(pooled_jobs):
        prio = np.zeros(M)
        for jobs, name, f in units:
            if f:
                prio[jobs] = get_entity_policy(specs[name].policy).priority(inp, jobs)
        priority_cost[:n] = np.asarray((N * prio).A.sum(axis=0)).ravel()
    # the priority LP lives apart, without t (its levels are row bounds): both re-solve from their own
    # last basis, the priority LP by dual simplex as only bounds change (alternating objectives on one
    # LP cost thousands of iterations a switch: 13 s instead of 3 at 512 jobs)
    prio_lp = build(priority_cost, 0.0) if F else None
    # unscaled: half the time (coefficients within 5e-3..20); but at HiGHS's default tolerance (1e-7) the
    # rounds' x, which set later rounds' bounds, then missed rows by enough to make a later round's priority
    # LP infeasible (512 jobs, seed 1)
    for each in (lp, prio_lp) if F else (lp,):
        each.highs.setOptionValue("simplex_scale_strategy", 0)
        each.highs.setOptionValue("primal_feasibility_tolerance", 1e-9)
    if F:   # warm dual simplex without perturbing costs: half the iterations (2,048 jobs)
        prio_lp.highs.setOptionValue("dual_simplex_cost_perturbation_multiplier", 0.0)
    frozen = np.zeros(U, bool)
    prev_weights = np.full(U, np.nan)
    x = np.zeros(n)
    floor = np.zeros(U)   # each unit's level before this round (its row's lower bound)
    prio_x = prio_basis = None   # the last priority LP's optimum and its basis
    cap = _caps(p, units, A[:M], hi[:M], counts) if F else None
    # x = 0 is feasible: primal simplex from the slack basis took 1.2k iterations at 1,024 jobs where
    # dual simplex took 31k (14 s); later rounds change bounds and t's coefficients: warm dual simplex
    # from the last basis (5x fewer than primal at 512 jobs), or primal from the priority LP's (_start_from)
    lp.use_primal()
    for rounds in range(1, U + 2):
        weights = _unit_weights(units, specs, frozen, inp.weights, counts)
        for u in np.flatnonzero(weights != prev_weights):
            lp.highs.changeCoeff(int(unit_rows[u]), n, -float(weights[u]))
        prev_weights = weights
        # a guess: the next units to freeze are those reaching their caps. If the priority LP holds every
        # unit at that level, it is the round's level (no unit passes its cap) and the round needs no LP of
        # its own; if not (a unit meets the others first), the round's LP finds where. The iteration limit
        # bounds what a failed guess costs (2,048 jobs, 4.3k rows: true ones took at most 0.7k, failed
        # ones 8k); a true guess stopped by it goes on after the round's LP
        guess = _next_cap(cap, floor, weights, frozen) if F else None
        guessed = None   # t of a guess that failed
        if guess is not None:
            t, binding = guess
            if prio_x is not None and not _grew(weights, t, floor, frozen):
                x = prio_x
            else:
                res2 = _priority(prio_lp, unit_rows, floor + weights * t, pooled, limit=prio_lp.num_row // 4)
                if res2 is None:
                    guessed, guess = t, None
                else:
                    x = prio_x = res2.x[:n]
                    prio_basis = prio_lp.highs.getBasis()
        if guess is None:
            if prio_basis is not None:
                _start_from(lp, prio_basis, unit_rows[pooled])
            res = lp.run()
            lp.use_dual()
            if not res.ok and rounds > 1:   # a warm re-solve can stall on degenerate bases: redo it cold
                lp.highs.clearSolver()
                res = lp.run()
            if not res.ok:
                return None, res.status
            t = res.x[-1]
            x = res.x[:n]
            binding = (np.abs(res.row_duals[unit_rows]) > DUAL_TOL) & ~frozen
            if not binding.any():  # degenerate duals: freeze whatever is tight
                level = unit_A @ x - weights * t
                binding = ~frozen & (level - lp_lower(lp, unit_rows) <= 1e-7 * max(1.0, t))
            # a round that raised no level beyond noise (degenerate duals freeze units one by one) leaves
            # the last priority LP's optimum optimal: skip it (4 s for nothing at 2,048 jobs)
            if F and (prio_x is None or _grew(weights, t, floor, frozen)):
                if guessed is not None and prio_basis is not None and t < guessed * (1 - 1e-9):
                    prio_lp.highs.setBasis(prio_basis)   # else the guess was right, only slow: go on from there
                res2 = _priority(prio_lp, unit_rows, floor + weights * t, pooled)
                if res2 is not None:
                    x = prio_x = res2.x[:n]
                    prio_basis = prio_lp.highs.getBasis()
            elif prio_x is not None:   # nothing grew: the last priority LP's x is still optimal
                x = prio_x
        frozen |= binding if binding.any() else ~frozen
        # the levels, not unit_A @ x: a unit's surplus in one LP's vertex is spare capacity, not its own
        floor = floor + weights * t
        if F:
            for each in (lp, prio_lp):
                each.set_row_bounds(job_rows, N[pooled_jobs].value(x) * (1 - 1e-9), np.inf)
        lp.set_row_bounds(unit_rows, floor * (1 - 1e-9), np.inf)
        if frozen.all():
            break
    log.debug("water filling: %d rounds for %d units", rounds, U)
    return x, "optimal"


def _caps(p: Problem, units, J: sp.csr_matrix, time: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """An upper bound on each unit's level: its jobs' best normalized throughput per unit of their time
    (rows J, at most `time`), summed over a pooled unit's jobs; inf where a variable earns untimed."""
    N = p.normalized_thr.A.tocsr()
    J = J.tocsr()
    inv = sp.csr_matrix((1.0 / J.data, J.indices, J.indptr), shape=J.shape)
    best = N.multiply(inv).tocsr().max(axis=1).toarray().ravel() * time
    earns = N != 0
    best[earns.sum(axis=1).A1 > earns.multiply(J != 0).sum(axis=1).A1] = np.inf
    return np.array([(best[jobs] * counts[jobs]).sum() if f else best[jobs].sum() for jobs, _, f in units])


def _next_cap(cap: np.ndarray, floor: np.ndarray, weights: np.ndarray, frozen: np.ndarray):
    """(t at which the next rising units reach their caps, those units), or None if none can. The t
    of the round's LP, whose rows start from floor * (1 - 1e-9)."""
    rising = ~frozen & (weights > 0)
    reach = np.full(len(cap), np.inf)
    reach[rising] = np.maximum(cap[rising] - floor[rising] * (1 - 1e-9), 0.0) / weights[rising]
    t = reach.min()
    if not np.isfinite(t):
        return None
    return t, rising & (reach <= t + 1e-9 * max(1.0, t))


def _grew(weights: np.ndarray, t: float, floor: np.ndarray, frozen: np.ndarray) -> bool:
    """Whether the round raised an unfrozen unit beyond noise (of the 1e-9 slack)."""
    return bool(((weights * t > GROWTH_TOL * np.maximum(1.0, floor)) & ~frozen).any())


def _priority(lp: LinearProgram, unit_rows: np.ndarray, level: np.ndarray, pooled: np.ndarray,
              limit: int | None = None):
    """Hold every unit at its water level and give each pooled unit's share to its jobs of highest
    priority; the LP's result, or None if it failed (or took more than `limit` iterations). A pooled
    unit gets no more than its level: with only the lower bound, the priority objective handed pooled
    units all spare capacity ahead of units that could still rise in later rounds, and their jobs' rows
    then held it."""
    lower = level * (1 - 1e-9)
    lp.set_row_bounds(unit_rows, lower, np.where(pooled, np.maximum(level, 0.0), np.inf))
    if limit is not None:
        lp.highs.setOptionValue("simplex_iteration_limit", int(limit))
    res = lp.run()
    if limit is not None:
        lp.highs.setOptionValue("simplex_iteration_limit", 2**31 - 1)
    return res if res.ok else None


def _start_from(lp: LinearProgram, basis: highspy.HighsBasis, pooled_rows: np.ndarray) -> None:
    """Primal simplex from the priority LP's optimal basis: it is feasible at t = 0 for the next round (a
    pooled row at its upper bound is at its level, the round's lower bound). 3x fewer iterations than
    dual simplex from the last round's basis at 512 and 2,048 jobs."""
    status = list(basis.row_status)
    for r in pooled_rows:
        if status[r] == highspy.HighsBasisStatus.kUpper:
            status[r] = highspy.HighsBasisStatus.kLower
    moved = highspy.HighsBasis()   # a copy: `basis` may be restored to the priority LP afterwards
    moved.valid, moved.alien, moved.col_status, moved.row_status = True, False, basis.col_status, status
    lp.highs.setBasis(moved)
    lp.use_primal()


def min_entity_share(p: Problem, x: np.ndarray) -> float:
    """min over entities of (sum of its jobs' normalized throughput) / entity weight."""
    _, specs = _units(p)
    level = p.normalized_thr.value(x)
    names = [e if e is not None else "default" for e in p.input.entities]
    shares = {}
    for m, name in enumerate(names):
        shares[name] = shares.get(name, 0.0) + level[m]
    return min(v / specs[k].weight for k, v in shares.items()) if shares else 0.0


def lp_lower(lp: LinearProgram, rows: np.ndarray) -> np.ndarray:
    lower = np.asarray(lp.highs.getLp().row_lower_)
    return lower[rows]


def _unit_weights(units, specs, frozen: np.ndarray, job_weights: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """Each active unit's share of its entity's weight (a class row's: one job's), frozen units get 0."""
    w = np.zeros(len(units))
    active_by_entity: dict[str, list[int]] = {}
    for u, (_, name, _) in enumerate(units):
        if not frozen[u]:
            active_by_entity.setdefault(name, []).append(u)
    for name, us in active_by_entity.items():
        jobs = [units[u][0] for u in us]
        pooled = np.array([units[u][2] for u in us])
        size = np.array([counts[j].sum() for j in jobs])
        own = np.where(pooled, 1.0, np.array([job_weights[j].sum() for j in jobs]) * size)
        w[us] = specs[name].weight * own / own.sum() / np.where(pooled, 1.0, size)
    return w
