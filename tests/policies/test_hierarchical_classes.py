"""Water filling on job classes (identical jobs of a fairness entity as one LP row) gives the
entity shares of the job-by-job water filling (issue 17, speed)."""

import numpy as np
import pytest

from gavel_ng.pairs import PairTable
from gavel_ng.policies import Entity, SchedulingProblem, solve
from gavel_ng.policies.builtin import hierarchical as h
from gavel_ng.policies.lp.problem import Problem

WORKERS = ["v100", "p100", "k80"]


def problem(table, space_sharing: bool) -> SchedulingProblem:
    """30 jobs of 5 job types (many identical) in two fairness entities and one FIFO entity."""
    rng = np.random.default_rng(3)
    singles = [k for k in table.job_keys if k[1] == 1][:5]
    keys = [singles[i] for i in rng.integers(len(singles), size=30)]
    ents = [f"e{i % 3}" for i in range(30)]
    specs = {"e0": Entity(1.0), "e1": Entity(2.0, "fifo"), "e2": Entity(3.0)}
    return SchedulingProblem.build(
        [f"j{i}" for i in range(30)], WORKERS, [4, 4, 4], table.matrix(keys, WORKERS),
        weights=np.where(np.arange(30) % 4 == 0, 2.0, 1.0), time_since_arrival=rng.uniform(0, 3600, 30),
        entities=ents, entity_specs=specs,
        pairs=PairTable.from_table(table, keys, WORKERS) if space_sharing else None)


def shares(p: Problem, x: np.ndarray) -> dict[str, float]:
    level = p.normalized_thr.value(x)
    ents = np.array(p.input.entities)
    return {e: float(level[ents == e].sum()) for e in sorted(set(p.input.entities))}


@pytest.mark.parametrize("space_sharing", [False, True])
def test_job_classes_give_the_job_by_job_entity_shares(reference_table, space_sharing):
    inp = problem(reference_table, space_sharing)
    p = Problem(inp)
    classes, _ = h._job_classes(p)
    assert classes.num_jobs < inp.num_jobs   # identical fairness jobs collapse; FIFO jobs stay apart
    by_job, status = h._water_fill(p)
    assert status == "optimal"
    sol = solve(inp, "hierarchical")
    sol.allocation.check()
    assert sol.ok and not sol.warnings
    expect, got = shares(p, by_job), shares(p, sol.x)
    for e in expect:
        assert got[e] == pytest.approx(expect[e], rel=1e-6, abs=1e-6)
