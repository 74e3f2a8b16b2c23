"""Partitioned solves for very large problems (POP, Narayanan et al., SOSP'21).

Jobs are dealt into k random groups of (almost) equal size, each with 1/k of every
pool's GPUs; the k sub-problems are solved in parallel (pipeline.solve_partitioned) and
their allocations merged. Every sub-allocation is valid on its share of the cluster,
pairs form only inside a group, so the merged allocation is valid on the whole cluster.
The objective of the merge is evaluated on the full problem; with `compare=True` the
full problem is solved too and the relative gap reported (Solution.warnings and
`Solution.partition_gap`).
"""

from __future__ import annotations

import numpy as np

from ..input.scheduling_problem import SchedulingProblem
from .layout import Layout, map_x


def split(inp: SchedulingProblem, k: int, seed: int = 0) -> list[np.ndarray]:
    """Job indices of each partition, a random deal so that each sees the same mix."""
    rng = np.random.default_rng(seed)
    order = rng.permutation(inp.num_jobs)
    return [np.sort(order[i::k]) for i in range(k)]


def merge(full: Layout, groups: list[np.ndarray], parts: list[tuple[Layout, np.ndarray]]) -> np.ndarray:
    """The full problem's x from each group's (layout, x), before repair."""
    M = full.num_jobs
    x = np.zeros(full.num_vars)
    for g, (part, part_x) in zip(groups, parts):
        to_part = np.full(M, -1)
        to_part[g] = np.arange(len(g))
        # dst (full) job -> src (part) job index; jobs of other groups match nothing
        x += map_x(part, part_x, full, np.where(to_part >= 0, to_part, len(g) + M))
    return x


def relative_gap(part: float | None, full: float | None) -> float | None:
    if part is None or full is None or not np.isfinite(full) or full == 0:
        return None
    return abs(part - full) / abs(full)
