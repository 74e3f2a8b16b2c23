"""Space sharing by partner classes, placement twins and partitioned solves (issue 5, policy part)."""

import json

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import gavel_ng as g
from gavel_ng.cli import main
from gavel_ng.cluster import Cluster
from gavel_ng.errors import InputError
from gavel_ng.jobs import Job
from gavel_ng.pairs import PairTable
from gavel_ng.policies import SchedulingProblem, get_policy, solve
from gavel_ng.policies.lp.packing import _northwest, _within
from gavel_ng.policies.lp.pipeline import solve_partitioned
from gavel_ng.policies.lp.problem import Problem
from gavel_ng.throughputs import ThroughputTable

WORKERS = ["v100", "p100", "k80"]
MINIMIZE = {"makespan", "ftf"}


def random_jobs(table, n, seed, sfs=(1, 1, 1, 2)):
    rng = np.random.default_rng(seed)
    keys = table.job_keys
    jobs = []
    for i in range(n):
        sf = int(rng.choice(sfs))
        pool = [k for k in keys if k[1] == sf]
        key = pool[rng.integers(len(pool))]
        total = float(rng.uniform(1e4, 1e6))
        jobs.append(Job(f"j{i}", key[0], sf, weight=float(rng.choice([1, 1, 2])), steps_total=total,
                        steps_remaining=total * float(rng.uniform(0.3, 1)), arrival_time=float(rng.uniform(0, 100))))
    return jobs


