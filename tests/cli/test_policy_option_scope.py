"""Options given to several policies at once (`simulate --policy A,B --policy-option`, a sweep's policy
axis): `POLICY.KEY` reaches that policy only; a plain KEY every policy that takes it, refused only when
none does. Each run is the run of its policy alone with its own options."""

from __future__ import annotations

import json

import pytest

from gavel_ng.cli import build_parser, main
from gavel_ng.cli.sweep_cmd import axes_from_args
from gavel_ng.errors import InputError
from gavel_ng.policies.registry import options_per_policy
from gavel_ng.sweep.grid import SweepPoint, expand

RUN = ["--workload", "pollux", "--jobs", "4", "--hours", "0.2", "--cluster", "t4=8:4", "--json"]


def test_scoped_keys_reach_one_policy_and_plain_keys_those_that_take_them():
    got = options_per_policy(["goodput", "sia", "las"], {"sia.p": -0.25, "lam": 1.2, "restart_factor": False},
                             "--policy-option")
    assert got == {"goodput": {"restart_factor": False}, "sia": {"p": -0.25, "lam": 1.2, "restart_factor": False},
                   "las": {}}
    assert options_per_policy(["goodput"], {"lam": 1}, "f") == {"goodput": {"lam": 1}}   # alone: its own check


@pytest.mark.parametrize("options, value, reason", [
    ({"q": 1}, "q", "no policy given takes it (goodput takes p, restart_factor, waiting, service_hours, "
     "service_weight; las takes no options)"),
    ({"sia.p": 1}, "sia.p", "sia is not a policy given here (goodput, las)"),
])
def test_keys_no_policy_takes_are_refused_naming_the_flag(options, value, reason):
    with pytest.raises(InputError) as err:
        options_per_policy(["goodput", "las"], options, "--policy-option")
    assert str(err.value).startswith(f"--policy-option={value!r}: {reason}")


def _runs(capsys, *args: str) -> list[dict]:
    assert main(["simulate", *RUN, *args]) == 0
    data = json.loads(capsys.readouterr().out)
    rows = data["runs"] if "runs" in data else [data]
    return [{k: v for k, v in r.items() if k not in ("wall_seconds", "solve_seconds")} for r in rows]   # timings


def test_simulate_gives_each_policy_its_own_options(capsys):
    # scale_up: a plain key only sia takes; sia.p: scoped to sia (goodput takes a p of its own). Options that keep
    # the run short: lam=0.2 would make it unstable, a simulated 1440 h
    both = _runs(capsys, "--policy", "goodput,sia", "--policy-option", "scale_up=1", "--policy-option", "sia.p=-0.25")
    alone = _runs(capsys, "--policy", "sia", "--policy-option", "scale_up=1", "--policy-option", "p=-0.25")
    assert both == _runs(capsys, "--policy", "goodput") + alone
    assert alone != _runs(capsys, "--policy", "sia")      # sia's options changed its run: they reached it
    assert main(["simulate", *RUN, "--policy", "goodput,sia", "--policy-option", "q=1"]) == 2
    assert "--policy-option='q': no policy given takes it" in capsys.readouterr().err


def test_a_sweep_scopes_options_as_simulate_does():
    args = build_parser().parse_args(["sweep", "--results", "r.csv", "--static", "2", "--policy", "goodput,sia,las",
                                      "--policy-option", "sia.p=-0.25", "--policy-option", "restart_factor=false"])
    points = {p.policy: p for p in expand(*axes_from_args(args))}
    assert points["goodput"].options == {"restart_factor": False}
    assert points["sia"].options == {"p": -0.25, "restart_factor": False}
    assert points["las"].point_id == SweepPoint(static=2, policy="las").point_id   # runs with no option
    grid = expand({"policy": ["goodput", "sia"]}, {"static": 2, "policy_options": {"sia.lam": 2}})
    assert [p.options for p in grid] == [{}, {"lam": 2}]
    both = build_parser().parse_args(["sweep", "--results", "r.csv", "--static", "2", "--policy-option", "p=1",
                                      "--policy-options", '{"p": 2}'])
    with pytest.raises(InputError, match="--policy-option='p=1': give options as"):
        axes_from_args(both)
