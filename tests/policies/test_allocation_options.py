"""Allocation policies take options as round policies do: keyword arguments with defaults, given by
`--policy-option` (simulate, solve), a sweep's policy_options axis or a cluster config (issue 37)."""

from __future__ import annotations

import json
import textwrap

import numpy as np
import pytest

import gavel_ng as g
from gavel_ng.cli import main
from gavel_ng.errors import InputError

PLUGIN = textwrap.dedent('''
    import numpy as np

    import gavel_ng as g


    @g.policy("capped_maxmin", "max-min fairness using at most `share` of the cluster's GPUs")
    def capped_maxmin(p, share=1.0):
        gpus = p.cost_per_hour(np.ones(len(p.input.worker_types)))   # at $1 per GPU-hour: GPUs in use
        p.add_constraint(gpus <= share * p.capacity.sum())
        return p.maximize_min(p.normalized_thr)
''')
SMALL = ["--cluster", "v100=4,k80=4", "--static", "6"]


@pytest.fixture
def plugin(tmp_path, clean_registry):
    path = tmp_path / "capped.py"
    path.write_text(PLUGIN)
    return path


def test_an_allocation_policy_declares_its_keyword_arguments(plugin):
    from gavel_ng.policies import get_policy
    from gavel_ng.policies.plugins import load_plugins

    load_plugins([str(plugin)])
    assert get_policy("capped_maxmin").option_names() == ["share"]
    assert get_policy("capped_maxmin_agnostic").option_names() == ["share"]
    assert get_policy("las").option_names() == []


def test_solve_takes_the_option_and_it_changes_the_allocation(plugin, capsys):
    base = ["solve", "--plugin", str(plugin), "--policy", "capped_maxmin", "--example", "paper_example", "--json"]
    assert main(base) == 0
    full = json.loads(capsys.readouterr().out)
    assert main([*base, "--policy-option", "share=0.5"]) == 0
    half = json.loads(capsys.readouterr().out)
    used = lambda r: sum(sum(row.values()) for row in r["allocation"].values())   # noqa: E731
    assert used(half) <= 0.5 * used(full) + 1e-6 < used(full)


def test_simulate_takes_the_option_and_refuses_an_unknown_one(plugin, capsys):
    args = ["simulate", "--plugin", str(plugin), "--policy", "capped_maxmin", *SMALL, "--json"]
    assert main(args) == 0
    full = json.loads(capsys.readouterr().out)
    assert main([*args, "--policy-option", "share=0.25"]) == 0
    quarter = json.loads(capsys.readouterr().out)
    assert quarter["avg_jct_hours"] > full["avg_jct_hours"]
    assert main([*args, "--policy-option", "shares=0.25"]) == 2
    assert "capped_maxmin option='shares': unknown; capped_maxmin takes share" in capsys.readouterr().err
    assert main([*args, "--policy-option", "share=lots"]) == 2
    assert "must be a finite number" in capsys.readouterr().err


def test_a_sweep_varies_an_allocation_policys_option(plugin, tmp_path, capsys):
    from gavel_ng.sweep import ResultsStore

    results = tmp_path / "r.csv"
    assert main(["sweep", "--plugin", str(plugin), "--policy", "capped_maxmin,las", *SMALL,
                 "--policy-options", '{"share": 0.25}', "--policy-options", '{"share": 1.0}',
                 "--results", str(results), "--workers", "1"]) == 0
    df = ResultsStore(results).load()
    assert (df["status"] == "ok").all()
    mine = df[df["policy"] == "capped_maxmin"].set_index("policy_options")["avg_jct_hours"]
    assert mine['{"share": 0.25}'] > mine['{"share": 1.0}']
    assert df[df["policy"] == "las"]["policy_options"].isna().all()   # las takes no share: it ran once
    assert len(df) == 3


def test_a_cluster_config_gives_an_allocation_policy_its_options(plugin):
    from gavel_ng.policies import get_policy
    from gavel_ng.policies.plugins import load_plugins
    from gavel_ng.runtime.config import ClusterConfig

    load_plugins([str(plugin)])
    spec = get_policy("capped_maxmin")
    ClusterConfig(worker_types=["v100"], policy="capped_maxmin", policy_options={"share": 0.5}).check_policy(spec)
    with pytest.raises(InputError, match="cluster-config.policy_options"):
        ClusterConfig(worker_types=["v100"], policy="capped_maxmin",
                      policy_options={"budget": 0.5}).check_policy(spec)


def test_options_reach_every_path_of_the_registry(clean_registry):
    seen = []

    @g.policy("weighted_floor", "max-min of normalized throughput over a weight")
    def weighted_floor(p, weight=1.0):
        seen.append(weight)
        return p.maximize_min(p.normalized_thr * weight)

    inp = g.SchedulingProblem.build(["a", "b"], ["v100", "k80"], [1, 1], np.array([[4.0, 1.0], [2.0, 1.0]]))
    g.solve(inp, "weighted_floor", options={"weight": 2.0})
    g.solve(inp, "weighted_floor_agnostic", options={"weight": 3.0})
    g.solve(inp, "weighted_floor", partitions=2, options={"weight": 4.0})
    assert {2.0, 3.0, 4.0} <= set(seen) and 1.0 not in seen
