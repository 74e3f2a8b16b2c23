"""Partitioned solves for very large problems (POP, Narayanan et al., SOSP'21).

Jobs are dealt into k random groups of (almost) equal size, each with 1/k of every
pool's GPUs; the k sub-problems are solved in parallel and their allocations merged.
Every sub-allocation is valid on its share of the cluster, pairs form only inside a
group, so the merged allocation is valid on the whole cluster. The objective of the
merge is evaluated on the full problem; with `compare=True` the full problem is solved
too and the relative gap reported (Solution.warnings and `Solution.partition_gap`).
"""

from __future__ import annotations

import logging
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from .inputs import SchedulingProblem
from .problem import Problem, Solution

log = logging.getLogger(__name__)


def split(inp: SchedulingProblem, k: int, seed: int = 0) -> list[np.ndarray]:
    """Job indices of each partition, a random deal so that each sees the same mix."""
    rng = np.random.default_rng(seed)
    order = rng.permutation(inp.num_jobs)
    return [np.sort(order[i::k]) for i in range(k)]


def solve_partitioned(inp: SchedulingProblem, name: str, k: int, solver: str | None = None, seed: int = 0,
                      compare: bool = False, workers: int | None = None) -> Solution:
    from .registry import get_policy, map_x, objective_value, solve

    start = time.perf_counter()
    spec = get_policy(name)
    k = int(max(1, min(k, inp.num_jobs)))
    groups = split(inp, k, seed)
    subs = [inp.subset(g, 1.0 / k) for g in groups]
    cap = inp.capacity / k
    fits = ((inp.throughputs > 0) & (inp.scale_factors[:, None] <= cap[None, :])).any(axis=1)
    if k == 1 or not fits.all():
        sol = solve(inp, name, solver)
        if k > 1:
            sol.warnings.append(f"partitioning into {k} would leave job {inp.job_ids[int(np.argmin(fits))]} no type "
                                "with enough GPUs; solved the whole problem instead")
        return sol
    with ThreadPoolExecutor(max_workers=workers or k) as pool:
        sols = list(pool.map(lambda sub: solve(sub, name, solver), subs))
    full = Problem(inp)
    x = np.zeros(full.num_vars)
    for g, sub, sol in zip(groups, subs, sols):
        to_full = np.full(inp.num_jobs, -1)
        to_full[g] = np.arange(len(g))
        # dst (full) job -> src (sub) job index; jobs of other groups match nothing
        part = Problem(sub)
        mapped = map_x(part, sol.x, full, np.where(to_full >= 0, to_full, len(g) + inp.num_jobs))
        x += mapped
    from .solving import repair

    x = repair(full, x)
    warnings = [w for s in sols for w in s.warnings]
    value = objective_value(spec, full, x)
    sol = Solution(full.allocation(x), x, value, f"{sols[0].solver} x{k} partitions",
                   time.perf_counter() - start, warnings, all(s.ok for s in sols))
    sol.partition_gap = None
    if compare:
        ref = solve(inp, name, solver)
        sol.partition_gap = relative_gap(value, ref.objective)
        sol.warnings.append(f"partitioned into {k}: objective {value:.6g} vs {ref.objective:.6g} "
                            f"for the full solve (relative gap {sol.partition_gap:.2%})")
    return sol


def relative_gap(part: float | None, full: float | None) -> float | None:
    if part is None or full is None or not np.isfinite(full) or full == 0:
        return None
    return abs(part - full) / abs(full)
