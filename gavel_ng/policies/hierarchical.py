"""Hierarchical policies by water filling (Gavel §4.3).

Weighted fairness across entities; inside an entity, fairness (jobs share the
entity's weight by their own weights) or FIFO (earliest jobs first). Each round
raises every unfrozen unit's normalized throughput at a rate proportional to its
weight, freezes the units whose constraint is binding (positive dual: they cannot
grow without another unit shrinking) and hands their weight to the rest.

A FIFO entity is one unit (its entity policy is `pooled`, entities.py): its jobs'
summed normalized throughput rises with the entity's weight, and a second LP per round
pushes that share to its earliest jobs (the entity policy's `priority`).
That gives the same result as passing the weight job by job, in as many rounds as
there are water levels instead of one per job (the prototype needs a MILP per
round to find bottlenecks; the duals give them for free).
"""

from __future__ import annotations

import logging
import time

import numpy as np
import scipy.sparse as sp

from .common import ranks
from .entities import Entity, entity_policy, get_entity_policy
from .lp import LinearProgram
from .problem import Problem
from .registry import policy
from .solving import finish

log = logging.getLogger(__name__)
DUAL_TOL = 1e-9


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
        evaluate=lambda p, x: min_entity_share(p, x))
def hierarchical(p: Problem):
    start = time.perf_counter()
    inp = p.input
    M, n = p.num_jobs, p.num_vars
    if M == 0:
        return finish(p, None, np.zeros(n), "none", "optimal", start)
    units, specs = _units(p)
    U = len(units)
    N = p.normalized_thr
    pooled_jobs = np.concatenate([jobs for jobs, _, f in units if f] or [np.zeros(0, int)])
    F = len(pooled_jobs)
    # rows: validity | one per unit (water level) | one per job of a pooled unit (never lose throughput);
    # a fairness unit's row is its job's own monotonic constraint
    A, lo, hi = p.validity_rows()
    sizes = [len(jobs) for jobs, _, _ in units]
    member = sp.csr_matrix((np.ones(sum(sizes)), (np.repeat(np.arange(U), sizes),
                                                  np.concatenate([jobs for jobs, _, _ in units]))), shape=(U, M))
    unit_A = (member @ N.A).tocsr()
    base = A.shape[0]
    unit_rows = np.arange(base, base + U)
    job_rows = np.arange(base + U, base + U + F)
    mat = sp.vstack([sp.hstack([A, sp.csr_matrix((A.shape[0], 1))]),
                     sp.hstack([unit_A, sp.csr_matrix((U, 1))]),
                     sp.hstack([N.A[pooled_jobs], sp.csr_matrix((F, 1))])], format="csc")
    c = np.zeros(n + 1)
    c[-1] = 1.0
    lp = LinearProgram(c, mat, np.concatenate([lo, np.zeros(U + F)]), np.concatenate([hi, np.full(U + F, np.inf)]),
                       np.r_[np.zeros(n), 0.0], np.r_[np.ones(n), np.inf], maximize=True, devex=False)
    priority_cost = np.zeros(n + 1)
    if len(pooled_jobs):
        prio = np.zeros(M)
        for jobs, name, pooled in units:
            if pooled:
                prio[jobs] = get_entity_policy(specs[name].policy).priority(inp, jobs)
        priority_cost[:n] = np.asarray((N * prio).A.sum(axis=0)).ravel()
    frozen = np.zeros(U, bool)
    prev_weights = np.full(U, np.nan)
    x = np.zeros(n)
    for rounds in range(1, U + 2):
        weights = _unit_weights(units, specs, frozen, inp.weights)
        for u in np.flatnonzero(weights != prev_weights):
            lp.highs.changeCoeff(int(unit_rows[u]), n, -float(weights[u]))
        prev_weights = weights
        res = lp.run()
        if not res.ok and rounds > 1:   # a warm primal re-solve can stall on degenerate bases: redo it cold
            lp.highs.clearSolver()
            lp.highs.setOptionValue("simplex_strategy", 1)
            res = lp.run()
        if not res.ok:
            return finish(p, None, None, "highs-simplex (water filling)", res.status, start)
        # later rounds start primal feasible from this basis: primal simplex re-solves faster
        lp.highs.setOptionValue("simplex_strategy", 4)
        t = res.x[-1]
        x = res.x[:n]
        binding = (np.abs(res.row_duals[unit_rows]) > DUAL_TOL) & ~frozen
        if not binding.any():  # degenerate duals: freeze whatever is tight
            level = unit_A @ x - weights * t
            binding = ~frozen & (level - lp_lower(lp, unit_rows) <= 1e-7 * max(1.0, t))
        if len(pooled_jobs) and t > 0:
            lp.set_col_bounds([n], t * (1 - 1e-9), np.inf)
            lp.set_costs(priority_cost)
            res2 = lp.run()
            if res2.ok:
                x = res2.x[:n]
            lp.set_col_bounds([n], 0.0, np.inf)
            lp.set_costs(c)
        frozen |= binding if binding.any() else ~frozen
        if F:
            lp.set_row_bounds(job_rows, N[pooled_jobs].value(x) * (1 - 1e-9), np.inf)
        lp.set_row_bounds(unit_rows, (unit_A @ x) * (1 - 1e-9), np.inf)
        if frozen.all():
            break
    log.debug("water filling: %d rounds for %d units", rounds, U)
    return finish(p, None, x, "highs-simplex (water filling)", "optimal", start)


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


def _unit_weights(units, specs, frozen: np.ndarray, job_weights: np.ndarray) -> np.ndarray:
    """Each active unit's share of its entity's weight; frozen units get 0."""
    w = np.zeros(len(units))
    active_by_entity: dict[str, list[int]] = {}
    for u, (_, name, _) in enumerate(units):
        if not frozen[u]:
            active_by_entity.setdefault(name, []).append(u)
    for name, us in active_by_entity.items():
        own = np.array([job_weights[units[u][0]].sum() if not units[u][2] else 1.0 for u in us])
        w[us] = specs[name].weight * own / own.sum()
    return w
