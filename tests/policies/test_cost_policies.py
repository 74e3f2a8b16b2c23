"""Cost policies on instances small enough to solve by hand (issue 17).

Prices are $3/h for a V100 and $1/h for a K80. min_cost maximizes, summed over jobs and
types, (throughput / the job's fastest throughput) / price: every job goes where its work
is cheapest, and nobody gets nothing while a GPU is free."""

import numpy as np
import pytest

import gavel_ng as g
from gavel_ng.policies import SchedulingProblem
from gavel_ng.policies.builtin.cost import SLO_DROPPED, SLO_MARGIN_S, SLO_SLACK
from gavel_ng.policies.lp.problem import Problem

TYPES = ["v100", "k80"]
PRICES = [3.0, 1.0]


def build(T, cap=(1, 1), steps=None, t=None, slo=None):
    M = len(T)
    return SchedulingProblem.build([f"j{i}" for i in range(M)], TYPES, list(cap), np.array(T, dtype=float),
                                   prices=PRICES, steps_remaining=steps if steps is not None else [1e4] * M,
                                   time_since_arrival=t if t is not None else [0.0] * M,
                                   slo_s=slo if slo is not None else [np.inf] * M)


def alloc(sol):
    return {j: [round(v, 6) for v in row.values()] for j, row in sol.allocation.to_dict().items()}


def test_each_job_runs_where_its_work_is_cheapest():
    # j0 per $: v100 10/3 = 3.3, k80 1/1 = 1 -> v100; j1: v100 4/3 = 1.3, k80 3/1 = 3 -> k80
    inp = build([[10, 1], [4, 3]])
    sol = g.solve(inp, "min_cost")
    assert alloc(sol) == {"j0": [1.0, 0.0], "j1": [0.0, 1.0]}
    assert sol.objective == pytest.approx((10 / 10) / 3 + (3 / 4) / 1)


def test_the_papers_ratio_objective_would_starve_a_job():
    """Why min_cost is not max sum(thr) / sum(cost): the ratio is highest with j1 alone on the
    K80 (0.75 normalized work per $) and only falls when j0 adds its 1/3 per $, so j0 gets nothing."""
    inp = build([[10, 1], [4, 3]])
    p = Problem(inp)
    ratio = p.solve(p.maximize_ratio(p.thr / p.thr_fastest, p.cost_per_hour(inp.prices)))
    assert alloc(ratio)["j0"] == [0.0, 0.0]
    assert sum(alloc(g.solve(inp, "min_cost"))["j0"]) == 1.0


def test_under_contention_the_cheap_gpu_goes_to_the_job_that_saves_most():
    # both are cheapest on the one K80: j0 gains 0.5 - 1/3 per $ there, j1 0.8 - 1/3; j0 takes the V100
    inp = build([[10, 5], [10, 8]])
    assert alloc(g.solve(inp, "min_cost")) == {"j0": [1.0, 0.0], "j1": [0.0, 1.0]}


def test_min_cost_is_cheaper_per_step_than_max_throughput():
    inp = build([[10, 5], [4, 3]], cap=(2, 2))
    p = Problem(inp)
    dollars_per_step = []
    for name in ("min_cost", "max_throughput"):
        x = g.solve(inp, name).x
        dollars_per_step.append(p.cost_per_hour(inp.prices).value(x).sum() / p.thr.value(x).sum())
    assert dollars_per_step[0] < dollars_per_step[1]


def test_an_slo_is_met_at_the_cheapest_mix_of_types():
    # 100,000 steps due in 12,500 s: 8 steps/s, asked for with SLO_SLACK of the time to spare
    # (1,250 s > SLO_MARGIN_S). The cheapest way to get r = need / (1 - slack) from a V100 (10/s,
    # 1/3 per $) and a K80 (4/s, 0.4 per $) is as much K80 as the rate allows: 10 x_v + 4 x_k = r,
    # x_v + x_k = 1.
    assert SLO_SLACK * 12500 > SLO_MARGIN_S
    inp = build([[10, 4]], steps=[1e5], slo=[12500.0])
    rate = 8.0 / (1 - SLO_SLACK)
    x_v = (rate - 4) / 6
    sol = g.solve(inp, "min_cost_slo")
    np.testing.assert_allclose(sol.allocation.values[0], [x_v, 1 - x_v], atol=1e-6)
    assert not sol.warnings
    # min_cost alone puts it on the K80: 4 steps/s, far too slow for the deadline
    assert alloc(g.solve(inp, "min_cost"))["j0"] == [0.0, 1.0]


def test_an_slo_that_can_just_be_met_runs_at_full_speed():
    # 9.5 steps/s needed, with the slack more than 10: asked for the best, the whole V100
    inp = build([[10, 4]], steps=[9.5e4], slo=[1e4])
    sol = g.solve(inp, "min_cost_slo")
    assert alloc(sol)["j0"] == [1.0, 0.0] and not sol.warnings


def test_a_lost_slo_is_dropped_named_and_the_job_still_runs(caplog):
    # j0's deadline passed; j1's cannot be met even alone on the V100 (needs 20 steps/s)
    inp = build([[10, 4], [10, 4]], steps=[1e4, 2e4], t=[2000.0, 0.0], slo=[1000.0, 1000.0], cap=(2, 2))
    sol = g.solve(inp, "min_cost_slo")
    assert sol.warnings == [SLO_DROPPED % (2, "j0, j1")]
    assert [r.jobs for r in caplog.records if r.name == "gavel_ng.policies.builtin.cost"] == [["j0", "j1"]]
    # scheduled like jobs without an SLO: their cheapest type, not nothing
    assert alloc(sol) == {"j0": [0.0, 1.0], "j1": [0.0, 1.0]}


def test_slos_that_do_not_fit_together_drop_the_most_demanding():
    # one V100: j0 needs 9 of its 10 steps/s (with slack), j1 5 of 10; together they do not fit
    need = np.array([8.1, 4.5]) * (1 - SLO_SLACK)
    inp = build([[10, 1], [10, 1]], steps=need * 1e4, slo=[1e4, 1e4])
    sol = g.solve(inp, "min_cost_slo")
    assert sol.warnings == [SLO_DROPPED % (1, "j0")]
    thr = Problem(inp).thr.value(sol.x)
    assert thr[1] >= 4.5 * (1 - 1e-6)
    assert sum(alloc(sol)["j0"]) > 0          # the job whose SLO was dropped still runs


def test_without_slos_min_cost_slo_is_min_cost():
    inp = build([[10, 5], [10, 8], [4, 3]], cap=(2, 1))
    np.testing.assert_allclose(g.solve(inp, "min_cost_slo").allocation.values,
                               g.solve(inp, "min_cost").allocation.values, atol=1e-9)
