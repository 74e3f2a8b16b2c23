"""The README's promises: its custom policy runs, every built-in policy is documented."""

import re
from pathlib import Path

import numpy as np
import pytest

import gavel_ng as g
from gavel_ng.cli import main
from gavel_ng.policies import list_policies

README = (Path(__file__).resolve().parents[1] / "README.md").read_text()


def custom_policy_source() -> str:
    blocks = re.findall(r"```python\n(.*?)```", README, re.S)
    return next(b for b in blocks if "@g.policy(" in b)


def test_readme_custom_policy_is_ten_lines_and_runs(tmp_path, capsys):
    src = custom_policy_source()
    assert len([line for line in src.splitlines() if line.strip()]) <= 10
    plugin = tmp_path / "my_policies.py"
    plugin.write_text(src)
    assert main(["solve", "--plugin", str(plugin), "--policy", "proportional_fairness",
                 "--example", "paper_example", "--json"]) == 0
    capsys.readouterr()
    inp = g.SchedulingProblem.build(["j0", "j1", "j2"], ["v100", "k80"], [1, 1], [[40, 10], [12, 4], [100, 50]])
    sol = g.solve(inp, "proportional_fairness")
    sol.allocation.check()
    assert sol.ok and sol.solver == "clarabel"
    # proportional fairness: no job may gain 1% in log-sum by a feasible shift; check it beats LAS on the sum
    p = g.Problem(inp)
    logsum = lambda x: np.log(p.normalized_thr.value(x)).sum()  # noqa: E731
    assert logsum(sol.x) >= logsum(g.solve(inp, "las").x) - 1e-6
    assert g.solve(inp, "proportional_fairness_agnostic").allocation.check()


def test_every_builtin_policy_is_in_the_readme_table():
    for name in list_policies():
        if not name.endswith("_agnostic") and name != "proportional_fairness":
            assert f"| `{name}` |" in README, name


@pytest.mark.parametrize("cmd", ["make demo", "make test"])
def test_readme_names_the_two_commands(cmd):
    assert cmd in README
