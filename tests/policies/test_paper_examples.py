"""The worked examples of the Gavel paper (§4.1, §4.3) and the hierarchical cases of issue 2."""

import numpy as np
import pytest

import gavel_ng as g
from gavel_ng.policies import Entity, SchedulingProblem
from gavel_ng.policies.lp.problem import Problem

PAPER_T = [[40.0, 10.0], [12.0, 4.0], [100.0, 50.0]]


def paper_problem():
    return SchedulingProblem.build(["j0", "j1", "j2"], ["v100", "k80"], [1, 1], PAPER_T)


def test_las_reproduces_paper_allocation():
    sol = g.solve(paper_problem(), "las")
    expected = np.array([[0.45, 0.00], [0.45, 0.09], [0.09, 0.91]])
    assert np.abs(sol.allocation.values - expected).max() < 0.01
    assert sol.objective == pytest.approx(0.727, abs=1e-3)
    assert sol.warnings == []
    sol.allocation.check()


def test_agnostic_las_is_worse_under_true_throughputs():
    aware, blind = g.solve(paper_problem(), "las"), g.solve(paper_problem(), "max_min_fairness")
    assert blind.objective < aware.objective
    # type-blind: every job's share is split over the two GPUs equally
    assert np.allclose(blind.allocation.values[:, 0], blind.allocation.values[:, 1])


def test_water_filling_weighted_example_gives_everyone_a_gpu():
    inp = SchedulingProblem.build([f"j{i}" for i in range(4)], ["v100"], [4], np.full((4, 1), 10.0),
                                  weights=[3, 1, 1, 1])
    sol = g.solve(inp, "hierarchical")
    assert np.allclose(sol.allocation.values, 1.0, atol=1e-6)
    # plain LAS stops at the first water level: job 0 gets its GPU, the others 1/3 each at least
    las = g.solve(inp, "las")
    assert las.objective == pytest.approx(1 / 3, abs=1e-6)


def test_entity_shares_follow_weights():
    M = 30
    ents = [f"e{i % 3}" for i in range(M)]
    specs = {"e0": Entity(1.0), "e1": Entity(2.0), "e2": Entity(3.0)}
    inp = SchedulingProblem.build([f"j{i}" for i in range(M)], ["v100", "k80"], [6, 6],
                                  np.tile([[10.0, 4.0]], (M, 1)), entities=ents, entity_specs=specs)
    sol = g.solve(inp, "hierarchical")
    sol.allocation.check()
    thr = Problem(inp).thr.value(sol.x)
    share = {e: thr[[i for i in range(M) if ents[i] == e]].sum() for e in specs}
    assert share["e1"] / share["e0"] == pytest.approx(2.0, rel=1e-4)
    assert share["e2"] / share["e0"] == pytest.approx(3.0, rel=1e-4)
    # the whole cluster is in use: 6 V100s at 10 steps/s and 6 K80s at 4
    assert sum(share.values()) == pytest.approx(84.0, rel=1e-6)


def test_fifo_entity_serves_its_earliest_jobs():
    ents = ["research"] * 5 + ["product"] * 5
    specs = {"research": Entity(1.0, "fifo"), "product": Entity(1.0, "fairness")}
    arrival_age = [10, 30, 20, 5, 1, 9, 8, 7, 6, 4]  # research order by arrival: j1, j2, j0, j3, j4
    inp = SchedulingProblem.build([f"j{i}" for i in range(10)], ["v100"], [4], np.full((10, 1), 10.0),
                                  entities=ents, entity_specs=specs, time_since_arrival=arrival_age)
    x = g.solve(inp, "hierarchical").allocation.to_dict()
    assert x["j1"]["v100"] == pytest.approx(1.0) and x["j2"]["v100"] == pytest.approx(1.0)
    assert all(x[j]["v100"] == pytest.approx(0.0, abs=1e-7) for j in ("j0", "j3", "j4"))
    assert all(x[f"j{i}"]["v100"] == pytest.approx(0.4) for i in range(5, 10))


@pytest.mark.parametrize("b_policy", ["fifo", "fairness"])
def test_fifo_entity_gets_its_weight_not_the_leftover(b_policy):
    """A FIFO entity rises with its weight like any unit: after a0 fills the K80, a1 (A's weight, 1)
    and b0 (B's, 0.1) share the V100 as if B were a fairness entity, not b0 taking all A left."""
    T = np.array([[0.0, 1.0], [10.0, 0.0], [10.0, 0.0]])
    inp = SchedulingProblem.build(["a0", "a1", "b0"], ["v100", "k80"], [1, 1], T, entities=["A", "A", "B"],
                                  weights=[5, 1, 1], entity_specs={"A": Entity(1.0), "B": Entity(0.1, b_policy)})
    x = g.solve(inp, "hierarchical").allocation.to_dict()
    # round 1: a0 (5/6 of A's weight) fills the K80 at t = 2.4 (a1 0.4, b0 0.24 normalized);
    # round 2: a1 rises with A's whole weight, b0 with 0.1, on the V100 (norm. 2): 0.64 + 1.1 t = 2
    t = (2 - 0.64) / 1.1
    assert x["a0"]["k80"] == pytest.approx(1.0)
    assert x["b0"]["v100"] == pytest.approx((0.24 + 0.1 * t) / 2, abs=1e-6)
    assert x["a1"]["v100"] == pytest.approx(1 - (0.24 + 0.1 * t) / 2, abs=1e-6)


def test_entity_shares_follow_weights_with_fifo_entities():
    """e0's single job caps at one GPU in round 1; the other 7 go through round 2 to e1 (FIFO), e2
    (fairness) and e3 (FIFO) by their weights 1:1:2, and inside e3 to its earliest jobs."""
    ents = ["e0"] + [f"e{1 + i % 3}" for i in range(18)]
    specs = {"e0": Entity(3.0), "e1": Entity(1.0, "fifo"), "e2": Entity(1.0), "e3": Entity(2.0, "fifo")}
    inp = SchedulingProblem.build([f"j{i}" for i in range(len(ents))], ["v100"], [8], np.full((len(ents), 1), 10.0),
                                  entities=ents, entity_specs=specs, time_since_arrival=np.arange(len(ents), 0, -1.0))
    x = g.solve(inp, "hierarchical").allocation.to_dict()
    share = {e: sum(x[f"j{i}"]["v100"] for i, name in enumerate(ents) if name == e) for e in specs}
    assert share == pytest.approx({"e0": 1.0, "e1": 1.75, "e2": 1.75, "e3": 3.5}, abs=1e-6)
    # e3's jobs by arrival (earliest first): three whole GPUs, then half of one, then nothing
    e3 = [x[f"j{i}"]["v100"] for i, name in enumerate(ents) if name == "e3"]
    assert e3 == pytest.approx([1.0, 1.0, 1.0, 0.5, 0.0, 0.0], abs=1e-6)
    assert all(x[f"j{i}"]["v100"] == pytest.approx(1.75 / 6, abs=1e-6) for i, n in enumerate(ents) if n == "e2")