def cluster_for(n):
    m = max(2, n // 4)
    return Cluster({w: m for w in WORKERS}, price_per_gpu_hour={"v100": 2.48, "p100": 1.46, "k80": 0.45})


def effective_from_rows(table, inp, jobs, alloc):
    """Each job's steps/s recomputed from the concrete rows and the table's pair entries."""
    key = {j.id: (j.job_type, j.scale_factor) for j in jobs}
    thr = dict.fromkeys(inp.job_ids, 0.0)
    for r, row in enumerate(alloc.rows):
        for c, w in enumerate(alloc.worker_types):
            t = alloc.values[r, c]
            if t <= 0:
                continue
            if len(row) == 1:
                thr[row[0]] += t * table.get(key[row[0]], w)
            else:
                a, b = row
                mine, theirs = table.get_pair(key[a], key[b], w)
                useful = mine / table.get(key[a], w) + theirs / table.get(key[b], w)
                assert useful > 1 and key[a][1] == key[b][1], (row, w)
                thr[a] += t * mine
                thr[b] += t * theirs
    return np.array([thr[j] for j in inp.job_ids])


@pytest.mark.parametrize("policy", ["las", "makespan", "ftf", "fifo", "max_throughput", "min_cost", "hierarchical",
                                    "las_agnostic", "isolated", "allox", "min_cost_slo"])
def test_concrete_pairs_are_valid_and_match_the_class_model(reference_table, policy):
    jobs = random_jobs(reference_table, 40, seed=1)
    inp = SchedulingProblem.from_jobs(cluster_for(40), jobs, reference_table, now=200.0, space_sharing=True)
    sol = solve(inp, policy)
    sol.allocation.check()
    assert sol.ok, sol.warnings
    thr = effective_from_rows(reference_table, inp, jobs, sol.allocation)
    assert np.allclose(thr, Problem(inp).thr.value(sol.x), rtol=1e-6, atol=1e-6)
    if policy in ("las", "max_throughput", "hierarchical"):
        assert any(len(r) == 2 for r in sol.allocation.rows)


def test_rows_grow_with_useful_partner_classes_not_with_pairs(reference_table):
    jobs = [Job(f"j{i}", "ResNet-18 (batch size 16)" if i % 2 else "LM (batch size 5)") for i in range(600)]
    inp = SchedulingProblem.from_jobs(cluster_for(600), jobs, reference_table, space_sharing=True)
    p = Problem(inp)
    # each job: 3 types alone + at most 2 partner classes x 3 types; never 600^2 pair rows
    assert p.num_vars <= 600 * 3 * 3
    assert sum(a.shape[0] for a, _, _ in p.extra_rows) <= 600 * 3 + 3
    sol = solve(inp, "max_throughput")
    sol.allocation.check()
    pairs = [r for r in sol.allocation.rows if len(r) == 2]
    assert 0 < len(pairs) <= 3 * (600 + 1)


def test_impossible_and_useless_pairs_are_never_variables():
    table = ThroughputTable.from_gavel_dict({"v100": {
        "('A', 1)": {"null": 10.0, "('A', 1)": [6.0, 6.0], "('B', 1)": [0.0, 0.0], "('C', 1)": [5.0, 4.0]},
        "('B', 1)": {"null": 10.0, "('A', 1)": [0.0, 0.0], "('B', 1)": [4.0, 4.0], "('C', 1)": [5.0, 6.0]},
        "('C', 1)": {"null": 10.0, "('A', 1)": [4.0, 5.0], "('B', 1)": [6.0, 5.0], "('C', 1)": [5.0, 5.0]},
    }})
    jobs = [Job("a0", "A"), Job("a1", "A"), Job("b0", "B"), Job("b1", "B"), Job("c0", "C"), Job("c1", "C")]
    inp = SchedulingProblem.from_jobs(Cluster({"v100": 3}), jobs, table, space_sharing=True)
    p = Problem(inp)
    partner = p.row_partner[p.var_row]
    owner_class = inp.pairs.job_class[p.members[p.var_row, 0]]
    got = {(int(a), int(b)) for a, b in zip(owner_class[partner >= 0], partner[partner >= 0])}
    # A+A (1.2) and B+C (1.1) help; A+B impossible, A+C (0.9), B+B (0.8), C+C (1.0) do not
    assert got == {(0, 0), (1, 2), (2, 1)}
    sol = solve(inp, "las")
    sol.allocation.check()
    assert {frozenset(r) for r in sol.allocation.rows if len(r) == 2} <= {
        frozenset(("a0", "a1")), *(frozenset((b, c)) for b in ("b0", "b1") for c in ("c0", "c1"))}
    assert sol.objective > solve(SchedulingProblem.from_jobs(Cluster({"v100": 3}), jobs, table), "las").objective


def test_decomposition_rules():
    i, k, t = _northwest(np.array([0.3, 0.5, 0.2]), np.array([0.6, 0.4]))
    assert len(t) <= 3 + 2 - 1 and np.isclose(t.sum(), 1.0)
    assert np.allclose(np.bincount(i, t, 3), [0.3, 0.5, 0.2]) and np.allclose(np.bincount(k, t, 2), [0.6, 0.4])
    a = np.array([0.5, 0.2, 0.2, 0.1])   # largest = half the total: must pair with all the others
    i, k, t = _within(a)
    assert (i != k).all() and len(t) <= len(a) + 1
    assert np.allclose(np.bincount(i, t, 4) + np.bincount(k, t, 4), a)


SS_POLICIES = ["las", "makespan", "max_throughput", "fifo", "ftf", "min_cost", "las_agnostic"]


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(seed=st.integers(0, 10_000), n=st.integers(2, 24), policy=st.sampled_from(SS_POLICIES))
def test_space_sharing_never_makes_an_objective_worse(reference_table, seed, n, policy):
    jobs = random_jobs(reference_table, n, seed)
    cluster = cluster_for(n)
    plain = solve(SchedulingProblem.from_jobs(cluster, jobs, reference_table, now=200.0), policy)
    packed_inp = SchedulingProblem.from_jobs(cluster, jobs, reference_table, now=200.0, space_sharing=True)
    packed = solve(packed_inp, policy)
    packed.allocation.check()
    tol = 2e-4 * max(1.0, abs(plain.objective))  # ftf bisects to a relative 1e-4
    if policy == "las_agnostic":  # agnostic decides on other numbers: only validity is promised
        return
    if policy in MINIMIZE:
        assert packed.objective <= plain.objective + tol
    else:
        assert packed.objective >= plain.objective - tol


def test_packed_names_and_missing_pairs(reference_table):
    spec = get_policy("max_min_fairness_perf_packed")
    assert spec.packed and spec.name == "las_packed" and not spec.agnostic
    assert get_policy("max_min_fairness_packed").agnostic
    for name in ["fifo_packed", "finish_time_fairness_perf_packed", "min_total_duration_perf_packed",
                 "max_min_fairness_water_filling_perf_packed", "max_sum_throughput_perf_packed"]:
        assert get_policy(name).packed
    jobs = random_jobs(reference_table, 6, 0)
    plain = SchedulingProblem.from_jobs(cluster_for(6), jobs, reference_table)
    sol = solve(plain, "las_packed")
    assert any("no pair throughputs" in w for w in sol.warnings)
    packed = SchedulingProblem.from_jobs(cluster_for(6), jobs, reference_table, space_sharing=True)
    assert solve(packed, "las_packed").objective == pytest.approx(solve(packed, "las").objective)


def test_placement_twins_share_their_types_gpus(reference_table):
    rng = np.random.default_rng(3)
    keys = [k for k in reference_table.job_keys if k[1] in (2, 4)]
    jobs = [Job(f"j{i}", *keys[rng.integers(len(keys))], steps_remaining=1e5) for i in range(16)]
    cluster = Cluster({"v100": 8, "p100": 8, "k80": 8})
    inp = SchedulingProblem.from_jobs(cluster, jobs, reference_table, unconsolidated=True, space_sharing=True)
    assert inp.worker_types[3:] == [w + "_unconsolidated" for w in WORKERS]
    base_inp = SchedulingProblem.from_jobs(cluster, jobs, reference_table)
    for policy in ["las", "makespan", "hierarchical"]:
        sol = solve(inp, policy)
        sol.allocation.check()
        used = sol.allocation.scale_factors @ sol.allocation.values
        assert (used[:3] + used[3:] <= 8 + 1e-6).all()
    # the twins only add options: makespan (raw throughputs, no normalizer) can only improve
    assert solve(inp, "makespan").objective <= solve(base_inp, "makespan").objective * (1 + 1e-7)
    assert solve(inp, "max_throughput").allocation.values[:, 3:].sum() > 0  # some jobs run faster spread out


def test_partitioned_solve_is_valid_and_close(reference_table):
    jobs = random_jobs(reference_table, 200, seed=5, sfs=(1,))
    inp = SchedulingProblem.from_jobs(Cluster({w: 50 for w in WORKERS}), jobs, reference_table, space_sharing=True)
    sol = solve_partitioned(inp, "max_throughput", 2, compare=True)
    sol.allocation.check()
    assert sol.partition_gap is not None and sol.partition_gap < 0.02
    assert "x2 partitions" in sol.solver
    assert solve(inp, "las", partitions=2).allocation.check()


def test_cli_space_sharing_with_pairs_list(tmp_path, capsys):
    prob = {"cluster": {"v100": 1},
            "jobs": [{"id": "a", "throughputs": {"v100": 10}}, {"id": "b", "throughputs": {"v100": 10}},
                     {"id": "c", "throughputs": {"v100": 5}}],
            "pairs": [{"jobs": ["a", "b"], "throughputs": {"v100": [7, 6]}}]}
    path = tmp_path / "p.json"
    path.write_text(json.dumps(prob))
    assert main(["solve", "--problem", str(path), "--space-sharing", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert "a+b" in out["allocation"] and any("c" in w and "never share" in w for w in out["warnings"])
    assert main(["solve", "--problem", str(path), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert "a+b" not in out["allocation"] and any("ignored" in w for w in out["warnings"])


@pytest.mark.parametrize("pairs, field", [
    ([{"jobs": ["a"], "throughputs": {"v100": [1, 1]}}], "pairs[0].jobs"),
    ([{"jobs": ["a", "zz"], "throughputs": {"v100": [1, 1]}}], "pairs[0].jobs"),
    ([{"jobs": ["a", "b"], "throughputs": {"t4": [1, 1]}}], "pairs[0].throughputs"),
    ([{"jobs": ["a", "b"], "throughputs": {"v100": [1, -1]}}], "pairs[0].throughputs.v100"),
    ([{"jobs": ["a", "b"], "throughputs": {"v100": [1, 1]}, "x": 1}], "pairs[0]"),
    ([{"jobs": ["a", "b"], "throughputs": {"v100": [1, 1]}}, {"jobs": ["b", "a"], "throughputs": {"v100": [1, 1]}}],
     "pairs[1].jobs"),
    ({"a": 1}, "pairs"),
])
def test_bad_pairs_name_the_field(pairs, field):
    from gavel_ng.problem_io import parse_problem

    prob = {"cluster": {"v100": 1}, "jobs": [{"id": "a", "throughputs": {"v100": 10}},
                                             {"id": "b", "throughputs": {"v100": 10}}], "pairs": pairs}
    with pytest.raises(InputError) as err:
        parse_problem(prob, space_sharing=True)
    assert err.value.field == field


def test_pair_table_from_table_fills_one_sided_entries():
    table = ThroughputTable.from_gavel_dict({"v100": {
        "('A', 1)": {"null": 10.0, "('B', 1)": [6.0, 8.0]}, "('B', 1)": {"null": 16.0}}})
    pt = PairTable.from_table(table, [("A", 1), ("B", 1), ("A", 1)], ["v100"])
    assert list(pt.job_class) == [0, 1, 0]
    assert pt.frac[0, 1, 0] == pytest.approx(0.6) and pt.frac[1, 0, 0] == pytest.approx(0.5)
    assert pt.useful()[0, 1, 0] and g.solve(SchedulingProblem.build(
        ["a", "b"], ["v100"], [1], [[10.0], [16.0]], pairs=PairTable(np.array([0, 1]), pt.frac)), "las").ok


def test_gandiva_pairs_at_random_reproducibly(reference_table):
    jobs = random_jobs(reference_table, 30, seed=2)
    inp = SchedulingProblem.from_jobs(cluster_for(30), jobs, reference_table, space_sharing=True)
    a, b = solve(inp, "gandiva"), solve(inp, "gandiva")
    a.allocation.check()
    assert a.allocation.rows == b.allocation.rows and np.array_equal(a.allocation.values, b.allocation.values)
    assert any(len(r) == 2 for r in a.allocation.rows)
    assert all(t <= 1 + 1e-9 for t in a.allocation.job_totals().values())
    effective_from_rows(reference_table, inp, jobs, a.allocation)  # every kept pair helps
    plain = SchedulingProblem.from_jobs(cluster_for(30), jobs, reference_table)
    assert np.allclose(solve(plain, "gandiva").allocation.values, solve(plain, "isolated").allocation.values)
