"""One simulator for both kinds of policy: round policies on Gavel traces and on Pollux workloads,
what is refused and why, and a plugin round policy."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from gavel_ng.cluster import Cluster
from gavel_ng.elastic import load_workload
from gavel_ng.errors import InputError
from gavel_ng.policies.plugins import load_plugins
from gavel_ng.simulator import SimConfig, simulate

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


@pytest.fixture
def gavel_trace(make_trace):
    return make_trace([("A", 1, 3600, 0), ("B", 1, 1800, 0), ("C", 1, 7200, 100), ("W", 4, 40000, 200),
                       ("C", 1, 900, 4000)])


def test_tiresias_runs_a_gavel_trace_of_fixed_jobs(tiny_table, gavel_trace):
    cluster = Cluster.parse("v100=4,k80=4", gpus_per_server=4)
    plans = []
    r = simulate(cluster, tiny_table, gavel_trace, SimConfig(policy="tiresias"), observe=plans.append)
    s = r.summary
    assert s["jobs_measured"] == 5 and not s["unstable"]
    assert s["round_seconds"] == 60.0 and s["adaptive_jobs"] == 0 and s["reallocations"] == 0
    assert s["mode"] == "round policy" and s["solver_fallbacks"] == 0
    assert s["policy_solves"] == s["rounds"] > 0 and s["policy_solved"] == "tiresias"
    assert s["gpu_hours"] == pytest.approx(float(r.jobs.gpu_seconds.sum()) / 3600, abs=1e-3)
    for p in plans:   # every job at its own scale factor, on a type where it runs
        assert (p.sfs == r.jobs.sf[p.member_job]).all()
        assert (r.jobs.T[r.jobs.key[p.member_job], p.types] > 0).all()


def test_pollux_refuses_a_gavel_trace(tiny_table, gavel_trace):
    cluster = Cluster.parse("v100=4,k80=4")
    with pytest.raises(InputError, match="pollux runs adaptive jobs only: this trace has no adaptive specs"):
        simulate(cluster, tiny_table, gavel_trace, SimConfig(policy="pollux"))


def test_goodput_runs_a_gavel_trace_fixed(tiny_table, gavel_trace):
    cluster = Cluster.parse("v100=4,k80=4", gpus_per_server=4)
    s = simulate(cluster, tiny_table, gavel_trace, SimConfig(policy="goodput", round_seconds=120)).summary
    assert s["jobs_measured"] == 5 and s["adaptive_jobs"] == 0 and s["round_seconds"] == 120.0


@pytest.mark.parametrize("change,flag", [({"space_sharing": True}, "--space-sharing"),
                                         ({"ideal": True}, "--ideal"),
                                         ({"estimate_throughputs": True}, "--estimate-throughputs"),
                                         ({"min_solve_interval": 600.0}, "--min-solve-interval")])
def test_settings_of_the_allocation_path_are_refused_for_round_policies(tiny_table, gavel_trace, change, flag):
    cluster = Cluster.parse("v100=4,k80=4")
    with pytest.raises(InputError, match=f"tiresias is a round policy: {flag} does not apply"):
        simulate(cluster, tiny_table, gavel_trace, SimConfig(policy="tiresias", **change))


def test_config_checks():
    with pytest.raises(InputError, match="--realloc-delay"):
        SimConfig(realloc_delay=-1.0)
    with pytest.raises(InputError, match="--realloc-delay"):
        SimConfig(realloc_delay=float("inf"))
    with pytest.raises(InputError, match="gpu_counts"):
        SimConfig(gpu_counts=(0, 2))
    assert SimConfig().round_seconds is None


def test_a_gavel_trace_needs_a_table(gavel_trace):
    with pytest.raises(InputError, match="table"):
        simulate(Cluster.parse("v100=4"), None, gavel_trace, SimConfig())


def test_plugin_round_policy_runs_both_kinds_of_trace(tiny_table, gavel_trace):
    load_plugins([str(EXAMPLES / "round_policy.py")])
    cluster = Cluster.parse("t4=8,v100=4", gpus_per_server=4)
    et = load_workload(cluster, jobs=12, hours=1, seed=0)
    r = simulate(cluster, None, et, SimConfig(policy="speedup_sum", options={"minimum": 2.0}))
    assert r.summary["jobs_measured"] == 12 and r.summary["adaptive_jobs"] == 12
    assert r.summary["reallocations"] >= 12 and np.all(r.jobs.progress == 1.0)
    g = simulate(Cluster.parse("v100=4,k80=4", gpus_per_server=4), tiny_table, gavel_trace,
                 SimConfig(policy="speedup_sum")).summary
    assert g["jobs_measured"] == 5 and g["adaptive_jobs"] == 0


def test_admission_applies_to_round_policies(tiny_table, gavel_trace):
    from gavel_ng.rules import ClusterRules

    rules = ClusterRules.from_dict({"admission": {"max_queue": 2}})
    s = simulate(Cluster.parse("v100=4,k80=4", gpus_per_server=4), tiny_table, gavel_trace,
                 SimConfig(policy="tiresias", rules=rules)).summary
    assert s["refused"] > 0 and s["jobs_measured"] == 5 - s["refused"]


def test_a_round_policy_keeps_allowed_types_and_refuses_preferences(tiny_table, gavel_trace):
    """A job's allowed_types zero its rates elsewhere, so no round policy picks them (as on a cluster);
    a soft preference has no meaning to a round policy and is refused naming the job and the field."""
    from dataclasses import replace

    from gavel_ng.rules import JobRules

    cluster = Cluster.parse("v100=4,k80=4", gpus_per_server=4)
    ruled = replace(gavel_trace, rules=[None, None, JobRules(allowed_types=("k80",)), None, None])   # job C
    plans = []
    for policy in ("tiresias", "goodput"):
        s = simulate(cluster, tiny_table, ruled, SimConfig(policy=policy), observe=plans.append).summary
        assert s["jobs_measured"] == 5
    on_c = [int(t) for p in plans for m, t in zip(p.member_job, p.types) if m == 2]
    assert on_c and set(on_c) == {1}            # k80 only, although C runs as fast on the v100
    preferring = replace(gavel_trace, rules=[JobRules(preferred_types=("v100",))] + [None] * 4)
    with pytest.raises(InputError, match=r"trace job 0 rules.preferred_types"):
        simulate(cluster, tiny_table, preferring, SimConfig(policy="tiresias"))


def test_a_round_with_no_job_to_place_is_not_counted_as_a_decision(tiny_table, make_trace):
    trace = make_trace([("A", 1, 600, 0), ("B", 1, 600, 20000)])
    seen = []
    # planned at the boundary: planned ahead, the round after job 0 is done still plans it (a decision) and
    # runs nothing (no plan observed); tests/simulator/test_plan_ahead.py
    s = simulate(Cluster.parse("v100=4,k80=4"), tiny_table, trace, SimConfig(policy="tiresias", plan_ahead=False),
                 observe=seen.append).summary
    assert s["jobs_measured"] == 2
    assert s["policy_solves"] == sum(len(p.member_job) > 0 for p in seen) < s["rounds"]
