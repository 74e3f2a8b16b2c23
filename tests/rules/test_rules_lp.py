"""Rules over worker types in the LP: every policy's allocation keeps them (property test)."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import gavel_ng as g
from gavel_ng.errors import InputError
from gavel_ng.policies.lp.pipeline import agnostic_problem
from gavel_ng.policies.lp.problem import Problem
from gavel_ng.rules import ClusterRules, JobRules, RuleCompiler, Server

TYPES = ["v100", "p100", "k80"]
POLICIES = ["las", "las_agnostic", "las_pareto", "max_throughput", "max_throughput_agnostic", "fifo",
            "fifo_agnostic", "makespan", "ftf", "isolated", "gandiva", "allox", "hierarchical"]
SERVERS = [Server("v100", 4, frozenset({"nvlink"})), Server("v100", 4), Server("p100", 4), Server("k80", 4)]


@st.composite
def ruled_problems(draw):
    M = draw(st.integers(2, 7))
    T = np.array([[draw(st.floats(1, 100)) for _ in TYPES] for _ in range(M)])
    sf = [draw(st.sampled_from([1, 1, 2, 4])) for _ in range(M)]
    teams = [draw(st.sampled_from(["a", "b", None])) for _ in range(M)]
    rules = []
    for m in range(M):
        allowed = draw(st.one_of(st.none(), st.sets(st.sampled_from(TYPES), min_size=1).map(sorted)))
        labels = ("nvlink",) if draw(st.integers(0, 5)) == 0 else ()
        if labels:
            allowed, sf[m] = ["v100"], min(sf[m], 4)
        prefs = tuple(draw(st.permutations(allowed or TYPES))[:draw(st.integers(0, 2))])
        rules.append(JobRules(allowed_types=None if allowed is None else tuple(allowed), preferred_types=prefs,
                              labels=labels, entity=teams[m]))
    quotas = {"a": {"v100": draw(st.sampled_from([4, 6, 8])), "p100": 4}, "b": {"k80": 4, "p100": 8}}
    inp = g.SchedulingProblem.build([f"j{m}" for m in range(M)], TYPES, [8, 4, 4], T, scale_factors=sf,
                                    steps_remaining=[1000.0 * (m + 1) for m in range(M)],
                                    entities=teams, entity_specs={"a": g.policies.Entity(2.0),
                                                                  "b": g.policies.Entity(1.0)})
    return inp, rules, ClusterRules.from_dict({"quotas": quotas}), draw(st.sampled_from(POLICIES))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ruled_problems())
def test_allocations_never_break_the_rules(case):
    inp, rules, crules, policy = case
    try:
        ruled = RuleCompiler(crules, SERVERS).apply(inp, rules)
    except InputError as exc:   # a job the rules leave nowhere: named, with its rule
        assert exc.field.startswith("jobs[j") and exc.field.split(".")[-1] in ("allowed_types", "labels", "entity")
        return
    sol = g.solve(ruled, policy)
    X = sol.allocation.values
    sf = np.array([s for s in ruled.scale_factors])
    for m, r in enumerate(rules):
        if r.allowed_types is not None:      # allowed worker types
            banned = [j for j, w in enumerate(TYPES) if w not in r.allowed_types]
            assert np.all(X[m, banned] <= 1e-9), (policy, m, X[m])
    teams = [r.entity for r in rules]
    for team, quota in crules.quotas.items():   # entity quotas, per worker type
        mine = np.array([t == team for t in teams])
        for j, w in enumerate(TYPES):
            assert (sf[mine] * X[mine, j]).sum() <= quota.get(w, np.inf) + 1e-6, (policy, team, w, X)
    labelled = np.array(["nvlink" in r.labels for r in rules])   # jobs needing nvlink share its 4 GPUs
    assert (sf[labelled] * X[labelled, 0]).sum() <= 4 + 1e-6
    grouped = any(t in crules.quotas for t in teams) or labelled.any()   # a quota's or a label's rows
    assert (Problem(ruled).limit_block is not None) == grouped


def test_soft_preference_moves_the_allocation_but_never_forbids():
    inp = g.SchedulingProblem.build(["a", "b"], ["v100", "k80"], [1, 1], [[10.0, 9.0], [10.0, 9.5]])
    plain = g.solve(inp, "max_throughput").allocation.values
    pref = RuleCompiler(ClusterRules(preference_penalty=0.5)).apply(inp, [JobRules(preferred_types=("k80",)), None])
    X = g.solve(pref, "max_throughput").allocation.values
    assert plain[0, 0] == pytest.approx(1.0) and X[0, 1] == pytest.approx(1.0)   # moved to what it prefers
    only = RuleCompiler().apply(inp, [JobRules(preferred_types=("k80",)), JobRules(preferred_types=("k80",))])
    assert g.solve(only, "las").allocation.values.sum() > 1.5     # both still run: a penalty, not a ban


def test_infeasible_rules_name_the_job_and_the_rule():
    inp = g.SchedulingProblem.build(["a", "b"], ["v100", "k80"], [4, 4], [[10.0, 0.0], [10.0, 5.0]],
                                    scale_factors=[1, 2])
    with pytest.raises(InputError) as e:
        RuleCompiler().apply(inp, [JobRules(allowed_types=("k80",)), None])
    assert e.value.field == "jobs[a].allowed_types"
    with pytest.raises(InputError) as e:
        RuleCompiler(ClusterRules.from_dict({"quotas": {"t": {"v100": 1, "k80": 1}}})).apply(
            inp, [None, JobRules(entity="t")])
    assert e.value.field == "jobs[b].entity" and "quota" in e.value.reason
    with pytest.raises(InputError) as e:
        RuleCompiler(servers=[Server("v100", 4)]).apply(inp, [JobRules(labels=("nvlink",)), None])
    assert e.value.field == "jobs[a].labels"


def test_problem_file_rules_and_errors():
    from gavel_ng.problem_io import parse_problem

    data = {"cluster": {"v100": 4, "k80": 4}, "rules": {"quotas": {"t": {"v100": 1}}}, "entities": {"t": {}},
            "jobs": [{"id": "x", "throughputs": {"v100": 4, "k80": 1}, "entity": "t"},
                     {"id": "y", "throughputs": {"v100": 4, "k80": 1}, "entity": "t"},
                     {"id": "z", "throughputs": {"v100": 4, "k80": 1}, "allowed_types": ["k80"]}]}
    inp, _ = parse_problem(data)
    X = g.solve(inp, "las").allocation.values
    assert X[:2, 0].sum() <= 1 + 1e-6 and X[2, 0] == 0
    for bad, field in (({"allowed_types": ["a100"]}, "jobs[2].allowed_types"), ({"labels": 3}, "jobs[2].labels")):
        with pytest.raises(InputError) as e:
            parse_problem({**data, "jobs": data["jobs"][:2] + [{**data["jobs"][2], **bad}]})
        assert e.value.field == field
    with pytest.raises(InputError) as e:
        parse_problem({**data, "rules": {"quotas": {"t": {"v100": -1}}}})
    assert e.value.field == "rules.quotas.t.v100"
    with pytest.raises(InputError) as e:                 # a quota's entity is declared like a job's
        parse_problem({**data, "entities": {}, "jobs": data["jobs"][2:]})
    assert e.value.field == "rules.quotas" and e.value.value == "t"


def test_las_honours_a_preference_off_the_bottleneck():
    """The max-min LP pins only the bottleneck: with nothing more, the simplex left this job 0.31 of a
    K80 and 0.06 of a P100 although it prefers the P100 and a P100 was idle. Jobs that state
    preferences get a second phase (the minimum held), so the P100 time is its."""
    T = [[12.0, 3.0, 8.0], [10.0, 10.0, 3.0], [20.0, 8.0, 5.0]]
    inp = g.SchedulingProblem.build(["a", "b", "c"], TYPES, [1, 2, 2], T)
    ruled = RuleCompiler().apply(inp, [None, None, JobRules(preferred_types=("p100",))])
    assert ruled.soft_preferences and not inp.soft_preferences
    sol = g.solve(ruled, "las")
    X = sol.allocation.values
    assert X[2, 1] == pytest.approx(1.0 - X[2, 0], abs=1e-6) and X[2, 2] == pytest.approx(0.0, abs=1e-9)
    assert sol.objective == pytest.approx(g.solve(replace(ruled, soft_preferences=False), "las").objective)
    # an agnostic policy sees no types, so no preferences either
    assert not agnostic_problem(ruled).soft_preferences
